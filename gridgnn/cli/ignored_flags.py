"""The process-grid flags a one-process run ignores, said in one line instead of silently.

``--algo 2d`` without ``--nprocs`` is refused (it names a grid); the flags that only shape a grid
(``--grid``, ``--replication``, ``--comm``, ``--overlap``, ``--cache-panels``, ``--full-feature-rows``,
``--defer-weight-gather``, ``--reorder``, ``--profile``, ``--comm-precision``: one process moves nothing) do
not change what one process computes, so they are
run without and named in a warning on stderr.
"""

from __future__ import annotations

import dataclasses

from gridgnn.config import TrainConfig
from gridgnn.plan.execution import UNSET

GRID_FLAGS = {"grid": "--grid", "replication": "--replication", "comm": "--comm", "overlap": "--no-overlap",
              "cache_panels": "--cache-panels", "full_feature_rows": "--full-feature-rows",
              "defer_weight_gather": "--defer-weight-gather", "reorder": "--reorder", "profile": "--profile",
              "comm_precision": "--comm-precision"}
"""`TrainConfig` field -> the flag that sets it away from what ``gridgnn train`` leaves it at."""



def ignored_grid_flags(config: TrainConfig) -> list[str]:
    """The flags of `GRID_FLAGS` whose fields differ from what ``gridgnn train`` leaves unset, in that order."""
    defaults = {f.name: f.default for f in dataclasses.fields(TrainConfig)} | UNSET
    return [flag for name, flag in GRID_FLAGS.items() if getattr(config, name) != defaults[name]]


def ignored_flags_line(config: TrainConfig) -> str | None:
    """The warning for a one-process (``local``) run given grid flags, or None when it has none."""
    flags = ignored_grid_flags(config)
    if not flags:
        return None
    them = " and ".join([", ".join(flags[:-1]), flags[-1]] if len(flags) > 1 else flags)
    verb, it = ("apply", "them") if len(flags) > 1 else ("applies", "it")
    return (f"gridgnn: warning: {them} {verb} to a process grid; this run is one process (--algo local) and "
            f"ignores {it}: add --nprocs P (P > 1) to run on a grid")
