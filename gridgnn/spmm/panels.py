"""Moving sparse panels: the Â half of a SUMMA stage (2D and 3D)."""

from __future__ import annotations

import torch

from gridgnn.grid.comm import Communicator
from gridgnn.grid.overlap import Pending
from gridgnn.sparse.csr import PackedLayout, SparseBlock
from gridgnn.sparse.packed import PackedPanel


def panel_layout(rows: int, cols: int, nnz: int, *, index_dtype: torch.dtype, dtype: torch.dtype,
                 transpose: bool) -> PackedLayout:
    """The packed layout of a (rows x cols) panel with ``nnz`` values, or of its transpose."""
    if transpose:
        rows, cols = cols, rows
    return PackedLayout(rows, cols, nnz, index_dtype, dtype)


def broadcast_panel(comm: Communicator, axis: str, root: int, own: PackedPanel | None,
                    layout: PackedLayout, *, transpose: bool) -> Pending | None:
    """Collective on ``axis`` (asynchronous): the root's packed panel reaches every process of the group.

    ``own`` is the root's panel (None elsewhere); ``layout`` is known everywhere from the plan. Returns a
    `Pending` that delivers the `SparseBlock` (transposed if asked) once waited for. A panel without
    non-zeros is not sent (every process of the group knows its nnz) and None is returned. Sparse indices
    travel as integers inside the byte buffer.
    """
    if layout.nnz == 0:
        return None
    if own is not None:
        return comm.broadcast_async(own.buffer(transpose), axis, root, then=lambda _: own.block(transpose))
    buffer = torch.empty(layout.nbytes, dtype=torch.uint8, device=comm.grid.device)
    return comm.broadcast_async(buffer, axis, root, then=lambda received: SparseBlock.unpack(received, layout))
