"""Test-wide set-up: the named datasets are read from the project's ``../shared/datasets`` (resolved from this
file, not from the current folder) through ``$GRIDGNN_DATA_ROOT``, which worker subprocesses inherit. A root
set before the tests run wins."""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("GRIDGNN_DATA_ROOT", str(Path(__file__).resolve().parents[2] / "shared" / "datasets"))
