"""What ``gridgnn train`` asks of the library before and while it trains (`gridgnn.train.run.world`,
`gridgnn.train.run.watched`): the default ``--algo`` for the world, who launches workers, and a run watched as
it goes (the first non-finite loss told once, quiet off rank 0). Small generated graphs, few epochs."""

from __future__ import annotations

import pytest

from gridgnn.config import TrainConfig
from gridgnn.errors import ConfigError
from gridgnn.run_spec import ProcessOptions
from gridgnn.train.run.watched import run_watched
from gridgnn.train.run.world import check_process_count, launches_workers, settle_algo, trains_alone

SMALL = "csbm:nodes=300"
TORCHRUN = {"RANK": "0", "WORLD_SIZE": "3", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}


@pytest.fixture
def alone(monkeypatch):
    for name in (*TORCHRUN, "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)


def test_the_default_algo_follows_the_world_and_local_on_several_is_refused(alone, monkeypatch):
    assert (settle_algo(None, 1), settle_algo(None, 4), settle_algo("2d", 4)) == ("local", "auto", "2d")
    with pytest.raises(ConfigError, match=r"--nprocs 2 asks for 2: drop --nprocs"):
        settle_algo("local", 2)
    for name, value in TORCHRUN.items():
        monkeypatch.setenv(name, value)
    assert settle_algo(None, 1) == "auto"  # torchrun's world, not --nprocs
    with pytest.raises(ConfigError, match=r"torchrun started 3: run it without torchrun"):
        settle_algo("local", 1)


def test_who_trains_a_run(alone, monkeypatch):
    grid = TrainConfig(dataset=SMALL, algo="2d", nprocs=4)
    assert launches_workers(grid) and not trains_alone(grid)
    assert trains_alone(TrainConfig(dataset=SMALL)) and not launches_workers(TrainConfig(dataset=SMALL))
    with pytest.raises(ConfigError, match=r"--algo 2d runs on a process grid and needs several processes"):
        check_process_count(TrainConfig(dataset=SMALL, algo="2d"))
    for name, value in TORCHRUN.items():
        monkeypatch.setenv(name, value)
    assert not launches_workers(grid) and not trains_alone(TrainConfig(dataset=SMALL))
    check_process_count(TrainConfig(dataset=SMALL, algo="2d"))  # a worker of torchrun's grid


def test_a_watched_run_tells_its_first_nonfinite_loss_once(alone):
    told = []
    watched = run_watched(TrainConfig(dataset=SMALL, quiet=True, epochs=4, lr=1e30), ProcessOptions(), True,
                          on_nonfinite=lambda epoch, loss: told.append((epoch, loss)))
    result = watched.run.result
    first = result.first_nonfinite_epoch
    assert first is not None and len(result.epochs) == 4  # without --stop-on-nonfinite it goes on
    assert told == [(first, result.epochs[first - 1].loss)]


def test_a_watched_run_off_rank0_is_quiet_and_alone_settles_auto(alone, capsys):
    said = []
    config = TrainConfig(dataset=SMALL, epochs=2, algo="auto", progress=True)
    watched = run_watched(config, ProcessOptions(), False, on_nonfinite=lambda *_: None, say=said.append)
    assert watched.config.quiet and watched.config.algo == "local"  # auto on one process: local
    assert capsys.readouterr().out == ""
    said.clear()
    watched = run_watched(config, ProcessOptions(), True, on_nonfinite=lambda *_: None, say=said.append)
    assert not watched.config.quiet and len(said) == 1 and "local" in said[0]
    out = capsys.readouterr().out
    assert out.startswith("task ") and "epoch 1/2" in out and "epoch 2/2" in out
