"""What the cost model and the plan of collectives are made of (pure data, shared by every algorithm).

`Term` (one kind of collective of one phase, every rank at once) and `ShapeBlocks` (one grid shape's blocks
and their nnz of Â) are the vectorized model's currency (`gridgnn.cost.rank_cost`, `gridgnn.cost.algorithms`);
`SpMMPlan` (stages of `PlannedStage`, each with its `Move` s) is one rank's plan of an SpMM half, which the
SpMM modules run and `gridgnn.cost.spmm_plan.lower` turns into `Step` s, the records of one rank's
collectives. Not collective.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from gridgnn.cost.graph_stats import GraphStats
from gridgnn.cost.spmm_cost import SizeInfo
from gridgnn.cost.stages import StageLayout
from gridgnn.grid.comm_records import WIRE_PHASES
from gridgnn.grid.shape import GridShape
from gridgnn.partition import block_bounds


@dataclass(frozen=True)
class Term:
    """One kind of collective of one phase: per-rank ``calls`` and ``bytes`` (int64 arrays of shape (P,)).

    ``axis`` is the grid axis (or ``world``) it runs on and ``group_size`` the processes of that axis group.
    """

    phase: str
    op: str
    axis: str
    group_size: int
    calls: np.ndarray
    bytes: np.ndarray


@dataclass
class ShapeBlocks:
    """The partition of one grid shape and the nnz of Â it needs (computed once per shape).

    ``coords``: axis -> int64 array (P,) of every rank's coordinate. ``layout``: the stages
    (`gridgnn.cost.stages`), whose ``row_bounds`` (the dense row blocks) and ``segments`` (the stage
    segments) this object also answers for. ``nnz``: 1.5D: (R, c) nnz of block row i in replica k's share
    of column blocks; 2D: (pr, nseg) nnz per (row block, SUMMA stage segment); 3D: (q, q*d) nnz per (row block, fine
    sub-block S[k][l] at column k*d + l). ``local_rows``: (P,) dense rows each rank holds.
    ``local_nnz``: (P,) stored Â entries each rank keeps (its own blocks). ``mult_nnz``: (P,) Â entries
    each rank multiplies per SpMM (its own blocks on 1.5D; every panel of its block row it receives on
    2D/3D).
    """

    shape: GridShape
    n: int
    coords: dict
    layout: StageLayout = field(repr=False)
    nnz: np.ndarray
    local_rows: np.ndarray
    local_nnz: np.ndarray
    mult_nnz: np.ndarray
    sub: np.ndarray | None = None  # 3D: (q, d) rows of each sub-block S[k][l]
    stats: GraphStats | None = field(default=None, repr=False)  # for the sparse variants' touched rows
    column_rows: np.ndarray | None = None  # (P,) rows each rank moves into σ's column order (double-random)
    cache: dict = field(default_factory=dict, repr=False)  # width-independent Â panel terms

    @property
    def row_bounds(self) -> list[int]:
        """The dense row blocks' vertex boundaries (``layout.row_bounds``)."""
        return self.layout.row_bounds

    @property
    def segments(self) -> list[int]:
        """The stage segments' vertex boundaries (``layout.segments``; the SUMMA stages on 2D)."""
        return self.layout.segments

    @property
    def groups(self) -> np.ndarray:
        """(P,) int64: each rank's group of the layout (its replica on 1.5D, its depth slice on 3D; 0 where the
        layout has one group), whose segments it runs (``layout.group[s] == groups[rank]``)."""
        axis = self.layout.group_axis
        return self.coords[axis] if axis else np.zeros(self.shape.world_size, dtype=np.int64)


@dataclass(frozen=True)
class Step:
    """One collective of one rank.

    ``op``: broadcast, reduce, all_reduce, all_gather or reduce_scatter; ``axis``: the grid axis it runs on;
    ``root``: the root's coordinate on that axis (None for the all-* collectives); ``stage``: the segment it
    belongs to (None for the whole-block collectives); ``operand``: ``"adj"`` (a packed Â panel of ``rows``
    rows and ``nnz`` entries) or ``"dense"`` (``rows`` x ``width`` values; all-gather and reduce-scatter count
    the padded chunk); ``bytes``: what this rank receives.
    """

    op: str
    axis: str
    root: int | None
    stage: int | None
    operand: str
    rows: int
    width: int
    nnz: int
    bytes: int


@dataclass(frozen=True)
class Move:
    """One collective a distributed SpMM asks for, as the algorithm states it: before the communicator's wire
    precision and its rule for groups of one process (`gridgnn.cost.spmm_plan.lower` turns a move into the
    `Step` records a run makes).

    ``op``: broadcast, reduce (a sum to the root), all_reduce (a sum), all_max (attention's row maxima, float32
    in every precision), all_gather or reduce_scatter (of row blocks), or all_to_all (rows from each peer,
    ``counts``); ``axis``: the grid axis; ``root``: the root's coordinate on it (None for the all-* ones);
    ``operand``: ``"adj"`` (a packed Â panel of ``rows`` x ``cols`` with ``nnz`` entries, oriented as it
    travels) or ``"dense"`` (``rows`` x ``width`` float32 values); ``counts``: all_gather and reduce_scatter,
    the rows of each process of the axis; all_to_all, the rows received from each. An all_to_all that carries
    another move with fewer rows (``--comm sparse``, `gridgnn.cost.spmm_plan.carried_by_rows`) names it in
    ``carries``.
    """

    op: str
    axis: str
    root: int | None
    operand: str
    rows: int
    width: int = 0
    cols: int = 0
    nnz: int = 0
    counts: tuple[int, ...] = ()
    carries: str = ""


@dataclass(frozen=True)
class PlannedStage:
    """Stage ``segment`` (global vertex rows ``[start, stop)``) of one SpMM half on one rank.

    ``entries``: whether the rank's Â panel (or block) of the segment has stored entries (else the stage
    multiplies nothing). ``panel``: the panel's broadcast on ``col`` (None where Â never moves: 1D/1.5D, an
    empty panel, or one kept by ``--cache-panels``). ``dense``: the segment's rows of X broadcast (forward) or
    the partial product reduced to the root (backward) on ``row``; None where the rank's feature block is
    empty (2D/3D with fewer columns than process columns).
    """

    segment: int
    start: int
    stop: int
    entries: bool
    panel: Move | None
    dense: Move | None


@dataclass(frozen=True)
class SpMMPlan:
    """One rank's plan of one SpMM half: ``before`` (moves of the input: 3D's depth all-gather; a sparse 1D/1.5D
    forward's one exchange; double-random's move into σ's order), ``stages`` in issue order, ``after`` (moves
    of the accumulated product: 1.5D's replica sum or broadcast, 3D's depth reduce-scatter; a sparse 1D/1.5D
    backward's one exchange; double-random's move back). ``rows``: rows of the rank's block row of Â, into
    which the stages accumulate. A halo exchange (`gridgnn.cost.halo_cost.halo_plan`) is one with no stages."""

    rows: int
    stages: tuple[PlannedStage, ...]
    before: tuple[Move, ...] = ()
    after: tuple[Move, ...] = ()


def kept(owner: object, table: str, key: Hashable, build: Callable[[], object]):
    """``build()``'s value, built once per ``key`` and kept in ``owner``'s dict attribute ``table``: for a pure
    plan whose inputs (blocks, kept panels, exchange counts) are fixed at set-up, so that no call rebuilds it."""
    values = owner.__dict__.setdefault(table, {})
    if key not in values:
        values[key] = build()
    return values[key]


def term(phase, op, axis, size, calls, nbytes, num_ranks) -> Term:
    """A `Term` whose ``calls`` and ``bytes`` (scalars or (P,) arrays) are broadcast to ``num_ranks`` ranks."""
    calls = np.broadcast_to(np.asarray(calls, dtype=np.int64), (num_ranks,)).copy()
    nbytes = np.broadcast_to(np.asarray(nbytes, dtype=np.int64), (num_ranks,)).copy()
    return Term(phase, op, axis, size, calls, nbytes)


def dense_step(op, axis, root, stage, rows, width, me, sz: SizeInfo) -> Step:
    """A broadcast or reduce of (rows x width) activation values (an SpMM phase: in the wire precision):
    received by every process but the root."""
    return Step(op, axis, root, stage, "dense", rows, width, 0, 0 if me == root else rows * sz.row_bytes(width))


def row_bytes_in(phase: str, width, sz: SizeInfo):
    """Bytes of one row of ``width`` float32 values (an int or an int64 array) as it travels in ``phase``: in the
    wire precision in `WIRE_PHASES`, as stored elsewhere (`gridgnn.grid.comm`)."""
    if phase in WIRE_PHASES:
        return sz.row_bytes(width)
    return np.asarray(width, dtype=np.int64) * sz.value if isinstance(width, np.ndarray) else width * sz.value


def gather_term(phase, axis, size, chunk, width, sz: SizeInfo, calls, num_ranks) -> Term:
    """An all-gather on ``axis`` (``size`` processes) of parts padded to ``chunk`` rows of ``width`` values."""
    return term(phase, "all_gather", axis, size, calls, (size - 1) * chunk * row_bytes_in(phase, width, sz),
                num_ranks)


def scatter_sum_term(phase, axis, size, chunk, mine, width, sz: SizeInfo, calls, num_ranks) -> Term:
    """A reduce-scatter on ``axis`` of parts padded to ``chunk`` rows of ``width`` values; in the wire precision
    the all-to-all that carries it, unpadded: ``mine`` rows from each other process."""
    if phase in WIRE_PHASES and not sz.exact:
        return term(phase, "all_to_all", axis, size, calls, (size - 1) * mine * sz.row_bytes(width), num_ranks)
    return term(phase, "reduce_scatter", axis, size, calls, (size - 1) * chunk * width * sz.value, num_ranks)


def sum_terms(phase, axis, size, rows, width, coord, sz: SizeInfo, calls, num_ranks) -> list[Term]:
    """``calls`` all-reduces (sum) on ``axis`` of ``rows`` (P,) rows of ``width`` values; in the wire precision
    each is a reduce-scatter over balanced row chunks (an all-to-all) and an all-gather of the summed chunks,
    ``coord`` (P,) being the rank's coordinate on ``axis`` (`gridgnn.grid.comm.Communicator.all_reduce`)."""
    rows = np.asarray(rows, dtype=np.int64)
    calls = np.broadcast_to(np.asarray(calls, dtype=np.int64), (num_ranks,))
    if phase not in WIRE_PHASES or sz.exact:
        return [term(phase, "all_reduce", axis, size, calls, calls * (2 * rows * width * sz.value * (size - 1) // size),
                     num_ranks)]
    base, extra = np.divmod(rows, size)
    mine = base + (np.asarray(coord) < extra)
    largest = base + (extra > 0)
    row = sz.row_bytes(width)
    return [term(phase, "all_to_all", axis, size, calls, calls * (size - 1) * mine * row, num_ranks),
            term(phase, "all_gather", axis, size, calls, calls * (size - 1) * largest * row, num_ranks)]


def packed_bytes(rows, nnz, sz: SizeInfo) -> np.ndarray:
    """Bytes of packed CSR panels (0 where a panel is empty: it is never sent)."""
    rows, nnz = np.asarray(rows, dtype=np.int64), np.asarray(nnz, dtype=np.int64)
    return np.where(nnz > 0, (rows + 1 + nnz) * sz.index + nnz * sz.sparse_value, 0)


def feature_widths(width: int, parts: int) -> np.ndarray:
    """Columns of each of ``parts`` feature blocks of a width-``width`` matrix (empty blocks allowed)."""
    return np.array(_feature_widths(width, parts), dtype=np.int64)


@lru_cache(maxsize=256)
def _feature_widths(width: int, parts: int) -> tuple[int, ...]:
    return tuple(np.diff(block_bounds(width, parts, allow_empty=True, what="feature columns")).tolist())
