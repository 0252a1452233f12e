"""The collectives on ``col`` that each layout operation issues where a grid splits feature columns (2D, 3D):
one description, which `gridgnn.parallel.grid_ops.GridOps` runs and `gridgnn.cost.epoch_model` prices (pure).

=============  =============================================  ==============================================
record         forward                                        backward (when the input needs a gradient)
=============  =============================================  ==============================================
`Product`      f_in <= f_out: all-gather the input's f_in      reduce-scatter the input's gradient (f_in)
               columns; else reduce-scatter the f_out-wide     all-gather the output's gradient (f_out)
               partial products; nothing when it reads full
               feature rows
`HeadSum`      all-reduce K partial sums per row               all-reduce again
`RowSum`       all-reduce one partial sum per row, float32     all-reduce again, float32
`EdgeSum`      all-reduce ``width`` partial sums per edge      all-reduce again
`HeadMean`     all-gather the heads' columns                   reduce-scatter
`FullRows`     all-gather every column (phase ``loss``)        nothing (each keeps its own columns)
=============  =============================================  ==============================================

A forward step and the backward step listed after it are one autograd function of
`gridgnn.parallel.collectives` (all-gather and reduce-scatter are each other's transpose, an all-reduce its own).

A row sum is a norm's statistic (SAGE's row norm, the layer norm's mean and variance, `gridgnn.nn.norm`): it
travels as float32 in every ``--comm-precision``, as attention's row maxima do. A sum of squares spans the
square of its values' range (it overflows float16 where the values themselves fit: measured on GIN with the
layer norm on Amazon Photo, 2d, fp16), its gradient is of order 1e-7 (below float16's normal range), and its
error scales every value of the row; it is one value per row, against the row's ``w`` values.
"""

from __future__ import annotations

from dataclasses import dataclass

from gridgnn.cost.operations import EdgeSum, FullRows, HeadMean, HeadSum, Operation, Product, RowSum


@dataclass(frozen=True)
class ColumnStep:
    """One collective on ``col``: ``op`` (``all_gather``, ``reduce_scatter`` or ``all_reduce``) of ``width``
    global columns (all-gather, reduce-scatter) or values per row (all-reduce), in the operation's backward
    when ``backward``; ``per_edge``: its rows are the rank's edges, not its dense rows; ``float32``: it moves
    float32 whatever the wire precision (a row sum: the module docstring)."""

    op: str
    width: int
    backward: bool = False
    phase: str = "dense"
    per_edge: bool = False
    float32: bool = False


def column_steps(op: Operation, feature_rows: bool = False) -> tuple[ColumnStep, ...]:
    """The steps of ``op`` (the module table), forward first; ``feature_rows``: a product that reads the input
    features reads them in full rows (``--full-feature-rows`` in effect), so it moves nothing."""
    if isinstance(op, Product):
        if feature_rows and op.reads_features:
            return ()
        if op.f_in <= op.f_out:
            return (ColumnStep("all_gather", op.f_in),) + ((ColumnStep("reduce_scatter", op.f_in, True),)
                                                           if op.input_grad else ())
        return ColumnStep("reduce_scatter", op.f_out), ColumnStep("all_gather", op.f_out, True)
    if isinstance(op, (HeadSum, RowSum, EdgeSum)):
        width = op.heads if isinstance(op, HeadSum) else (1 if isinstance(op, RowSum) else op.width)
        kind = dict(per_edge=isinstance(op, EdgeSum), float32=isinstance(op, RowSum))
        return (ColumnStep("all_reduce", width, **kind),) + ((ColumnStep("all_reduce", width, True, **kind),)
                                                             if op.backward else ())
    if isinstance(op, HeadMean):
        return (ColumnStep("all_gather", op.width),) + ((ColumnStep("reduce_scatter", op.width, True),)
                                                        if op.backward else ())
    if isinstance(op, FullRows):
        return (ColumnStep("all_gather", op.width, phase="loss"),)
    return ()
