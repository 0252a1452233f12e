"""Statistics of a prepared folder's operator computed block by block (`gridgnn.cost.block_stats`): the same
numbers as the in-memory statistics (entries per block, distinct columns per segment, per-pair covers), with no
column-major copy of Â made, for a one-process and a sharded folder, in this process and on a pool of
processes that open the folder themselves."""

from __future__ import annotations

import numpy as np
import pytest
from prepare_workers import job_args, prepare_worker

import gridgnn.cost.block_stats as block_stats
from gridgnn.config import TrainConfig
from gridgnn.cost.block_stats import BlockReader
from gridgnn.cost.epoch_model import predict_run
from gridgnn.data.prepared import open_prepared, operator_structure, prepare_graph
from gridgnn.data.registry import load_dataset
from gridgnn.grid.shape import resolve_grid
from gridgnn.launch.spawn import run_workers
from gridgnn.nn.models import operator_of
from gridgnn.nn.trace import model_spec
from gridgnn.prepare.launch import plan_job
from gridgnn.train.run.auto import graph_stats

SPEC = "rmat:scale=10,edge_factor=8,features=6,classes=3"
PARTITIONS = [[0, 1024], [0, 256, 512, 768, 1024], [0, 100, 101, 640, 1024], [0, 300, 1024]]
SEGMENTS = [[0, 1024], [0, 128, 256, 384, 512, 640, 768, 896, 1024], [0, 7, 500, 1000, 1024]]


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> tuple:
    """The graph in memory, its one-process folder and a folder prepared by 2 processes into 3 shards."""
    root = tmp_path_factory.mktemp("block_stats")
    graph = load_dataset(SPEC)
    one = prepare_graph(graph, root / "one", operator="gcn")
    many = root / "many"
    many.mkdir()
    job = plan_job(job_args(SPEC), operator_of("gcn"), 3, str(many))
    run_workers(prepare_worker, 2, vars(job) | {"command": "prepare"}, timeout_s=240)
    return graph, one, many


def test_block_by_block_statistics_equal_the_in_memory_ones_without_a_column_major_copy(folders):
    graph, one, many = folders
    memory = graph_stats(graph)
    for folder in (one, many):
        stats = graph_stats(open_prepared(folder))
        assert stats.streamed and not memory.streamed
        for rows in PARTITIONS:
            for segments in SEGMENTS:
                np.testing.assert_array_equal(stats.touched(rows, segments), memory.touched(rows, segments))
                np.testing.assert_array_equal(stats.grouped_nnz(rows, segments), memory.grouped_nnz(rows, segments))
            np.testing.assert_array_equal(stats.covers(rows), memory.covers(rows))
        assert stats._columns is None  # no column-major copy of the whole structure was made
    assert memory.touched(PARTITIONS[1], SEGMENTS[1]).sum() > 0 and memory.covers(PARTITIONS[1])[0].sum() > 0


def test_a_pool_of_processes_that_open_the_shards_gives_the_same_numbers(folders):
    _, _, many = folders
    indptr, indices = operator_structure(str(many))
    serial = BlockReader(indptr, indices)
    pooled = BlockReader(indptr, indices, open_prepared(many).structure_opener(), workers=2)
    for rows in PARTITIONS[1:]:
        for name, args in (("touched", (SEGMENTS[1], 1024)), ("covers", (rows, 1024)),
                           ("groups", (np.array(SEGMENTS[2]), np.arange(4), 4, "x"))):
            expected, got = serial.map(name, rows, *args), pooled.map(name, rows, *args)
            assert all(np.array_equal(a, b) for a, b in zip(expected, got, strict=True)), name
    assert pooled.pooled_calls == 9  # the blocks were read by the pool's processes
    pooled.close()


def test_the_command_line_lets_a_large_folder_use_the_pool(folders, monkeypatch):
    _, _, many = folders
    prepared = open_prepared(many)
    assert graph_stats(prepared).workers == 1  # a library user's program gets no pool unless it asks
    monkeypatch.setitem(block_stats._POOL, "processes", 2)  # what `gridgnn.cli.main.run` enables
    assert graph_stats(prepared).workers == 1  # a folder below POOL_ENTRIES: no pool
    monkeypatch.setattr(block_stats, "POOL_ENTRIES", 1000)
    stats = graph_stats(prepared)
    assert stats.workers == 2
    np.testing.assert_array_equal(stats.touched(PARTITIONS[1], SEGMENTS[1]),
                                  graph_stats(load_dataset(SPEC)).touched(PARTITIONS[1], SEGMENTS[1]))
    assert stats.blocks().pooled_calls == 1


@pytest.mark.parametrize("comm", ["sparse", "cover"])
def test_the_planner_prices_a_sharded_folder_as_the_graph_in_memory(folders, comm):
    graph, _, many = folders
    prepared = open_prepared(many)
    config = TrainConfig(dataset=SPEC, algo="1d", nprocs=4, comm=comm)
    shape = resolve_grid("1d", 4)
    expected = predict_run(model_spec(config, graph), graph_stats(graph), shape, config)
    got = predict_run(model_spec(config, prepared), graph_stats(prepared), shape, config)
    for phase, values in expected.bytes_by_phase.items():
        np.testing.assert_array_equal(got.bytes_by_phase[phase], values, err_msg=phase)
    assert expected.bytes_by_phase["spmm_forward"].max() > 0


POOL_SCRIPT = """
import multiprocessing, os, sys
from gridgnn.cost.block_stats import BlockReader
from gridgnn.data.prepared import open_prepared, operator_structure
if __name__ == "__main__":
    indptr, indices = operator_structure(sys.argv[1])
    reader = BlockReader(indptr, indices, open_prepared(sys.argv[1]).structure_opener(), workers=2)
    reader.map("touched", [0, 10, 20], [0, 1024], 1024)
    print(reader.pooled_calls, " ".join(str(p.pid) for p in multiprocessing.active_children()), flush=True)
    os._exit(0)  # as the launcher ends (`gridgnn.cli.main.exit_now`): no shutdown of anything
"""


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, ended but not yet reaped, does not)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            return not any(line.startswith("State:") and "Z" in line for line in status)
    except FileNotFoundError:
        return False


def test_the_pool_leaves_no_process_behind_when_its_parent_ends_at_once(folders, tmp_path):
    import subprocess
    import sys
    import time

    _, _, many = folders
    script = tmp_path / "pool.py"
    script.write_text(POOL_SCRIPT)
    # the pool's processes (and multiprocessing's resource tracker) hold the pipe open while they live: run()
    # returns once they have all noticed that their parent is gone and ended
    started = time.monotonic()
    done = subprocess.run([sys.executable, str(script), str(many)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    calls, *pids = done.stdout.split()
    assert calls == "1" and pids  # the pool's processes were alive when their parent ended
    assert time.monotonic() - started < 30
    assert not [pid for pid in pids if _alive(int(pid))]


def test_plan_prices_a_folder_prepared_for_its_model_in_place_and_in_its_own_order(folders, capsys, monkeypatch):
    import json

    from gridgnn.cli.main import main
    from gridgnn.cli.plan_cmd import _graph_from_args
    from gridgnn.data.prepared import PreparedGraph

    graph, one, many = folders
    args = type("Args", (), dict(num_nodes=None, num_edges=None, num_features=None, num_classes=None, dataset=str(many),
                                 data_root=None, directed=False, seed=0, model="gcn", features=None, labels=None,
                                 split=None, edge_features=None))()
    assert isinstance(_graph_from_args(args), PreparedGraph)  # gcn's operator: kept on disk, read block by block
    args.model = "sage"  # another operator: the graph read back, as before
    assert not isinstance(_graph_from_args(args), PreparedGraph)
    plans = []
    for dataset in (str(many), SPEC):
        assert main(["plan", "--dataset", dataset, "--nprocs", "4", "--algo", "1d", "--comm", "auto", "--json"]) == 0
        plans.append(json.loads(capsys.readouterr().out))
    assert {entry["reorder"] for entry in plans[0]} == {"none"}  # a prepared folder trains in its own order
    in_place = {(e["grid"], e["comm"], e["defer_weight_gather"]): e["bytes_per_rank"] for e in plans[0]}
    loaded = {(e["grid"], e["comm"], e["defer_weight_gather"]): e["bytes_per_rank"] for e in plans[1]
              if e["reorder"] == "none"}
    assert in_place == loaded and len(in_place) >= 3  # the same prices as the graph in memory
