"""A worker of the local launcher (``gridgnn train|predict --nprocs P``): run the spec it was handed.

`gridgnn.launch.local.worker_command` starts ``python -c ... <run-spec.json>``: the path of the run spec the
launcher resolved (`gridgnn.run_spec`) is the worker's only argument. Nothing is parsed again from a command
line, and nothing but torchrun's own variables (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
MASTER_PORT) comes through the environment. Errors end the worker as they end ``gridgnn`` (one line, the
exit statuses of `gridgnn.cli.main`), except a lost peer's line, which the launcher prints.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from gridgnn.cli.main import exit_now, guarded, printable_output
from gridgnn.launch.orphans import die_with_launcher
from gridgnn.run_spec import read_spec


def run() -> None:
    """The worker process: `main` on ``sys.argv[1]``, then exit at once with its status."""
    exit_now(main(sys.argv[1]))


def main(spec_path: str) -> int:
    """Run the spec at ``spec_path``; returns the exit status."""
    printable_output()
    return guarded(lambda: _work(spec_path), launcher_speaks=True)


def _work(spec_path: str) -> int:
    if _is_preparation(spec_path):  # gridgnn prepare --nprocs P
        from gridgnn.prepare.job import PrepareJob
        from gridgnn.prepare.launch import worker_main

        job = PrepareJob.read(spec_path)
        die_with_launcher(job.launcher_pid)
        return worker_main(job)
    spec = read_spec(spec_path)  # imports no torch: a worker whose launcher is already gone stops at once
    die_with_launcher(spec.launcher_pid)
    if spec.command == "predict":
        from gridgnn.cli.predict_cmd import predict_spec

        return predict_spec(spec)
    from gridgnn.cli.train_cmd import train_spec

    return train_spec(spec)


def _is_preparation(path: str) -> bool:
    """True when the file handed to this worker is a preparation job (`gridgnn.prepare.job`), not a run spec."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8")).get("command") == "prepare"
    except (OSError, ValueError, AttributeError):
        return False  # read_spec says what is wrong with it
