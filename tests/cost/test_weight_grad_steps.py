"""The weight-gradient reduction's steps (`gridgnn.cost.weight_grad_steps`): the module table, grid by grid. The
executor runs them and the model prices them; tests/parallel checks both against each other on every grid."""

from __future__ import annotations

from gridgnn.cost.weight_grad_steps import weight_grad_steps
from gridgnn.grid.shape import resolve_grid


def _ops(steps) -> list[tuple]:
    return [(s.op, s.axis, s.part) + (("after",) if s.after_step else ()) for s in steps]


def test_1d_and_15d_all_reduce_on_row_and_move_feature_rows_after_the_rest():
    assert _ops(weight_grad_steps(resolve_grid("1d", 4), whole=True, blocks=False, row_groups=0, defer=False)) == [
        ("all_reduce", "row", "whole")]
    steps = weight_grad_steps(resolve_grid("1.5d", 8, replication=2), whole=True, blocks=True, row_groups=1,
                              defer=True)
    assert _ops(steps) == [("all_reduce", "row", "whole"), ("all_to_all", "row", "rows"),
                           ("all_to_all", "row", "rows", "after")]  # no blocks on a grid without col
    assert weight_grad_steps(resolve_grid("1d", 1), whole=True, blocks=False, row_groups=0, defer=False) == ()


def test_2d_sums_blocks_on_row_and_gathers_them_on_col_unless_deferred():
    shape = resolve_grid("2d", 6, grid="2x3")
    plain = weight_grad_steps(shape, whole=True, blocks=True, row_groups=0, defer=False)
    assert _ops(plain) == [("all_reduce", "world", "whole"), ("all_reduce", "row", "blocks"),
                           ("all_gather", "col", "blocks")]
    deferred = weight_grad_steps(shape, whole=False, blocks=True, row_groups=2, defer=True)
    assert _ops(deferred) == [("all_reduce", "row", "blocks"), ("all_to_all", "row", "rows"),
                              ("all_to_all", "row", "rows"), ("all_to_all", "row", "rows", "after"),
                              ("all_to_all", "row", "rows", "after")]
    one_row = weight_grad_steps(resolve_grid("2d", 3, grid="1x3"), whole=False, blocks=True, row_groups=1,
                                defer=True)
    assert one_row == ()  # nothing to sum over one block row, nothing to exchange, nothing gathered


def test_3d_sums_blocks_over_row_and_depth_and_sums_owned_rows_on_depth():
    shape = resolve_grid("3d", 8, grid="2x2x2")
    steps = weight_grad_steps(shape, whole=True, blocks=True, row_groups=1, defer=False)
    assert _ops(steps) == [("all_reduce", "world", "whole"), ("reduce_scatter", "row", "blocks"),
                           ("all_reduce", "depth", "blocks"), ("all_gather", "row", "blocks"),
                           ("all_gather", "col", "blocks"), ("all_to_all", "row", "rows"),
                           ("all_reduce", "depth", "rows"), ("all_to_all", "row", "rows", "after")]
    flat = weight_grad_steps(resolve_grid("3d", 4, grid="2x2x1"), whole=False, blocks=True, row_groups=1,
                             defer=True)
    assert _ops(flat) == [("all_reduce", "row", "blocks"), ("all_to_all", "row", "rows"),
                          ("all_to_all", "row", "rows", "after")]
