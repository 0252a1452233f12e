"""`Stages15D`: graph attention (`gridgnn.spmm.attention`) on the stages of `gridgnn.spmm.spmm_15d.SpMM15D`.

The SpMM builds its `Stages15D` (`SpMM15D.attention_stages`) and hands itself over as a `RowBlockSpMM`: this
module does not import the SpMM's, so the dependency goes one way (spmm_15d -> attention_15d).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Protocol

import torch

from gridgnn.grid.comm import Communicator
from gridgnn.grid.process_grid import ProcessGrid
from gridgnn.sparse.attention import EdgeBlock
from gridgnn.sparse.csr import SparseBlock
from gridgnn.spmm.attention import RowStages


class RowBlockSpMM(Protocol):
    """What `Stages15D` reads of a 1D/1.5D SpMM (`gridgnn.spmm.spmm_15d.SpMM15D` is one) on an ``R x c``
    grid: this rank's block row ``i`` (global rows ``row_range``), the vertex blocks' ``bounds`` (R + 1
    ints; ``_rows(j)`` is block j's size), the column blocks of its replica's ``share`` and their kept tiles
    ``blocks[j]`` (Â[i, j], n_i x n_j), the ``replication`` c, the grid and its collectives."""

    grid: ProcessGrid
    comm: Communicator
    blocks: dict[int, SparseBlock]
    bounds: list[int]
    i: int
    share: list[int]
    replication: int

    @property
    def row_range(self) -> tuple[int, int]: ...

    def _rows(self, j: int) -> int: ...


class Stages15D(RowStages):
    """Attention on the 1D/1.5D stage structure: tiles Â[i, j] for j in this replica's share; column block
    j of a row-distributed matrix arrives by the same ``row`` broadcasts as X[j] in `SpMM15D.forward`, parts
    of column block j are reduced on ``row`` to (j, k) and made whole on ``rep`` as in `SpMM15D.backward`,
    and row reductions over the replicas' shares are all-reduces on ``rep``."""

    def __init__(self, spmm: RowBlockSpMM):
        self.spmm, self.comm = spmm, spmm.comm
        self.blocks = {j: EdgeBlock.from_csr(block.csr) for j, block in spmm.blocks.items()}
        self.row_ids = torch.arange(*spmm.row_range, device=spmm.grid.device)

    def col_ids(self, j: int) -> torch.Tensor:
        return torch.arange(self.spmm.bounds[j], self.spmm.bounds[j + 1], device=self.row_ids.device)

    def gather(self, t: torch.Tensor) -> Iterator[tuple[int, torch.Tensor]]:
        """Column block j of ``t`` (rows of block j, all columns) for each j of the share. Collective on
        ``row``."""
        t = t.contiguous()

        def issue(j: int):
            held = t if j == self.spmm.i else t.new_empty((self.spmm._rows(j), t.shape[1]))
            return self.comm.broadcast_async(held, "row", root=j)

        yield from self.comm.pipeline(self.spmm.share, issue)

    def reduce(self, parts: Iterable[tuple[int, torch.Tensor]], like: torch.Tensor) -> torch.Tensor:
        """The sum over the grid of every part of this rank's own column block (rows of ``like``).
        Collective on ``row`` (reduces) then ``rep`` (broadcast)."""
        mine = None
        with self.comm.in_flight() as flight:
            for j, part in parts:
                part = part.contiguous()
                flight.add(self.comm.reduce_async(part, "row", root=j))
                if j == self.spmm.i:
                    mine = part
        if self.spmm.replication > 1:
            if mine is None:
                mine = like.new_empty(like.shape)
            self.comm.broadcast(mine, "rep", root=self.spmm.i % self.spmm.replication)
        return like.new_zeros(like.shape) if mine is None else mine

    def all_reduce(self, t: torch.Tensor, op: str) -> torch.Tensor:
        """Sum or maximum over the replicas of this block row. Collective on ``rep``."""
        return self.comm.all_reduce(t.contiguous(), "rep", op) if self.spmm.replication > 1 else t

    def phase(self, name: str):
        return self.comm.phase(name)
