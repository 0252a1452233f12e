"""What every distributed SpMM offers, and the one autograd Function they share."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import torch

from gridgnn.cost.stages import StageLayout, stage_layout
from gridgnn.grid.comm import Communicator
from gridgnn.grid.process_grid import ProcessGrid
from gridgnn.partition import block_bounds


class DistributedSpMM(ABC):
    """``Y = Â X`` with ``X`` and ``Y`` in the algorithm's dense layout; ``dX = Âᵀ dY`` in backward.

    The dense layout of every algorithm is a contiguous block of rows (`row_range`) by a contiguous block
    of feature columns (`col_range`); input, output and both gradients share it, so layers chain.
    Subclasses implement `forward` and `backward` (collective on the grid); `__call__` wires them into
    autograd and tags their communication ``spmm_forward`` / ``spmm_backward``.
    """

    num_col_blocks_axis: str | None = None  # the grid axis that splits feature columns, if any
    moves_panels: bool = False  # Â panels travel in every SpMM (SUMMA): its constructor takes ``cache_panels``

    def __init__(self, grid: ProcessGrid, comm: Communicator, num_nodes: int, parts: Sequence[int] | None = None):
        self.grid = grid
        self.comm = comm
        self.num_nodes = num_nodes
        self.parts = parts  # a reordered graph's vertex partition (`gridgnn.cost.stages`), or None: balanced

    def stage_layout(self) -> StageLayout:
        """This grid's stages for the graph (`gridgnn.cost.stages.stage_layout`). Not collective."""
        return stage_layout(self.grid.algo, self.grid.shape.sizes, self.num_nodes, self.parts)

    @property
    @abstractmethod
    def row_range(self) -> tuple[int, int]:
        """Global rows ``[start, stop)`` of this rank's dense blocks."""

    def col_range(self, width: int) -> tuple[int, int]:
        """Global feature columns ``[start, stop)`` this rank holds of a width-``width`` dense matrix."""
        axis = self.num_col_blocks_axis
        if axis is None:
            return 0, width
        bounds = block_bounds(width, self.grid.size(axis), allow_empty=True, what="feature columns")
        k = self.grid.index(axis)
        return bounds[k], bounds[k + 1]

    def local_slice(self, x_global: torch.Tensor) -> torch.Tensor:
        """This rank's block of a global (n x f) dense matrix. Not collective."""
        (r0, r1), (c0, c1) = self.row_range, self.col_range(x_global.shape[1])
        return x_global[r0:r1, c0:c1].contiguous()

    @abstractmethod
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``Â X`` for this rank's block of X; returns this rank's block of Y. Collective on the grid."""

    @abstractmethod
    def backward(self, grad_y: torch.Tensor) -> torch.Tensor:
        """``Âᵀ G`` for this rank's block of G; returns this rank's block of dX. Collective on the grid."""

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return _SpMMFunction.apply(x, self)


class _SpMMFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, op: DistributedSpMM) -> torch.Tensor:
        ctx.op = op
        with op.comm.phase("spmm_forward"):
            return op.forward(x.contiguous())

    @staticmethod
    def backward(ctx, grad_y: torch.Tensor):
        op = ctx.op
        with op.comm.phase("spmm_backward"):
            return op.backward(grad_y.contiguous()), None
