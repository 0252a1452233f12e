"""The weight-gradient reduction of a training step as steps: one description of which collectives run, on
which axes and in which order, that `gridgnn.parallel.grid_ops.GridOps` runs (``reduce_gradients``,
``after_step``) and `gridgnn.cost.epoch_model` prices (pure).

Each step moves one ``part`` of the gradients:

=========  ==================================================================================================
part       what, and its steps
=========  ==================================================================================================
whole      the parameters every process reads whole, packed (1D/1.5D: every parameter but the feature weights
           moved by rows; 2D/3D: those no product or bias reads by column blocks): one all-reduce on ``row``
           (1D/1.5D) or ``world`` (2D/3D)
blocks     2D/3D with more than one column block: each process's column blocks of the other parameters,
           packed, summed over the processes sharing them: an all-reduce on the one axis besides ``col``
           above 1, or with two (3D) a reduce-scatter on ``row``, an all-reduce of the process's part on
           ``depth`` and an all-gather on ``row`` (the bytes of one all-reduce over both); then, unless
           deferred (``--defer-weight-gather``), an all-gather of the blocks on ``col``
rows       per group of feature weights moved by rows (`gridgnn.cost.feature_row_cost`): an all-to-all on
           ``row`` to the rows' owners, an all-reduce of the owned rows on ``depth`` (3D, d > 1), and after
           the optimizer step (``after_step``) an all-to-all on ``row`` back to the rows' readers
=========  ==================================================================================================

A step whose process group is one process is not listed. Where a step has nothing to move on a process
(an empty column block), the executor skips it there and the price counts no call, alike on every process
of its group.
"""

from __future__ import annotations

from dataclasses import dataclass

from gridgnn.cost.feature_row_cost import feature_row_axis, feature_row_sum_axis
from gridgnn.grid.shape import GridShape


@dataclass(frozen=True)
class GradStep:
    """One collective of the weight-gradient reduction: ``op`` (``all_reduce``, ``reduce_scatter``,
    ``all_gather`` or ``all_to_all``) on ``axis`` of ``part`` (``whole``, ``blocks`` or ``rows``: the module
    table), after the optimizer step when ``after_step``."""

    op: str
    axis: str
    part: str
    after_step: bool = False


def weight_grad_steps(shape: GridShape, *, whole: bool, blocks: bool, row_groups: int,
                      defer: bool) -> tuple[GradStep, ...]:
    """The steps on ``shape`` (the module table) for the parameter parts present: ``whole``, ``blocks``
    (parameters read by column blocks), ``row_groups`` groups of feature weights moved by rows; ``defer``:
    the blocks' ``col`` all-gather is left out."""
    steps = []
    axis = "world" if shape.splits_features else "row"
    if whole and (shape.world_size if axis == "world" else shape.size("row")) > 1:
        steps.append(GradStep("all_reduce", axis, "whole"))
    if blocks and shape.splits_features and shape.col_blocks > 1:
        axes = [a for a in shape.axes if a != "col" and shape.size(a) > 1]
        if len(axes) == 1:
            steps.append(GradStep("all_reduce", axes[0], "blocks"))
        elif axes:
            first, second = axes
            steps += [GradStep("reduce_scatter", first, "blocks"), GradStep("all_reduce", second, "blocks"),
                      GradStep("all_gather", first, "blocks")]
        if not defer:
            steps.append(GradStep("all_gather", "col", "blocks"))
    exchange = feature_row_axis(shape)  # None: no axis to exchange rows on (one block row)
    if row_groups and exchange is not None:
        summed = feature_row_sum_axis(shape)
        for _ in range(row_groups):
            steps.append(GradStep("all_to_all", exchange, "rows"))
            if summed is not None:
                steps.append(GradStep("all_reduce", summed, "rows"))
        steps += [GradStep("all_to_all", exchange, "rows", after_step=True)] * row_groups
    return tuple(steps)
