"""Rank every valid (algorithm, grid shape, replication, comm) for P processes by predicted epoch time (pure).

``comms`` adds the sparse SpMM variants (``--comm sparse``, `gridgnn.cost.sparse_cost`) next to the dense ones,
priced on the same shape statistics.

`plan` prices each configuration of `candidate_shapes` with `gridgnn.cost.epoch_model.predict_epoch` and
sorts them: configurations that fit the memory per process first, then by predicted training-step time
(the slowest rank's communication plus computation), then by bytes per rank. The first is the best;
`Plan.reason` says why in one line (for ``gridgnn train --algo auto``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gridgnn.cost.epoch_model import EpochPrediction, ModelSpec, predict_epoch, stats_for
from gridgnn.cost.graph_stats import GraphStats
from gridgnn.cost.profile import MachineProfile
from gridgnn.cost.rank_cost import nnz_bounds, shape_blocks
from gridgnn.cost.spmm_cost import FLOAT32, SizeInfo
from gridgnn.grid.shape import ALGORITHMS, GridShape

ALGO_ORDER = {algo: k for k, algo in enumerate(ALGORITHMS)}


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
    baseline_bytes: int = 0
    """What each process holds before any data (`gridgnn.cost.process_baseline`), counted in `memory_needed`."""

    @property
    def memory_needed(self) -> int:
        """Bytes the busiest process needs: the model's working set plus the process baseline."""
        return int(self.prediction.memory_bytes.max()) + self.baseline_bytes

    @property
    def label(self) -> str:
        """``algo grid``, with `` sparse`` for a sparse variant and `` cached`` for cached panels."""
        return (f"{self.algo} {self.grid}" + (" sparse" if self.comm == "sparse" else "")
                + (" cached" if self.cache_panels else ""))

    @property
    def spmm(self) -> str:
        """The SpMM variant in a word: ``dense`` or ``sparse``, with ``+cache`` for cached panels and ``+rows``
        for full feature rows."""
        return self.comm + ("+cache" if self.cache_panels else "") + ("+rows" if self.feature_rows else "")

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
            "defer_weight_gather": self.defer_weight_gather,
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
        if self.comm != "dense":
            flags += ["--comm", self.comm]
        if self.cache_panels:
            flags.append("--cache-panels")
        if self.feature_rows:
            flags.append("--full-feature-rows")
        if self.defer_weight_gather:
            flags.append("--defer-weight-gather")
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
        return text + f"; profile {self.profile.name}, {source}"

    def to_json(self) -> list[dict]:
        return [e.to_dict() for e in self.entries]


def _against(best: PlanEntry, other: PlanEntry) -> str:
    """How ``best`` compares with the runner-up ``other``: a speed-up, or for a tie (within 0.5 %) what
    broke it (fewer bytes per rank, else the fixed order of algorithms and shapes)."""
    mine, theirs = best.prediction.epoch_s, other.prediction.epoch_s
    rival = f"{other.label} ({_seconds(theirs)})"
    if theirs > 1.005 * mine and mine > 0:
        return f"{theirs / mine:.2f}x faster than the next, {rival}"
    mine_bytes, their_bytes = int(best.prediction.bytes.max()), int(other.prediction.bytes.max())
    why = (f"fewer bytes per rank ({_human(mine_bytes)} against {_human(their_bytes)})"
           if mine_bytes < their_bytes else "the fixed order of algorithms and shapes (same time and bytes)")
    return f"tied with {rival}, chosen for {why}"


def plan(model, graph, world_size: int, *, profile: MachineProfile | None = None,
         memory_per_proc: int | None = None, algos: tuple[str, ...] | list[str] = ALGORITHMS,
         sizes: SizeInfo = FLOAT32, run_flags: tuple[str, ...] | list[str] | None = None,
         comms: tuple[str, ...] | list[str] = ("dense",),
         stats_for_rows: Callable[[int, int], GraphStats] | None = None, cache_panels: bool = False) -> Plan:
    """Price every configuration for ``world_size`` processes and rank them (best first).

    ``model``: a `ModelSpec` or anything with ``layers``, ``hidden``, ``order`` (a `TrainConfig`).
    ``graph``: `GraphStats` or a loaded `Graph`. ``memory_per_proc``: bytes available per process (default:
    the profile's; None means unlimited), against which each entry's working set plus the process baseline of
    the profile's device (`gridgnn.cost.process_baseline`) is compared. The first entry has ``best`` set when it
    fits (none when nothing fits). ``run_flags``: the
    ``gridgnn train`` flags naming the graph (``--dataset``, ...), which every entry's `PlanEntry.train_flags`
    puts before the model's (``--layers``, ``--hidden``, ``--order``: always written out) and its own.
    ``comms``: the SpMM variants to price for every shape (``dense``, ``sparse``). ``stats_for_rows``: the
    statistics of the graph as training would order it for a grid of (row blocks, depth) (a METIS reordering
    cuts into the grid's row blocks, and on 3D each block into its depth sub-blocks), so each shape is priced
    on its own order; None: ``graph``'s.
    ``cache_panels``: price ``--cache-panels`` (2D and 3D receive their Â panels once, at set-up). A
    ``model`` with ``full_feature_rows`` prices ``--full-feature-rows`` wherever it takes effect, and one with
    ``defer_weight_gather`` ``--defer-weight-gather``.
    """
    from gridgnn.cost.process_baseline import process_baseline
    from gridgnn.cost.profile import GPU_CLUSTER

    stats = stats_for(model, graph)
    spec = ModelSpec.of(model, stats)
    profile = GPU_CLUSTER if profile is None else profile
    limit = memory_per_proc if memory_per_proc is not None else profile.memory_per_proc_bytes
    flags = (*(run_flags or ()), "--layers", str(spec.layers), "--hidden", str(spec.hidden), "--order", spec.order)
    shapes = [shape for shape in candidate_shapes(world_size, algos)
              if shape.algo == "1d" or stats.num_nodes >= max(shape.sizes[0], 1)]
    orders = {(s.sizes[0], s.depth) for s in shapes}
    by_rows = {key: stats_for_rows(*key) for key in orders} if stats_for_rows else {}
    for ordered in {id(x): x for x in [stats, *by_rows.values()]}.values():  # one pass over each order's Â
        ordered.count_once(nnz_bounds(shape, ordered.num_nodes, ordered.parts) for shape in shapes
                           if by_rows.get((shape.sizes[0], shape.depth), stats) is ordered)
    entries = []
    comms = tuple(comms)
    baseline = process_baseline(profile.device)
    for shape in shapes:
        priced = by_rows.get((shape.sizes[0], shape.depth), stats)
        blocks = shape_blocks(shape, priced)  # shared by the dense and sparse pricing of this shape
        for comm in comms:
            pred = predict_epoch(spec, priced, shape, profile=profile, sizes=sizes, blocks=blocks, comm=comm,
                                 cache_panels=cache_panels, device=profile.device)
            fits = limit is None or int(pred.memory_bytes.max()) + baseline <= limit
            cached = bool(pred.setup_sum("calls", "broadcast").any())  # only where panels move
            entries.append(PlanEntry(shape, pred, fits, run_flags=flags, comm=comm, cache_panels=cached,
                                     feature_rows=spec.keeps_feature_rows(shape),
                                     defer_weight_gather=spec.defers_weight_gather(shape), baseline_bytes=baseline))
    # by time, those that fit first; when none fits none is best: the fastest leads, unmarked
    entries.sort(key=lambda e: (not e.fits, e.prediction.epoch_s, int(e.prediction.bytes.max()), ALGO_ORDER[e.algo],
                                e.shape.sizes, e.comm == "sparse"))
    if entries and entries[0].fits:
        entries[0].best = True
    return Plan(entries, stats, spec, profile, limit, comms)


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
