"""Moving sparse panels: the Â half of a SUMMA stage (2D and 3D)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from gridgnn.cost.terms import Move
from gridgnn.grid.comm import Communicator
from gridgnn.grid.overlap import Pending
from gridgnn.sparse.csr import PackedLayout, SparseBlock
from gridgnn.sparse.packed import PackedPanel


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


def send_panel(comm: Communicator, move: Move | None, own: PackedPanel | None, index_dtype: torch.dtype,
               dtype: torch.dtype, transpose: bool) -> Pending | None:
    """Run a panel ``move`` of an SpMM plan (`gridgnn.cost.terms.Move`, operand ``adj``, oriented as it travels):
    `broadcast_panel` on the move's axis from its root; ``own``: this process's panel when it is the root's
    (else ignored). None for no move (an empty panel)."""
    if move is None:
        return None
    layout = PackedLayout(move.rows, move.cols, move.nnz, index_dtype, dtype)
    mine = own if comm.grid.index(move.axis) == move.root else None
    return broadcast_panel(comm, move.axis, move.root, mine, layout, transpose=transpose)


class PanelCache:
    """``--cache-panels``: the Â panels of this process's grid row, received once at set-up and kept.

    SUMMA (2D, and 3D within a depth slice) broadcasts the same constant Â panels on ``col`` in every SpMM.
    With the cache a process receives each panel of its stages once per orientation it uses (forward ``A``;
    backward ``Aᵀ``, which GAT's attention never reads), and its stages then move only X. The price is
    memory: a process keeps the Â entries of its whole block row in its depth slice (up to ``pc`` times an
    uncached process's share on 2D, ``q`` on 3D, per orientation; less when its own panels are the heavy
    ones), packed as they arrived. Built collectively on ``col`` (tagged ``other``, in every process's same
    order: orientation by orientation, stage by stage); reading a kept panel is not collective. An SpMM's plan
    moves no panel of a kept orientation (`keeps`); the others travel as its plan's panel moves (`send_panel`).
    """

    def __init__(self, comm: Communicator, stages: range, fetch: Callable[[int, bool], Pending | None],
                 orientations: tuple[bool, ...] = (False, True)):
        """Collective on ``col``: ``fetch(s, transpose)`` is the SpMM's panel broadcast of stage s (a
        `Pending`, or None when the panel is empty), run once for every stage in each of ``orientations``
        (the ``transpose`` values to keep; none: nothing is kept)."""
        self.blocks, self.orientations = {}, tuple(orientations)
        with comm.phase("other"):
            for transpose in orientations:
                for s in stages:
                    pending = fetch(s, transpose)
                    if pending is not None:
                        pending.wait()  # a finished Pending delivers its block again at every wait
                    self.blocks[s, transpose] = pending

    def keeps(self, transpose: bool) -> bool:
        """Whether the panels of this orientation were received at set-up (so an SpMM plan moves none)."""
        return transpose in self.orientations

    def kept(self, s: int, transpose: bool) -> Pending | None:
        """Stage s's kept panel in a kept orientation (not collective); None when it has no entries."""
        return self.blocks[s, transpose]
