"""`--algo auto` outside a grid, and its flag conflicts (the grid case is in test_cli_distributed.py)."""

from __future__ import annotations

import json

from gridgnn.cli.main import main
from gridgnn.config import TrainConfig
from gridgnn.train.auto import auto_flags, choose_configuration
from gridgnn.train.run import load_graph


def test_one_process_auto_is_local_and_recorded(tmp_path, capsys):
    out = tmp_path / "m.json"
    assert main(["train", "--algo", "auto", "--epochs", "2", "--metrics-out", str(out)]) == 0
    assert capsys.readouterr().out.startswith("--algo auto: one process, so local")
    config = json.loads(out.read_text())["config"]
    assert config["algo"] == "local" and config["auto_reason"].startswith("--algo auto: one process")


def test_auto_refuses_a_grid_or_replication_of_its_own(capsys):
    assert main(["train", "--algo", "auto", "--nprocs", "4", "--grid", "2x2"]) == 2
    assert "drop --grid and --replication" in capsys.readouterr().err


def test_the_choice_pins_flags_the_workers_parse_back():
    config = TrainConfig(dataset="csbm:nodes=400", algo="auto", nprocs=6)
    chosen, reason = choose_configuration(config, load_graph(config), 6)
    assert chosen.algo in ("1d", "1.5d", "2d", "3d") and reason.startswith(f"--algo auto chose {chosen.algo}")
    flags = auto_flags(chosen)
    again = dict(zip(flags[::2], flags[1::2], strict=True))
    assert again["--algo"] == chosen.algo and int(again["--replication"]) == chosen.replication
    assert again.get("--grid") == chosen.grid
