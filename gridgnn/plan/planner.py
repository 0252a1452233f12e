"""Rank every valid way to run on P processes by predicted epoch time (pure): algorithm, grid shape and
replication, and the execution options of `gridgnn.plan.execution` (``comm``, vertex order, cached panels,
full feature rows, deferred weight gather).

``comms`` adds the sparse SpMM variants (``--comm sparse``, `gridgnn.cost.sparse_cost`) next to the dense ones,
priced on the same shape statistics; ``orders`` prices each vertex order on the statistics of the graph as
training would order it for each grid; ``cache_options``, ``rows_options`` and ``defer_options`` price each
switch off and on where it takes effect (an option that changes nothing on a grid is priced once, off).

`plan` prices each configuration with `gridgnn.cost.epoch_model.predict_epoch` and sorts them: configurations
that fit the memory per process first, then by predicted training-step time (the slowest rank's
communication plus computation), then by bytes per rank, then by how few options they need; a reordering's
estimated set-up time is reported beside, not ranked (it is paid once, the step every epoch). The first is
the best; `Plan.reason` says why in one line (for ``gridgnn train``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from gridgnn.config.choices import COLUMN_ORDERED, COVER_ALGOS
from gridgnn.cost.epoch_model import EpochPrediction, ModelSpec, predict_epoch, stats_for
from gridgnn.cost.graph_stats import GraphStats
from gridgnn.cost.memory_model import sparse_features
from gridgnn.cost.profile import MachineProfile
from gridgnn.cost.rank_cost import nnz_bounds, shape_blocks
from gridgnn.cost.spmm_cost import FLOAT32, SizeInfo
from gridgnn.errors import ConfigError
from gridgnn.grid.shape import ALGORITHMS, GridShape

ALGO_ORDER = {algo: k for k, algo in enumerate(ALGORITHMS)}
COMM_ORDER = ("dense", "sparse", "cover")
"""Ties between SpMM variants go to the plainer, in this order."""
NEAR_TIE = 0.05
"""Fitting configurations whose predicted step is within this share of the fastest one count as tied, and
the one whose busiest rank moves the fewest bytes is chosen: the model's times are not more accurate than a
few percent (latency terms, contention), while bytes are exact, and what a shared network charges for."""


def candidate_shapes(world_size: int, algos: tuple[str, ...] | list[str] = ALGORITHMS) -> list[GridShape]:
    """Every valid grid on ``world_size`` processes: 1D; 1.5D for each replication c | P with c > 1
    (c = 1 is 1D); 2D for each factorization pr x pc; 3D for each q x q x d with q² | P."""
    from gridgnn.grid.shape import AXES

    p = world_size
    divisors = [d for d in range(1, p + 1) if p % d == 0]
    shapes = []
    if "1d" in algos:
        shapes.append(GridShape("1d", AXES["1d"], (p,)))
    if "1.5d" in algos:
        shapes += [GridShape("1.5d", AXES["1.5d"], (p // c, c)) for c in divisors if c > 1]
    if "2d" in algos:
        shapes += [GridShape("2d", AXES["2d"], (pr, p // pr)) for pr in divisors]
    if "3d" in algos:
        shapes += [GridShape("3d", AXES["3d"], (q, q, p // (q * q))) for q in range(1, p + 1)
                   if q * q <= p and p % (q * q) == 0]
    return shapes


@dataclass
class PlanEntry:
    """One priced configuration."""

    shape: GridShape
    prediction: EpochPrediction
    fits: bool
    best: bool = False
    run_flags: tuple[str, ...] = ()
    """The ``gridgnn train`` flags of the data and model that were priced (`plan`'s ``run_flags``)."""
    comm: str = "dense"
    """``dense`` or ``sparse``: how the SpMMs move X (``gridgnn train --comm``)."""
    cache_panels: bool = False
    """Priced with ``--cache-panels`` on a grid whose Â panels move (received once, at set-up)."""
    feature_rows: bool = False
    """Priced with ``--full-feature-rows`` on a grid where it takes effect (`ModelSpec.keeps_feature_rows`)."""
    defer_weight_gather: bool = False
    """Priced with ``--defer-weight-gather`` on a grid where it takes effect (`ModelSpec.defers_weight_gather`)."""
    reorder: str = "none"
    """The vertex order priced (``gridgnn train --reorder``): ``none``, or a reordering of the graph."""
    reorder_s: float = 0.0
    """The reordering's estimated set-up time (`gridgnn.plan.execution.reorder_seconds`), once per run."""
    comm_precision: str = "fp32"
    """The wire precision of the activation phases priced (``gridgnn train --comm-precision``)."""

    @property
    def tricks(self) -> int:
        """How many execution options this configuration needs beyond a dense run in natural order (ties go to
        the fewer)."""
        return (self.comm != "dense") + (self.reorder != "none") + self.cache_panels + self.feature_rows \
            + self.defer_weight_gather
    baseline_bytes: int = 0
    """What each process holds before any data (`gridgnn.cost.process_baseline`), counted in `memory_needed`."""

    @property
    def memory_needed(self) -> int:
        """Bytes the busiest process needs: the model's working set plus the process baseline."""
        return int(self.prediction.memory_bytes.max()) + self.baseline_bytes

    @property
    def label(self) -> str:
        """``algo grid``, with `` sparse`` for a sparse variant, `` cached`` for cached panels and the order."""
        return (f"{self.algo} {self.grid}" + (f" {self.comm}" if self.comm != "dense" else "")
                + (" cached" if self.cache_panels else "") + (f" {self.reorder}" if self.reorder != "none" else ""))

    @property
    def spmm(self) -> str:
        """The SpMM variant in a word: ``dense`` or ``sparse``, with ``+cache`` for cached panels, ``+rows``
        for full feature rows and ``+defer`` for the deferred weight gather."""
        return (self.comm + ("+cache" if self.cache_panels else "") + ("+rows" if self.feature_rows else "")
                + ("+defer" if self.defer_weight_gather else ""))

    @property
    def algo(self) -> str:
        return self.shape.algo

    @property
    def grid(self) -> str:
        return self.shape.label()

    @property
    def replication(self) -> int:
        return self.shape.replication

    def to_dict(self) -> dict:
        """The JSON object of ``gridgnn plan --json`` (bytes, calls and memory: max over ranks, one epoch)."""
        pred = self.prediction
        return {
            "algo": self.algo, "grid": self.grid, "replication": self.replication, "comm": self.comm,
            "cache_panels": self.cache_panels, "full_feature_rows": self.feature_rows,
            "defer_weight_gather": self.defer_weight_gather, "reorder": self.reorder,
            "comm_precision": self.comm_precision, "predicted_reorder_s": self.reorder_s,
            "world_size": self.shape.world_size,
            "bytes_per_rank": int(pred.bytes.max()), "calls_per_rank": int(pred.calls.max()),
            "bytes_by_phase": {ph: int(v.max()) for ph, v in pred.bytes_by_phase.items()},
            "memory_per_rank_bytes": self.memory_needed,
            "memory_by_component": {**{k: int(v.max()) for k, v in pred.memory.items()},
                                    "process_baseline": self.baseline_bytes},
            "predicted_comm_s": float(pred.comm_s.max()), "predicted_compute_s": float(pred.compute_s.max()),
            "predicted_epoch_s": pred.epoch_s,
            "setup_bytes_per_rank": int(pred.setup_bytes.max()), "predicted_setup_s": float(pred.setup_s.max()),
            "fits": self.fits, "best": self.best,
            "exact_blocks": pred.stats_exact, "profile": pred.profile_name,
        }

    def train_flags(self) -> list[str]:
        """The ``gridgnn train`` flags that run exactly what was priced: the data and model flags given to
        `plan` (``run_flags``: dataset, data root, direction, seed; layers, hidden width, order), then this
        configuration. A plan made on statistics names no dataset: add ``--dataset``."""
        flags = [*self.run_flags, "--algo", self.algo, "--nprocs", str(self.shape.world_size)]
        flags += self.shape.grid_flags()
        flags += ["--comm", self.comm, "--reorder", self.reorder]
        for name, on in (("cache-panels", self.cache_panels), ("full-feature-rows", self.feature_rows),
                         ("defer-weight-gather", self.defer_weight_gather)):
            flags.append(f"--{name}" if on else f"--no-{name}")
        if self.comm_precision != "fp32":
            flags += ["--comm-precision", self.comm_precision]
        return flags


@dataclass
class Plan:
    """Ranked configurations (best first) and the statistics they were priced on."""

    entries: list[PlanEntry]
    stats: GraphStats
    spec: ModelSpec
    profile: MachineProfile
    memory_limit: int | None
    comms: tuple[str, ...] = ("dense",)
    precision_note: str | None = None
    """With ``--comm-precision auto``: which precision was chosen and why (`gridgnn.plan.execution`)."""

    @property
    def best(self) -> PlanEntry:
        """The first entry: the fastest that fits, or when none fits the fastest (its ``best`` flag False)."""
        return self.entries[0]

    @property
    def reason(self) -> str:
        """One line: which configuration and why (predicted time against the runner-up)."""
        best = self.best
        pred = best.prediction
        comm = f" with {best.comm} communication" if best.comm != "dense" or self.comms != ("dense",) else ""
        extras = [name for name, on in (("cached panels", best.cache_panels), ("full feature rows",
                  best.feature_rows), ("deferred weight gather", best.defer_weight_gather)) if on]
        if best.reorder != "none":
            extras.insert(0, f"{best.reorder} order")
        comm += "".join(f", {extra}" for extra in extras)
        text = (f"{best.algo} grid {best.grid}{comm} on {best.shape.world_size} processes: predicted "
                f"{_seconds(pred.epoch_s)} per epoch ({_seconds(float(pred.comm_s.max()))} communication, "
                f"{_human(int(pred.bytes.max()))} per rank)")
        rivals = [e for e in self.entries[1:] if e.fits]
        if rivals:
            text += ", " + _against(best, rivals[0])
        if not best.fits:
            least = min(e.memory_needed for e in self.entries)
            text += f"; no configuration fits the memory per process (the least needs {_human(least)})"
        source = "exact block nnz" if self.stats.exact else "uniform-nnz estimate"
        note = f"; {self.precision_note}" if self.precision_note else ""
        return text + f"; profile {self.profile.name}, {source}{note}"

    def to_json(self) -> list[dict]:
        return [e.to_dict() for e in self.entries]


def _against(best: PlanEntry, other: PlanEntry) -> str:
    """How ``best`` compares with the runner-up ``other``: a speed-up, a near tie (`NEAR_TIE`) it won on
    bytes, or for a tie (within 0.5 %) what broke it (fewer bytes per rank, else the fixed order of
    algorithms and shapes)."""
    mine, theirs = best.prediction.epoch_s, other.prediction.epoch_s
    rival = f"{other.label} ({_seconds(theirs)})"
    mine_bytes, their_bytes = int(best.prediction.bytes.max()), int(other.prediction.bytes.max())
    if theirs < mine / 1.005:
        return (f"within {NEAR_TIE:.0%} of the fastest, {rival}, and chosen for fewer bytes per rank "
                f"({_human(mine_bytes)} against {_human(their_bytes)})")
    if theirs > 1.005 * mine and mine > 0:
        return f"{theirs / mine:.2f}x faster than the next, {rival}"
    why = (f"fewer bytes per rank ({_human(mine_bytes)} against {_human(their_bytes)})"
           if mine_bytes < their_bytes else "the fixed order of algorithms and shapes (same time and bytes)")
    return f"tied with {rival}, chosen for {why}"


def plan(model, graph, world_size: int, *, profile: MachineProfile | None = None,
         memory_per_proc: int | None = None, algos: tuple[str, ...] | list[str] = ALGORITHMS,
         sizes: SizeInfo = FLOAT32, run_flags: tuple[str, ...] | list[str] | None = None,
         comms: tuple[str, ...] | list[str] = ("dense",), cache_panels: bool = False,
         shapes: list[GridShape] | None = None, orders: tuple[str, ...] = ("none",),
         stats_for_order: Callable[[str, int, int], GraphStats] | None = None,
         cache_options: tuple[bool, ...] | None = None, rows_options: tuple[bool, ...] | None = None,
         defer_options: tuple[bool, ...] | None = None,
         reorder_s: Callable[[str], float] | None = None) -> Plan:
    """Price every configuration for ``world_size`` processes and rank them (best first).

    ``model``: a `ModelSpec` or anything with ``layers``, ``hidden``, ``order`` (a `TrainConfig`).
    ``graph``: `GraphStats` or a loaded `Graph`. ``memory_per_proc``: bytes available per process (default:
    the profile's; None means unlimited), against which each entry's working set plus the process baseline of
    the profile's device (`gridgnn.cost.process_baseline`) is compared. The first entry has ``best`` set when it
    fits (none when nothing fits). ``run_flags``: the
    ``gridgnn train`` flags naming the graph (``--dataset``, ...), which every entry's `PlanEntry.train_flags`
    puts before the model's (``--layers``, ``--hidden``, ``--order``: always written out) and its own.
    ``comms``: the SpMM variants to price for every shape (``dense``, ``sparse``). ``shapes``: the grids to
    price (default: every shape of ``algos``, `candidate_shapes`).

    Vertex orders: ``orders`` names the orders to price (``none`` and reorderings); ``stats_for_order(order,
    row_blocks, depth)`` gives the statistics of the graph in that order as training would cut it for a grid
    of (row blocks, depth) (a METIS reordering cuts into the grid's row blocks, on 3D each block again into
    its depth sub-blocks), so each shape is priced on its own order; without it, every shape is priced on
    ``graph``'s statistics. ``reorder_s(order)``:
    a reordering's estimated set-up time, reported with each entry (`PlanEntry.reorder_s`); the ranking is
    by the training step alone, which is what a run repeats.

    Switches: ``cache_options`` (default ``(cache_panels,)``), ``rows_options`` and ``defer_options`` (default:
    ``model``'s ``full_feature_rows`` and ``defer_weight_gather``) list the values to price of
    ``--cache-panels``, ``--full-feature-rows`` and ``--defer-weight-gather``; a value that takes no effect on
    a grid is priced as off, once.
    """
    from gridgnn.cost.process_baseline import process_baseline
    from gridgnn.cost.profile import GPU_CLUSTER
    from gridgnn.plan.op_templates import spec_for

    spec = spec_for(model, graph)  # the built-in kinds from their committed traces: no torch
    stats = stats_for(spec, graph)
    profile = GPU_CLUSTER if profile is None else profile
    limit = memory_per_proc if memory_per_proc is not None else profile.memory_per_proc_bytes
    flags = (*(run_flags or ()), "--layers", str(spec.layers), "--hidden", str(spec.hidden), "--order", spec.order)
    asked = list(algos) if shapes is None else sorted({shape.algo for shape in shapes})  # for a refusal's line
    shapes = [shape for shape in (candidate_shapes(world_size, algos) if shapes is None else shapes)
              if shape.algo == "1d" or stats.num_nodes >= max(shape.sizes[0], 1)]
    if spec.traced.passes_messages:  # a message runs where whole rows (1D, 1.5D) or a separable one's columns
        separable = spec.traced.messages_separable  # and every edge into them live (2D, 3D)
        shapes = [shape for shape in shapes if not shape.splits_features or separable]
    if stats_for_order is None:
        def stats_for_order(order: str, rows: int, depth: int) -> GraphStats:
            return stats
    variants = [(cache, dataclasses.replace(spec, full_feature_rows=rows, defer_weight_gather=defer))
                for cache in (cache_options or (cache_panels,))
                for rows in (rows_options or (spec.full_feature_rows,))
                for defer in (defer_options or (spec.defer_weight_gather,))]
    entries = []
    baseline = process_baseline(profile.device)
    for order in orders:
        in_columns = order in COLUMN_ORDERED  # dense 2D and 3D only, not attention (`check_column_order`)
        order_shapes = [s for s in shapes if s.splits_features and not spec.traced.attends] if in_columns else shapes
        by_rows = {(s.sizes[0], s.depth): stats_for_order(order, s.sizes[0], s.depth) for s in order_shapes}
        counted = {s: _counted_on(by_rows[(s.sizes[0], s.depth)], s) for s in order_shapes}
        for stats_of in {id(x): x for x in counted.values()}.values():  # one pass over each order's Â
            stats_of.count_once(nnz_bounds(shape, stats_of.num_nodes, stats_of.parts) for shape in order_shapes
                                if counted[shape] is stats_of)
        setup = reorder_s(order) if reorder_s is not None and order != "none" else 0.0
        for shape in order_shapes:
            priced = by_rows[(shape.sizes[0], shape.depth)]
            blocks = shape_blocks(shape, priced)  # shared by every variant of this shape
            seen = set()
            for comm in (("dense",) if in_columns else comms):
                if comm == "cover" and shape.algo not in COVER_ALGOS:
                    continue  # a 2D/3D process holds a block of each row's entries: no partial sum to send
                for cache, variant in variants:
                    rows = variant.keeps_feature_rows(shape)
                    defer = variant.defers_weight_gather(shape, sparse_features(priced, profile.device))
                    if (comm, cache and shape.algo in ("2d", "3d"), rows, defer) in seen:
                        continue  # a switch without effect here (Â never moves on 1d and 1.5d): priced already
                    pred = predict_epoch(variant, priced, shape, profile=profile, sizes=sizes, blocks=blocks,
                                         comm=comm, cache_panels=cache, device=profile.device)
                    cached = bool(pred.setup_sum("calls", "broadcast").any())  # only where panels move
                    if (comm, cached, rows, defer) in seen:
                        continue
                    seen.add((comm, cached, rows, defer))
                    fits = limit is None or int(pred.memory_bytes.max()) + baseline <= limit
                    entries.append(PlanEntry(shape, pred, fits, run_flags=flags, comm=comm, cache_panels=cached,
                                             feature_rows=rows, defer_weight_gather=defer, reorder=order,
                                             reorder_s=setup, baseline_bytes=baseline,
                                             comm_precision=sizes.precision))

    def rank(e: PlanEntry) -> tuple:  # by time, those that fit first; when none fits, none is best
        # times equal to 12 digits are a tie (the same terms summed in another order differ in the last bits:
        # 3d q x q x 1 and 2d q x q), broken by bytes, then the plainer configuration
        return (not e.fits, float(f"{e.prediction.epoch_s:.12g}"), int(e.prediction.bytes.max()), e.tricks,
                ALGO_ORDER[e.algo], e.shape.sizes, COMM_ORDER.index(e.comm), orders.index(e.reorder))

    if not entries:
        raise ConfigError(_nothing_to_price(spec, world_size, asked, orders))
    entries.sort(key=rank)
    _prefer_fewer_bytes(entries)
    if entries and entries[0].fits:
        entries[0].best = True
    return Plan(entries, stats, spec, profile, limit, tuple(comms))


def _counted_on(stats: GraphStats, shape: GridShape) -> GraphStats:
    """The statistics ``shape``'s blocks are counted on (`shape_blocks`): ``stats``, or on 2D and 3D their copy
    in Â's second column order (``--reorder double-random``), which every 2D grid shares."""
    return stats.in_column_order(shape.sizes[0], shape.depth) if shape.splits_features else stats


def _nothing_to_price(spec: ModelSpec, world_size: int, algos, orders) -> str:
    """The one line that says why no grid of ``algos`` was left to price, naming the causes that apply."""
    causes = []
    if spec.traced.passes_messages and not spec.traced.messages_separable:
        causes.append("the model's messages need whole rows (1d or 1.5d)")
    if any(order in COLUMN_ORDERED for order in orders):
        causes.append("--reorder double-random runs on dense 2d and 3d, not with attention")
    if not causes:
        causes.append("the graph has fewer vertices than the grids' row blocks")
    return f"no grid of --algo {' '.join(algos)} can run this on {world_size} processes: {'; '.join(causes)}"


def _prefer_fewer_bytes(entries: list[PlanEntry]) -> None:
    """Move to the front, among the fitting entries predicted within `NEAR_TIE` of the fastest (``entries``
    sorted by `plan`'s key), the one whose busiest rank moves the fewest bytes (the first of those)."""
    fitting = [e for e in entries if e.fits]
    if not fitting:
        return
    bound = (1 + NEAR_TIE) * fitting[0].prediction.epoch_s
    near = [e for e in fitting if e.prediction.epoch_s <= bound]
    pick = min(near, key=lambda e: int(e.prediction.bytes.max()))  # min keeps the first of equals
    entries.insert(0, entries.pop(next(k for k, e in enumerate(entries) if e is pick)))


def _human(value: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


def _seconds(value: float) -> str:
    if value >= 1:
        return f"{value:.2f} s"
    if value >= 1e-3:
        return f"{1e3 * value:.2f} ms"
    return f"{1e6 * value:.1f} us"
