"""Block statistics shared out over a run's workers (`gridgnn.train.run.split_stats.split_over_world` through
`gridgnn.cost.block_stats.blocks_split_by`, as torchrun workers resolve a run): the same numbers as one process
computes alone, each block computed by one process only, and a failing block failing every process alike."""

from __future__ import annotations

import numpy as np
import pytest

import gridgnn.cost.block_stats as block_stats
from gridgnn.cost.block_stats import blocks_split_by
from gridgnn.data.prepared import open_prepared, prepare_graph
from gridgnn.data.registry import load_dataset
from gridgnn.errors import DataError
from gridgnn.launch.spawn import run_workers
from gridgnn.train.run.auto import graph_stats

SPEC = "rmat:scale=9,edge_factor=8,features=6,classes=3"
ROWS, SEGMENTS = [0, 100, 230, 300, 512], [0, 64, 200, 512]


def _statistics(folder: str) -> tuple:
    stats = graph_stats(open_prepared(folder), "gcn")
    return (stats.grouped_nnz(ROWS, ROWS), stats.touched(ROWS, SEGMENTS), *stats.covers(ROWS))


def _split_worker(rank: int, world: int, folder: str) -> dict:
    from gridgnn.train.run.split_stats import split_over_world

    computed = []
    for name, fn in list(block_stats.FUNCTIONS.items()):
        def counted(indptr, indices, rows, *args, _fn=fn, _name=name):
            computed.append((_name, rows))
            return _fn(indptr, indices, rows, *args)
        block_stats.FUNCTIONS[name] = counted
    with blocks_split_by(split_over_world):
        result = _statistics(folder)
    return {"result": result, "computed": computed}


def _failing_worker(rank: int, world: int, folder: str) -> str:
    from gridgnn.train.run.split_stats import split_over_world

    original = block_stats.FUNCTIONS["groups"]

    def broken(indptr, indices, rows, *args):
        if rows[0] == ROWS[3]:  # the fourth block, computed by rank 1
            raise DataError("adjacency: column ids outside [0, 512) in rows 300..511")
        return original(indptr, indices, rows, *args)

    block_stats.FUNCTIONS["groups"] = broken
    with blocks_split_by(split_over_world):
        try:
            graph_stats(open_prepared(folder), "gcn").grouped_nnz(ROWS, ROWS)
        except DataError as error:
            return f"DataError: {error}"
    return "no error"


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("split_stats")
    return str(prepare_graph(load_dataset(SPEC), root / "prepared", operator="gcn"))


def test_split_statistics_equal_one_process_and_each_block_is_computed_once(folder):
    alone = _statistics(folder)
    per_rank = run_workers(_split_worker, 2, folder, timeout_s=240)
    for out in per_rank:
        for mine, expected in zip(out["result"], alone, strict=True):
            np.testing.assert_array_equal(mine, expected)
    first, second = ({rows for _, rows in out["computed"]} for out in per_rank)
    assert first and second and not first & second  # shared out: no block computed by both
    assert len(per_rank[0]["computed"]) + len(per_rank[1]["computed"]) == 3 * (len(ROWS) - 1)  # 3 maps, once each


def test_a_failing_block_fails_every_process_with_its_line(folder):
    outcomes = run_workers(_failing_worker, 2, folder, timeout_s=240)
    assert outcomes == ["DataError: adjacency: column ids outside [0, 512) in rows 300..511"] * 2
