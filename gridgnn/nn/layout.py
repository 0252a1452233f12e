"""The seam between a model and the process grid: what a layer asks of the layout its activations live in.

A model is single-device math over a `Layout`; it never knows the algorithm. Every activation is a block of
global rows `Layout.row_range` by global feature columns `Layout.col_range(width)` (the whole matrix on one
process). A layout offers exactly the operations whose result depends on that split:

==================  ==========================================================================================
``operator``        the name of the aggregation operator it multiplies by (`gridgnn.data.operators`)
``aggregate(x)``    ``M x`` for that operator, with autograd (backward ``Mᵀ g``)
``linear(h, W)``    ``h @ W`` for replicated W, h dense or a `gridgnn.sparse.csr.SparseBlock` of features
``add_bias(z, b)``  ``z + b`` with b's entries for the block's columns
``row_sum(x)``      (m, 1): each row's sum over all global columns (for row norms)
``full_rows(z, w)`` every one of the ``w`` columns of the block's rows (for log-softmax and the loss)
``head_sum(x, K,    (m, K): each row's sum over the columns of each of K equal heads of a ``w``-wide matrix
w)``                (the attention score terms), whole on every process holding the rows
``head_mean(x, K,   (m, block of w / K columns): the mean of the K heads of a ``w``-wide matrix
w)``
``attend(x, ...)``  graph attention on the ``gat`` pattern: edge softmax of the score terms, then the
                    per-head weighted aggregation (`gridgnn.spmm.attention.attention`), with autograd
==================  ==========================================================================================

Gradients of replicated parameters are left partial by a layout (each process holds the sum over its own
block); the trainer reduces them (`gridgnn.parallel.grid_ops.GridOps.reduce_gradients`), a parameter whose
gradient is a sum over every element of a block (GIN's ε) included. `LocalLayout` is the single-process
layout; `gridgnn.parallel.grid_ops.GridOps` is the layout of one rank of a grid.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

import torch
from torch import Tensor

from gridgnn.nn.features import sparse_linear
from gridgnn.sparse.attention import EdgeBlock
from gridgnn.sparse.csr import SparseBlock
from gridgnn.spmm.attention import DropFn, LocalStages, attention


@runtime_checkable
class Layout(Protocol):
    """What a model needs from the layout of its activations (see the module table)."""

    operator: str

    @property
    def row_range(self) -> tuple[int, int]: ...

    def col_range(self, width: int) -> tuple[int, int]: ...

    def aggregate(self, x: Tensor) -> Tensor: ...

    def linear(self, h: Tensor | SparseBlock, weight: Tensor) -> Tensor: ...

    def add_bias(self, z: Tensor, bias: Tensor) -> Tensor: ...

    def row_sum(self, x: Tensor) -> Tensor: ...

    def full_rows(self, z: Tensor, width: int) -> Tensor: ...

    def head_sum(self, x: Tensor, heads: int, width: int) -> Tensor: ...

    def head_mean(self, x: Tensor, heads: int, width: int) -> Tensor: ...

    def attend(self, x: Tensor, s_dst: Tensor, s_src: Tensor, *, heads: int, width: int, negative_slope: float,
               drop: DropFn | None) -> Tensor: ...


class LocalLayout:
    """One process holds every row and column; ``aggregate`` is any ``x -> M x`` with autograd (e.g.
    `gridgnn.spmm.local.LocalSpMM`). Not collective."""

    def __init__(self, aggregation: Callable[[Tensor], Tensor], operator: str, num_nodes: int | None = None):
        self.aggregation, self.operator = aggregation, operator
        self.num_nodes = num_nodes if num_nodes is not None else getattr(aggregation, "num_nodes", None)
        self._stages: LocalStages | None = None

    @property
    def row_range(self) -> tuple[int, int]:
        if self.num_nodes is None:
            raise AttributeError("a LocalLayout without num_nodes has no row_range")
        return 0, self.num_nodes

    def col_range(self, width: int) -> tuple[int, int]:
        return 0, width

    def aggregate(self, x: Tensor) -> Tensor:
        return self.aggregation(x)

    __call__ = aggregate

    def linear(self, h: Tensor | SparseBlock, weight: Tensor) -> Tensor:
        return sparse_linear(h, weight) if isinstance(h, SparseBlock) else h @ weight

    def add_bias(self, z: Tensor, bias: Tensor) -> Tensor:
        return z + bias

    def row_sum(self, x: Tensor) -> Tensor:
        return x.sum(dim=1, keepdim=True)

    def full_rows(self, z: Tensor, width: int) -> Tensor:
        return z

    def head_sum(self, x: Tensor, heads: int, width: int) -> Tensor:
        return x.view(x.shape[0], heads, width // heads).sum(dim=2)

    def head_mean(self, x: Tensor, heads: int, width: int) -> Tensor:
        return x.view(x.shape[0], heads, width // heads).mean(dim=1)

    def attend(self, x: Tensor, s_dst: Tensor, s_src: Tensor, *, heads: int, width: int, negative_slope: float,
               drop: DropFn | None) -> Tensor:
        """Attention over the whole pattern of the aggregation's matrix (a `LocalSpMM` of the ``gat``
        operator); its tile is built on first use."""
        if self._stages is None:
            block = getattr(self.aggregation, "block", None)
            if block is None:
                raise TypeError("attention needs a LocalSpMM aggregation (its matrix gives the edges)")
            self._stages = LocalStages(EdgeBlock.from_csr(block.csr))
        return attention(x, s_dst, s_src, self._stages, heads=heads, width=width, negative_slope=negative_slope,
                         drop=drop)


def as_layout(agg: Layout | Callable[[Tensor], Tensor], operator: str) -> Layout:
    """``agg`` itself when it is a `Layout` (its operator must be ``operator``), else a `LocalLayout` around
    the callable ``agg``, taken to multiply by ``operator``'s matrix. Raises ValueError on a mismatch."""
    if isinstance(agg, Layout):
        if agg.operator != operator:
            raise ValueError(f"the layout aggregates with the {agg.operator!r} operator; this model needs "
                             f"{operator!r}")
        return agg
    return LocalLayout(agg, operator)


def global_ids(layout: Layout, width: int, device: torch.device) -> tuple[Tensor | None, Tensor | None]:
    """Global row and column ids of the block ``layout`` holds of a matrix of global width ``width`` (rows: the
    layout's ``row_ids`` when it has them, the original ids of a reordered graph); None for rows means "all"
    (a `LocalLayout` without a row count)."""
    ids = getattr(layout, "row_ids", None)  # a reordered graph's original row ids (dropout stays the same)
    if ids is not None:
        return ids.to(device), torch.arange(*layout.col_range(width), device=device)
    try:
        rows = torch.arange(*layout.row_range, device=device)
    except AttributeError:
        rows = None
    return rows, torch.arange(*layout.col_range(width), device=device)
