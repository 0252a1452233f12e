"""Differentiable column collectives for 2D and 3D layouts, where feature columns are split on ``col``.

Each function is collective on ``axis`` and tags its communication with the phase given by the caller, in
the forward pass and again in the backward pass. ``col_counts[k]`` is the number of columns held by the
process at coordinate k of ``axis``.
"""

from __future__ import annotations

import torch

from gridgnn.grid.comm import Communicator


def _gather_cols(comm: Communicator, x: torch.Tensor, axis: str, col_counts: list[int]) -> torch.Tensor:
    return comm.all_gather_cols(x, axis, col_counts)


def _reduce_scatter_cols(comm: Communicator, x: torch.Tensor, axis: str, col_counts: list[int]) -> torch.Tensor:
    return comm.reduce_scatter_cols(x, axis, col_counts)


def _own_cols(comm: Communicator, x: torch.Tensor, axis: str, col_counts: list[int]) -> torch.Tensor:
    k = comm.grid.index(axis)
    start = sum(col_counts[:k])
    return x[:, start:start + col_counts[k]].contiguous()


class AllGatherCols(torch.autograd.Function):
    """(m, f_k) on each process -> (m, sum f) on all. Backward: reduce-scatter of the partial gradients.

    For a full matrix that each process uses for a different part of the result (``Partial`` gradients).
    """

    @staticmethod
    def forward(ctx, x, comm: Communicator, axis: str, col_counts: list[int], phase: str):
        ctx.args = (comm, axis, col_counts, phase)
        with comm.phase(phase):
            return _gather_cols(comm, x, axis, col_counts)

    @staticmethod
    def backward(ctx, grad):
        comm, axis, col_counts, phase = ctx.args
        with comm.phase(phase):
            return _reduce_scatter_cols(comm, grad.contiguous(), axis, col_counts), None, None, None, None


class AllGatherColsReplicated(torch.autograd.Function):
    """(m, f_k) -> (m, sum f) on all; backward keeps this process's columns of the gradient (no traffic).

    For a full matrix that every process of the group consumes identically (e.g. the logits of a loss that
    each of them evaluates the same way): each already holds the whole gradient.
    """

    @staticmethod
    def forward(ctx, x, comm: Communicator, axis: str, col_counts: list[int], phase: str):
        ctx.args = (comm, axis, col_counts)
        with comm.phase(phase):
            return _gather_cols(comm, x, axis, col_counts)

    @staticmethod
    def backward(ctx, grad):
        comm, axis, col_counts = ctx.args
        return _own_cols(comm, grad, axis, col_counts), None, None, None, None


class ReduceScatterCols(torch.autograd.Function):
    """Partial sums (m, sum f) on each process -> this process's columns (m, f_k) of the total.

    Backward: all-gather of the column blocks of the gradient.
    """

    @staticmethod
    def forward(ctx, x, comm: Communicator, axis: str, col_counts: list[int], phase: str):
        ctx.args = (comm, axis, col_counts, phase)
        with comm.phase(phase):
            return _reduce_scatter_cols(comm, x.contiguous(), axis, col_counts)

    @staticmethod
    def backward(ctx, grad):
        comm, axis, col_counts, phase = ctx.args
        with comm.phase(phase):
            return _gather_cols(comm, grad.contiguous(), axis, col_counts), None, None, None, None


class AllReduceCols(torch.autograd.Function):
    """Partial sums (m, k) on each process -> their sum on all. Backward: the sum of the gradients (each
    process used the total for its own columns, so each holds a part of the gradient). With ``float32`` both
    move as float32 whatever the wire precision (`gridgnn.grid.comm.Communicator.float32_values`)."""

    @staticmethod
    def forward(ctx, x, comm: Communicator, axis: str, phase: str, float32: bool = False):
        ctx.args = (comm, axis, phase, float32)
        out = x.clone()
        with comm.phase(phase), comm.float32_values(float32):
            comm.all_reduce(out, axis)
        return out

    @staticmethod
    def backward(ctx, grad):
        comm, axis, phase, float32 = ctx.args
        out = grad.contiguous().clone()
        with comm.phase(phase), comm.float32_values(float32):
            comm.all_reduce(out, axis)
        return out, None, None, None, None
