"""``--reorder double-random`` on 2D and 3D: an SpMM of ``Â Pσᵀ`` (Â's columns in a second random order σ,
`gridgnn.cost.column_order`) between two moves of the dense rows.

`ColumnOrderedSpMM` wraps the algorithm's SpMM built on ``Â Pσᵀ`` (``inner``: `gridgnn.spmm.spmm_2d.SpMM2D` or
`gridgnn.spmm.spmm_3d.SpMM3D`): forward ``Y = (Â Pσᵀ)(Pσ X)``, backward ``dX = Pσᵀ ((Â Pσᵀ)ᵀ G)``. Its layout
is the inner one's (X, Y, dX, dY in the vertex order); `ColumnExchange` moves a block between the vertex order
and σ's order: one all-to-all on ``row`` each way (σ keeps every row within its ``row`` group), the rows a
process keeps copied in place.

Only the rank's own block row of ``Â Pσᵀ`` is built (`OwnRowsRelabelled`): the inner SpMMs cut their panels
from their block row alone. Set-up per process: σ of its rows and σ⁻¹ of its positions, pointwise
(`gridgnn.cost.column_order.ColumnOrder`), and its block row's entries relabelled (their count, int64): nothing
of size n.
"""

from __future__ import annotations

import numpy as np
import torch

from gridgnn.cost.column_order import ColumnOrder, peer_ranges, permuted_indices, row_group
from gridgnn.cost.spmm_plan import column_ordered
from gridgnn.cost.terms import SpMMPlan
from gridgnn.grid.comm import Communicator
from gridgnn.grid.process_grid import ProcessGrid
from gridgnn.spmm.base import DistributedSpMM


class ColumnExchange:
    """Moves one process's dense rows between the vertex order and σ's order. Collective on ``row``.

    The process at ``row`` coordinate i of class ``group`` holds rows ``[a, b)`` (`peer_ranges`) in both orders:
    vertex v in the vertex order, column position c = σ(v) in σ's. A row whose σ stays in ``[a, b)`` is copied
    locally; the others go to the process holding their position, sorted by position, so a receiver knows each
    row's place from σ⁻¹ of its own positions alone.
    """

    def __init__(self, comm: Communicator, ranges: list[tuple[int, int]], i: int, order: ColumnOrder,
                 device: torch.device | str = "cpu"):
        self.comm = comm
        index = lambda values: torch.from_numpy(np.ascontiguousarray(values)).to(device)  # noqa: E731
        a, b = ranges[i]
        starts = np.array([lo for lo, _ in ranges], dtype=np.int64)
        owner = lambda ids: np.searchsorted(starts, ids, side="right") - 1  # noqa: E731 - the range of an id
        count = len(ranges)
        mine = np.arange(a, b, dtype=np.int64)
        # sending side (forward): my vertices, by the process of their position, then by position
        positions = order.position(mine)
        ordered = np.argsort(positions, kind="stable")
        dest = owner(positions[ordered])
        away = dest != i
        self.send_local = index(ordered[away])  # local rows sent, in wire order
        self.send_rows = np.bincount(dest[away], minlength=count).tolist()
        self.keep_from = index(ordered[~away])  # local rows kept ...
        self.keep_to = index(positions[ordered[~away]] - a)  # ... at these local positions
        # receiving side (forward): my positions, by the process of their vertex, then by position
        source = owner(order.vertex(mine))
        incoming = np.flatnonzero(source != i)
        arrival = incoming[np.argsort(source[incoming], kind="stable")]  # positions ascend within a source
        self.recv_local = index(arrival)  # local positions, in wire order
        self.recv_rows = np.bincount(source[incoming], minlength=count).tolist()

    def to_columns(self, x: torch.Tensor) -> torch.Tensor:
        """This process's rows of ``Pσ X`` from its rows of X (same shape). Collective on ``row``."""
        out = x.new_empty(x.shape)
        out[self.keep_to] = x[self.keep_from]
        if x.shape[1] > 0:
            out[self.recv_local] = self.comm.all_to_all(x[self.send_local], self.send_rows, self.recv_rows, "row")
        return out

    def to_vertices(self, g: torch.Tensor) -> torch.Tensor:
        """The inverse of `to_columns`: rows in the vertex order from rows in σ's. Collective on ``row``."""
        out = g.new_empty(g.shape)
        out[self.keep_from] = g[self.keep_to]
        if g.shape[1] > 0:
            out[self.send_local] = self.comm.all_to_all(g[self.recv_local], self.recv_rows, self.send_rows, "row")
        return out


class _RowPointers:
    """The row pointers of rows ``[r0, r0 + len(local) - 1)`` only, addressed by global row: what `cut_panels`
    slices (``indptr[r0:r1 + 1]``); any other row is refused."""

    def __init__(self, local: np.ndarray, r0: int):
        self.local, self.r0 = local, r0

    def __getitem__(self, rows: slice) -> np.ndarray:
        a, b = rows.start - self.r0, rows.stop - self.r0
        if rows.step not in (None, 1) or a < 0 or b > len(self.local):
            raise IndexError(f"rows {rows.start}..{rows.stop} outside the block row held from {self.r0}")
        return self.local[a:b]


class OwnRowsRelabelled:
    """The CSR rows ``[r0, r1)`` of Â with column ids σ(id) (sorted within each row), and no other row: what an
    inner SpMM cuts its panels from (`gridgnn.sparse.cut.cut_panels` reads ``indptr[r0:r1 + 1]``, ``indices``,
    ``data``, ``shape``). ``nnz`` stays Â's, so every process picks the same index dtype."""

    def __init__(self, adj, rows: tuple[int, int], order: ColumnOrder):
        r0, r1 = rows
        n = int(adj.shape[0])
        indptr = np.asarray(adj.indptr[r0:r1 + 1], dtype=np.int64)
        lo, hi = int(indptr[0]), int(indptr[-1])
        columns = permuted_indices(adj.indices[lo:hi], order)
        values = np.asarray(adj.data[lo:hi])
        local = indptr - lo
        row_of = np.repeat(np.arange(r1 - r0), np.diff(local))
        by_column = np.lexsort((columns, row_of))  # each row's entries by their new column
        self.indices, self.data = columns[by_column], values[by_column]
        self.indptr = _RowPointers(local, r0)
        self.shape = (n, n)
        self.nnz = int(adj.nnz)
        self.source = getattr(adj, "source", "adjacency")


class ColumnOrderedSpMM(DistributedSpMM):
    """``inner_cls`` (2D or 3D) on ``Â Pσᵀ`` between the moves of `ColumnExchange`: ``--reorder double-random``.
    Built once from the global Â; the layout, stages and panels are the inner SpMM's."""

    moves_panels = True

    def __init__(self, inner_cls: type[DistributedSpMM], grid: ProcessGrid, comm: Communicator, adj, *, seed: int,
                 dtype: torch.dtype = torch.float32, parts=None, cache_panels: tuple[bool, ...] = ()):
        super().__init__(grid, comm, adj.shape[0], parts)
        self.num_col_blocks_axis = inner_cls.num_col_blocks_axis
        layout = self.stage_layout()
        order = ColumnOrder(layout, seed)
        i = grid.index("row")
        block_row = (layout.row_bounds[i], layout.row_bounds[i + 1])  # what 2D and 3D cut their panels from
        self.inner = inner_cls(grid, comm, OwnRowsRelabelled(adj, block_row, order), dtype=dtype, parts=parts,
                               cache_panels=cache_panels)
        self.exchange = ColumnExchange(comm, peer_ranges(layout, row_group(layout, grid.coords)), i, order, grid.device)

    @property
    def row_range(self) -> tuple[int, int]:
        return self.inner.row_range

    @property
    def stored_nnz(self) -> int:
        return self.inner.stored_nnz

    def plan(self, width: int, backward: bool) -> SpMMPlan:
        """The inner SpMM's plan between the moves into and out of σ's order
        (`gridgnn.cost.spmm_plan.column_ordered`, with this process's counts). Not collective."""
        into = np.asarray(self.exchange.recv_rows, dtype=np.int64)
        back = np.asarray(self.exchange.send_rows, dtype=np.int64)
        return column_ordered(self.inner.plan(width, backward), width, into, back, backward)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """X (vertex order) -> Y = Â X: ``Pσ X`` by `ColumnExchange`, then the inner SpMM. Collective on ``row``
        and the inner SpMM's axes."""
        return self.inner.forward(self.exchange.to_columns(x))

    def backward(self, grad_y: torch.Tensor) -> torch.Tensor:
        """G -> dX = Âᵀ G in the vertex order: the inner backward (σ's order), then moved back. Collective on
        ``row`` and the inner SpMM's axes."""
        return self.exchange.to_vertices(self.inner.backward(grad_y))
