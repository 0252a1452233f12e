"""Pure tests (no process group): block boundaries, grid shapes and their error messages."""

from __future__ import annotations

import pytest

from gridgnn.errors import ConfigError
from gridgnn.grid.shape import resolve_grid
from gridgnn.partition import block_bounds, owner, parse_shape, refine, sub_bounds


def test_block_bounds_balanced_and_uneven():
    assert block_bounds(10, 4) == [0, 3, 6, 8, 10]
    assert block_bounds(8, 4) == [0, 2, 4, 6, 8]
    assert block_bounds(1, 3, allow_empty=True, what="feature columns") == [0, 1, 1, 1]
    assert sub_bounds(6, 11, 2) == [6, 9, 11]


def test_more_blocks_than_vertices_is_a_clear_error():
    with pytest.raises(ConfigError, match="4 blocks of vertices need at least 4 vertices, got 3"):
        block_bounds(3, 4)


def test_owner_and_refine():
    rows, cols = block_bounds(12, 2), block_bounds(12, 3)
    assert refine(rows, cols) == [0, 4, 6, 8, 12]
    assert [owner(rows, a) for a in (0, 4, 6, 8)] == [0, 0, 1, 1]
    assert [owner(cols, a) for a in (0, 4, 6, 8)] == [0, 1, 1, 2]


@pytest.mark.parametrize(("algo", "p", "kwargs", "sizes"), [
    ("1d", 5, {}, (5,)),
    ("1.5d", 6, {"replication": 2}, (3, 2)),
    ("1.5d", 4, {}, (4, 1)),
    ("2d", 6, {}, (2, 3)),
    ("2d", 9, {}, (3, 3)),
    ("2d", 6, {"grid": "3x2"}, (3, 2)),
    ("3d", 8, {}, (2, 2, 2)),
    ("3d", 12, {"grid": "2x2x3"}, (2, 2, 3)),
])
def test_resolve_grid(algo, p, kwargs, sizes):
    shape = resolve_grid(algo, p, **kwargs)
    assert shape.sizes == sizes and shape.world_size == p
    for rank in range(p):
        assert shape.rank_of(**shape.coords(rank)) == rank


@pytest.mark.parametrize(("algo", "p", "kwargs", "message"), [
    ("2d", 4, {"grid": "2x3"}, "2d grid 2x3 needs 6 processes, got 4"),
    ("1.5d", 4, {"replication": 3}, r"replication 3 does not divide 4 processes; choose one of \[1, 2, 4\]"),
    ("3d", 6, {}, "3d needs a cube number of processes"),
    ("3d", 12, {"grid": "2x3x2"}, "3d grid must be q x q x d"),
    ("4d", 4, {}, "unknown algorithm '4d'"),
    ("1d", 0, {}, "must be positive"),
    ("2d", 4, {"grid": "2xa"}, "not of the form"),
    ("2d", 4, {"grid": "0x4"}, "positive dimensions"),
])
def test_invalid_grids_fail_with_the_factors(algo, p, kwargs, message):
    with pytest.raises(ConfigError, match=message):
        resolve_grid(algo, p, **kwargs)


@pytest.mark.parametrize("algo,p,kwargs,expected", [
    ("1d", 4, {}, (1, 1, 1, False, {"grid": None, "replication": 1}, [])),
    ("1.5d", 6, {"replication": 3}, (3, 1, 1, False, {"grid": None, "replication": 3}, ["--replication", "3"])),
    ("2d", 6, {"grid": "2x3"}, (1, 3, 1, True, {"grid": "2x3", "replication": 1}, ["--grid", "2x3"])),
    ("3d", 12, {"grid": "2x2x3"}, (1, 2, 3, True, {"grid": "2x2x3", "replication": 1}, ["--grid", "2x2x3"])),
])
def test_shape_properties_replace_algorithm_branches(algo, p, kwargs, expected):
    shape = resolve_grid(algo, p, **kwargs)
    assert (shape.replication, shape.col_blocks, shape.depth, shape.splits_features, shape.config_fields(),
            shape.grid_flags()) == expected
    again = resolve_grid(algo, p, **{k: v for k, v in shape.config_fields().items() if v is not None})
    assert again == shape  # the fields select the same shape


def test_parse_shape():
    assert parse_shape("2x2x2") == (2, 2, 2)


def _fails_on_rank_one(rank: int, world_size: int) -> int:
    if rank == 1:
        raise ValueError("boom on purpose")
    return rank


def test_harness_surfaces_the_failing_rank():
    from gridgnn.launch.spawn import WorkerError, run_workers

    assert run_workers(_ok, 3) == [0, 1, 2]
    with pytest.raises(WorkerError, match=r"rank 1 failed:(.|\n)*ValueError: boom on purpose"):
        run_workers(_fails_on_rank_one, 2, timeout_s=60)


def _ok(rank: int, world_size: int) -> int:
    return rank
