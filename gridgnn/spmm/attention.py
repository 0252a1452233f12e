"""Graph attention over a rank's tiles of the ``gat`` pattern: edge softmax and weighted aggregation, with
autograd (forward and backward written out, so every collective is explicit and counted).

For rows i of this rank (all K*C feature columns), K heads of C channels, negative slope λ:

    e_ij = LeakyReLU_λ(s_dst[i] + s_src[j]),  α_ij = exp(e_ij - M_i) / Σ_j' exp(e_ij' - M_i),  M_i = max_j e_ij
    out[i, head h] = Σ_j drop(α_ij) x[j, head h]                 (drop: the layout-invariant attention dropout)

Backward, g the output gradient:

    dα'_ij = <g[i, h], x[j, h]> (SDDMM on the pattern)   dx[j, h] = Σ_i drop(α_ij) g[i, h]
    dα = drop(dα'),  t_i = Σ_j α_ij dα_ij,  de_ij = α_ij (dα_ij - t_i),  dz = de · (1 if z > 0 else λ)
    ds_dst[i] = Σ_j dz_ij,  ds_src[j] = Σ_i dz_ij

The distribution is an `AttentionStages` (`LocalStages` on one process; `gridgnn.spmm.spmm_15d.SpMM15D`
offers one for 1D/1.5D): the tiles of this rank's rows, a collective that brings column block j of a
row-distributed matrix (``gather``), one that sums per-tile parts into the rows' owners (``reduce``) and an
all-reduce over the processes that share this rank's rows (``all_reduce``; sum or max). Passes (each a loop
over the tiles): forward, the score terms ``s_src`` (K wide), then ``x`` (K*C wide); backward, ``x`` again
for the SDDMM while ``dx`` parts are reduced, then the ``ds_src`` parts (K wide).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import nullcontext
from typing import Protocol

import torch
from torch import Tensor

from gridgnn.sparse.attention import EdgeBlock, head_segments

DropFn = Callable[[EdgeBlock, Tensor, Tensor], Tensor]
"""``drop(block, row_ids, col_ids)`` -> (nnz, K) factors (0 or 1 / (1 - p)) of the block's entries, given the
global ids of its rows and columns."""


def drop_by_original_ids(drop: DropFn | None, order: Tensor | None) -> DropFn | None:
    """``drop`` asked with original vertex ids: ``order`` (n,) int64 is the original id of each row of a
    reordered graph (None: not reordered, ``drop`` itself), so a reordered run drops the same edges as the
    run in the original order. ``order`` should live on the tiles' device (the layouts put it there once).
    Not collective."""
    if drop is None or order is None:
        return drop

    def renamed(block: EdgeBlock, row_ids: Tensor, col_ids: Tensor) -> Tensor:
        table = order.to(row_ids.device)  # a no-op when it already lives there
        return drop(block, table[row_ids], table[col_ids])

    return renamed


class AttentionStages(Protocol):
    """Where a rank's attention tiles and their column data come from (see the module docstring).

    ``blocks``: the tiles whose coefficients this rank computes (keyed by stage); ``gather`` brings each
    tile's column block of a row-distributed (m, K) matrix; ``reduce`` sums per-tile (columns, K) parts into
    the rows' owners; ``all_reduce`` sums or maximizes over the processes sharing this rank's rows;
    ``tile_rows`` gives the score terms of the tiles' rows (3D: more rows than the dense block);
    ``grad_total`` maps a gradient on the tiles' rows back to the dense rows, complete (or partial for a
    collective that completes it);
    ``aggregate`` and ``aggregate_backward`` run the weighted SpMM and its backward with the SDDMM.
    """

    blocks: dict[int, EdgeBlock]
    row_ids: Tensor

    def col_ids(self, j: int) -> Tensor: ...

    def gather(self, t: Tensor) -> Iterator[tuple[int, Tensor]]: ...

    def reduce(self, parts: Iterable[tuple[int, Tensor]], like: Tensor) -> Tensor: ...

    def all_reduce(self, t: Tensor, op: str) -> Tensor: ...

    def tile_rows(self, s_dst: Tensor) -> Tensor: ...

    def grad_total(self, t: Tensor) -> Tensor: ...

    def aggregate(self, kept: dict[int, Tensor], x: Tensor, heads: int, width: int) -> Tensor: ...

    def aggregate_backward(self, kept: dict[int, Tensor], grad: Tensor, x: Tensor, heads: int,
                           width: int) -> tuple[Tensor, dict[int, Tensor]]: ...

    def phase(self, name: str): ...


class RowStages:
    """``aggregate`` and ``aggregate_backward`` for layouts whose ranks hold whole rows (every column):
    the tiles' column blocks of x arrive by ``gather``, the parts of dx go back by ``reduce``, and replicas
    of a row sum their partial outputs with ``all_reduce``."""

    def tile_rows(self, s_dst: Tensor) -> Tensor:
        return s_dst

    def grad_total(self, t: Tensor) -> Tensor:
        return self.all_reduce(t, "sum")

    def aggregate(self, kept: dict[int, Tensor], x: Tensor, heads: int, width: int) -> Tensor:
        segments = head_segments(heads, width, (0, width))
        out = x.new_zeros(x.shape)
        for j, x_j in self.gather(x):
            out += self.blocks[j].aggregate(kept[j], x_j, segments)
        return self.all_reduce(out, "sum")

    def aggregate_backward(self, kept, grad, x, heads, width):
        segments = head_segments(heads, width, (0, width))
        d_kept: dict[int, Tensor] = {}

        def parts():
            for j, x_j in self.gather(x):
                block = self.blocks[j]
                d_kept[j] = block.sddmm(grad, x_j, segments, heads)
                yield j, block.aggregate_t(kept[j], grad, segments)

        return self.reduce(parts(), x), d_kept


class LocalStages(RowStages):
    """One process, one tile: the whole ``gat`` pattern (n x n). Not collective."""

    def __init__(self, block: EdgeBlock):
        self.blocks = {0: block}
        self.row_ids = torch.arange(block.shape[0], device=block.device)

    def col_ids(self, j: int) -> Tensor:
        return self.row_ids

    def gather(self, t: Tensor) -> Iterator[tuple[int, Tensor]]:
        yield 0, t

    def reduce(self, parts: Iterable[tuple[int, Tensor]], like: Tensor) -> Tensor:
        return sum(part for _, part in parts)

    def all_reduce(self, t: Tensor, op: str) -> Tensor:
        return t

    def phase(self, name: str):
        return nullcontext()


def attention(x: Tensor, s_dst: Tensor, s_src: Tensor, stages: AttentionStages, *, heads: int, width: int,
              negative_slope: float = 0.2, drop: DropFn | None = None) -> Tensor:
    """(m, w) attention-weighted aggregation of ``x`` (m, w: this rank's columns of a K·C = ``width`` wide
    matrix) with score terms ``s_dst``, ``s_src`` (m, K, every head), all in the row layout of ``stages``;
    differentiable in all three. Collective as ``stages``."""
    return _Attention.apply(x, s_dst, s_src, stages, heads, width, negative_slope, drop)


def _softmax(stages: AttentionStages, s_dst: Tensor, s_src: Tensor, slope: float):
    """Per owned tile: the raw scores' sign (z > 0) and α (nnz, K); the score terms travel by ``gather``."""
    raw = {j: stages.blocks[j].scores(s_dst, s_src_j) for j, s_src_j in stages.gather(s_src)}
    scores = {j: torch.where(z > 0, z, z * slope) for j, z in raw.items()}
    top = s_dst.new_full(s_dst.shape, float("-inf"))
    for j, e in scores.items():
        top = torch.maximum(top, stages.blocks[j].row_max(e))
    top = stages.all_reduce(top, "max")
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    weights = {j: torch.exp(e - top[stages.blocks[j].rows]) for j, e in scores.items()}
    total = s_dst.new_zeros(s_dst.shape)
    for j, w in weights.items():
        total += stages.blocks[j].row_sum(w)
    total = stages.all_reduce(total, "sum")
    alpha = {j: w / total[stages.blocks[j].rows] for j, w in weights.items()}
    return {j: z > 0 for j, z in raw.items()}, alpha


class _Attention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, s_dst, s_src, stages, heads, width, slope, drop):
        with stages.phase("spmm_forward"):
            s_dst = stages.tile_rows(s_dst.detach())
            positive, alpha = _softmax(stages, s_dst, s_src.detach(), slope)
            factors = {j: drop(stages.blocks[j], stages.row_ids, stages.col_ids(j)) if drop else None
                       for j in alpha}
            kept = {j: a if factors[j] is None else a * factors[j] for j, a in alpha.items()}
            out = stages.aggregate(kept, x.detach().contiguous(), heads, width)
        ctx.save_for_backward(x.detach())
        ctx.state = (stages, heads, width, slope, positive, alpha, factors, kept, s_dst.shape[0])
        return out

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        stages, heads, width, slope, positive, alpha, factors, kept, tile_m = ctx.state
        with stages.phase("spmm_backward"):
            dx, d_kept = stages.aggregate_backward(kept, grad.contiguous(), x.contiguous(), heads, width)
            d_alpha = {j: d if factors[j] is None else d * factors[j] for j, d in d_kept.items()}
            t = grad.new_zeros((tile_m, heads))
            for j, d in d_alpha.items():
                t += stages.blocks[j].row_sum(alpha[j] * d)
            t = stages.all_reduce(t, "sum")
            dz = {}
            for j, d in d_alpha.items():
                de = alpha[j] * (d - t[stages.blocks[j].rows])
                dz[j] = torch.where(positive[j], de, de * slope)
            ds_dst = grad.new_zeros((tile_m, heads))
            for j, d in dz.items():
                ds_dst += stages.blocks[j].row_sum(d)
            ds_dst = stages.grad_total(ds_dst)
            ds_src = stages.reduce(((j, stages.blocks[j].col_sum(d)) for j, d in dz.items()), ds_dst)
        ctx.state = None
        return dx, ds_dst, ds_src, None, None, None, None, None
