"""How a run communicates, chosen by the planner: `choose_execution` settles a config's `ExecutionOptions`.

A run's *execution options* change what moves and where, never what is computed (a reordered, sparse, cached,
full-row or deferred run trains the plain run's numbers): the algorithm and its grid, ``comm`` (dense or
sparse SpMM communication), the vertex order, cached Â panels, full feature rows and the deferred weight
gather (and ``overlap``, which the cost model does not price): the configuration's execution section,
`gridgnn.config.ExecutionOptions`, is the one list of them. Each may be *pinned* by the user (a flag) or left
*free* (``auto`` / unset): `choose_execution` prices every combination of the free ones around the
pinned ones with `gridgnn.plan.planner.plan`, on the graph itself (exact block non-zeros, in every order it
prices), and settles all of them at once. ``gridgnn train`` and ``gridgnn plan`` both call it with the same
arguments, so they agree on the same command.

What "best" means is the machine profile's (`gridgnn.cost.profile`): the fastest predicted training step
(communication plus computation, the slowest rank); ties go to fewer bytes per rank, then to fewer options.
A reordering's set-up time is estimated (`reorder_seconds`) and reported, not ranked: it is paid once. On a
cluster profile bytes are what costs; on one CPU machine's loopback they are nearly free and computation
decides.

``--comm-precision auto`` is the one free option that changes results: the planner prices the step in fp32
and in ``bf16`` (`AUTO_PRECISIONS`; the lowest precision whose accuracy the study in
``results/comm_precision/accuracy.md`` found within reach of fp32's) and takes bf16 only when its best
configuration is predicted at least `AUTO_PRECISION_GAIN` faster, saying so and naming the accuracy risk
(`choose_precision`).

Vertex orders priced when the order is free: the graph's own order, and ``metis-balanced`` when pymetis is
installed and the graph can be reordered (not a prepared folder, which keeps the order it was made with).
Not collective; deterministic (every torchrun worker reaches the same choice on the same graph).
"""

from __future__ import annotations

import dataclasses
import importlib.util
from collections.abc import Callable

from gridgnn.config import SWITCHES, ExecutionOptions, TrainConfig, model_comms
from gridgnn.cost.graph_stats import GraphStats
from gridgnn.cost.profile import MachineProfile, default_profile, load_profile
from gridgnn.cost.spmm_cost import SizeInfo
from gridgnn.errors import ConfigError
from gridgnn.grid.shape import GridShape, resolve_grid

AUTO_ORDER = "metis-balanced"
"""The reordering the planner prices beside the graph's own order when ``--reorder`` is free: METIS's k-way
cut into the grid's row blocks with equal vertices and non-zeros (locality for sparse communication, balance
for the slowest rank)."""

REORDER_SECONDS_PER_ENTRY = 6e-7
"""Estimated set-up time of a METIS reordering per stored entry of Â (measured on the development machine:
``metis-balanced`` into 2-8 parts of Amazon Computers' 505,474 entries took 0.10-0.26 s, 0.2-0.5 µs per
entry; the estimate takes the high end). A model, not a measurement, so that every worker prices alike."""

UNSET = {"comm": "auto", "reorder": "auto", **dict.fromkeys(SWITCHES)}
"""The `TrainConfig` values of the execution options nobody pinned: what ``gridgnn train``, ``gridgnn plan`` and
`gridgnn.fit` on several processes pass for an option no flag or argument names (the planner decides).
`TrainConfig`'s own defaults are the plain pinned values (dense, natural order, switches off) a library
caller who builds one gets."""


def metis_available() -> bool:
    """Whether pymetis is installed (METIS orders can be priced and trained on)."""
    return importlib.util.find_spec("pymetis") is not None


def orders_to_price(options: ExecutionOptions, graph) -> tuple[str, ...]:
    """The vertex orders `choose_execution` prices for ``graph``: the pinned one, else the graph's own
    (``none``, or a prepared folder's) and, where it can be made, `AUTO_ORDER`."""
    if options.reorder != "auto":
        return (options.reorder,)
    have = getattr(graph, "meta", {}).get("reorder", "none")
    if have == "double-random":  # Â's second column order serves 2D and 3D; the vertex order alone, every grid
        return (have, "random")
    if have != "none" or hasattr(graph, "norm_adj") or not metis_available():  # a prepared folder keeps its order
        return (have,)
    return ("none", AUTO_ORDER)


def metis_note(options: ExecutionOptions) -> str | None:
    """The line that says what installing pymetis would give a run whose order is free, or None."""
    if options.reorder != "auto" or metis_available():
        return None
    return ("note       pymetis is not installed, so the planner priced the graph's own vertex order only: "
            "'pip install pymetis' lets it price METIS orders, which move several times fewer bytes on graphs "
            "with locality (sparse communication)")


def reorder_seconds(stats: GraphStats) -> Callable[[str], float]:
    """A reordering's estimated set-up time on ``stats``' graph (`REORDER_SECONDS_PER_ENTRY`; the cheap
    orders ``random`` and ``rcm`` are priced alike, an upper bound)."""
    return lambda order: 0.0 if order == "none" else REORDER_SECONDS_PER_ENTRY * stats.nnz


def this_device_type() -> str:
    """``cuda`` when this machine's training would run on a CUDA device, else ``cpu`` (what
    `gridgnn.grid.process_grid.default_device` decides), without importing torch on a machine with no NVIDIA
    driver (``gridgnn plan`` stays quick there)."""
    import sys
    from pathlib import Path

    if "torch" not in sys.modules and not Path("/proc/driver/nvidia/version").exists():
        return "cpu"
    from gridgnn.grid.process_grid import default_device

    return default_device().type


def profile_of(options: ExecutionOptions, device_type: str) -> MachineProfile:
    """The machine profile ``options`` name, else the one of ``device_type`` (`default_profile`)."""
    return load_profile(options.profile) if options.profile else default_profile(device_type)


def pinned_shapes(options: ExecutionOptions, world_size: int) -> list[GridShape] | None:
    """The one grid a pinned algorithm runs on (`resolve_grid`: its ``--grid``/``--replication``, else its
    default shape), or None when the algorithm is free (every shape is priced)."""
    if options.algo == "auto":
        return None
    return [resolve_grid(options.algo, world_size, replication=options.replication, grid=options.grid)]


def options_to_price(options: ExecutionOptions) -> dict:
    """`gridgnn.plan.planner.plan`'s switch arguments: each pinned switch its value, each free one both."""
    def values(name: str) -> tuple[bool, ...]:
        value = getattr(options, name)
        return (False, True) if value is None else (value,)

    return {"cache_options": values("cache_panels"), "rows_options": values("full_feature_rows"),
            "defer_options": values("defer_weight_gather")}


class OrderedStats:
    """``(order, row_blocks, depth) -> GraphStats`` of a graph in that order as training would cut it
    (`gridgnn.data.reorder.reorder_graph` into the grid's row blocks, each into ``depth`` sub-blocks; the
    cheap orders do not depend on the grid), memoized with the reordered graphs, so that the run trains on
    the very graph that was priced (`graph`: METIS runs once per order and grid). A prepared folder is read
    in place, in its own order. ``say``: where each reordering's one line goes (None: nowhere)."""

    def __init__(self, graph, model: str, seed: int, say: Callable[[str], None] | None = None) -> None:
        self.source, self.model, self.seed, self.say = graph, model, seed, say
        self.memo: dict[tuple, tuple[object, GraphStats]] = {}

    def key(self, order: str, rows: int, depth: int) -> tuple:
        """The memo key: the order, and the grid's row blocks and depth where the order depends on them."""
        if order in ("none", self.source.meta.get("reorder", "none")):
            return ("none",)
        return (order, rows, depth) if order.startswith("metis") else (order,)

    def __call__(self, order: str, rows: int, depth: int) -> GraphStats:
        return self._entry(order, rows, depth)[1]

    def graph(self, order: str, rows: int, depth: int):
        """The graph in ``order`` cut for (``rows``, ``depth``), as priced (reordered once)."""
        return self._entry(order, rows, depth)[0]

    def _entry(self, order: str, rows: int, depth: int) -> tuple[object, GraphStats]:
        from gridgnn.data.prepared import PreparedGraph
        from gridgnn.data.reorder import reorder_graph, same_vertex_order, with_column_order

        key = self.key(order, rows, depth)
        swap = order != have_order(self.source) and same_vertex_order(have_order(self.source), order)
        if key != ("none",) and not swap and isinstance(self.source, PreparedGraph):
            have = self.source.meta.get("reorder", "none")
            raise ConfigError(f"prepared graph '{self.source.folder}' was made with --reorder {have}, but --reorder "
                              f"{order} was asked: train with --reorder {have}, or prepare it again with "
                              f"--reorder {order}")
        if key not in self.memo:
            if key == ("none",) or swap:  # the vertex order it has (swap: another column order of it)
                graph = with_column_order(self.source, order, self.seed) if swap else self.source
            else:
                graph = reorder_graph(self.source, order, rows, self.seed, nest=depth)
            if key != ("none",) and not swap and self.say is not None:
                self.say(_reorder_line(graph, order, rows, depth))
            if isinstance(graph, PreparedGraph):
                stats = GraphStats.from_graph(graph, normalized_adj=graph.norm_adj)
            else:
                from gridgnn.plan.op_templates import self_loops_of

                stats = GraphStats.from_graph(graph, self_loops=self_loops_of(self.model))
            self.memo[key] = (graph, stats)
        return self.memo[key]


def have_order(graph) -> str:
    """The vertex order ``graph`` is in (``meta["reorder"]``; ``none`` for the source's own)."""
    return getattr(graph, "meta", {}).get("reorder", "none")


def _reorder_line(graph, order: str, rows: int, depth: int) -> str:
    """One line on a reordering: its time and the non-zero imbalance of the row blocks before and after."""
    meta = graph.meta
    into = f"{rows} parts" + (f" of {depth}" if depth > 1 else "")
    return (f"reorder    {order} into {into}: {meta['reorder_seconds']:.3f} s, non-zero imbalance (max/mean per "
            f"row block) {meta['nnz_imbalance_before']:.3f} -> {meta['nnz_imbalance_after']:.3f}")


def choose_execution(config: TrainConfig, graph, world_size: int, device_type: str = "cpu"):
    """Settle every free execution option of ``config`` for ``world_size`` > 1 processes on ``graph`` (a
    `gridgnn.data.graph.Graph` or a prepared folder): returns (the settled `TrainConfig`, the
    `gridgnn.plan.planner.Plan` it was read from, the graph in the chosen order as priced, or None when the
    order is the graph's own). Pinned options keep their values (a pinned switch that takes no effect on the
    chosen grid stays as given); free ones take the best entry's. Deterministic."""
    from gridgnn.plan.planner import plan

    options = ExecutionOptions.of(config)
    base = OrderedStats(graph, config.model, config.seed)
    stats = base("none", 1, 1)
    def plan_in(precision: str):
        return plan(config, stats, world_size, profile=profile_of(options, device_type),
                    memory_per_proc=config.memory_per_proc, comms=model_comms(config.model, config.comm),
                    shapes=pinned_shapes(options, world_size), orders=orders_to_price(options, graph),
                    stats_for_order=base, reorder_s=reorder_seconds(stats),
                    sizes=SizeInfo(precision=precision), **options_to_price(options))

    ranked, _ = choose_precision(options.comm_precision, plan_in)
    best = ranked.best
    ordered = base.graph(best.reorder, best.shape.sizes[0], best.shape.depth)
    return settle(config, best), ranked, (None if ordered is graph else ordered)


def settle(config: TrainConfig, best) -> TrainConfig:
    """``config`` with its free options set from the plan entry ``best`` (and its grid, for ``algo=auto``)."""
    options = ExecutionOptions.of(config)
    fields = {"comm": best.comm} if options.comm == "auto" else {}
    if options.reorder == "auto":
        fields["reorder"] = best.reorder
    for name, value in (("cache_panels", best.cache_panels), ("full_feature_rows", best.feature_rows),
                        ("defer_weight_gather", best.defer_weight_gather)):
        if getattr(options, name) is None:
            fields[name] = value
    if options.algo == "auto":
        fields.update(algo=best.algo, **best.shape.config_fields())
    if options.comm_precision == "auto":
        fields["comm_precision"] = best.comm_precision
    return dataclasses.replace(config, **fields)


AUTO_PRECISIONS = ("fp32", "bf16")
"""What ``--comm-precision auto`` chooses between: exact, and bf16 (half the activation bytes; fp16 saves as
much with a narrower range, int8 more with a larger accuracy risk: neither is chosen unasked)."""

AUTO_PRECISION_GAIN = 0.05
"""``--comm-precision auto`` takes bf16 only when its predicted step is at least this fraction faster than
fp32's (a change of results for less is not worth it)."""


def choose_precision(precision: str, plan_in: Callable[[str], object]) -> tuple[object, str | None]:
    """The `gridgnn.plan.planner.Plan` to run for ``--comm-precision`` ``precision`` (``plan_in(p)`` plans in
    precision p), and for ``auto`` one line saying which precision it chose and why (None when pinned)."""
    if precision != "auto":
        return plan_in(precision), None
    exact, low = (plan_in(p) for p in AUTO_PRECISIONS)
    fast, slow = low.best.prediction.epoch_s, exact.best.prediction.epoch_s
    if low.best.fits and fast <= (1 - AUTO_PRECISION_GAIN) * slow:
        return _noted(low, f"--comm-precision auto chose bf16: predicted {fast * 1e3:.3g} ms per step against "
                     f"{slow * 1e3:.3g} ms in fp32; accuracy risk: activations rounded to 8 bits of mantissa "
                     "(results/comm_precision/accuracy.md measures it; --comm-precision fp32 keeps the run exact)")
    return _noted(exact, f"--comm-precision auto kept fp32: bf16 would be predicted {fast * 1e3:.3g} ms per "
                  f"step against {slow * 1e3:.3g} ms, less than {AUTO_PRECISION_GAIN:.0%} faster")


def _noted(ranked, line: str) -> tuple[object, str]:
    """``ranked`` (a `Plan`) carrying ``line`` in its reason, and the line."""
    return dataclasses.replace(ranked, precision_note=line), line
