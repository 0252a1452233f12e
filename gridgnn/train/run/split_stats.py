"""The planner's block statistics shared out over the workers of a torchrun run (collective on the world).

Under torchrun every worker resolves the run itself (`gridgnn.train.run.resolve.resolve_run`, deterministic:
each reaches the same spec from the same graph), so each would compute every block statistic of the graph
(entries per block, distinct columns, covers) on its own. `split_over_world` makes worker r compute the blocks
r, r + P, r + 2P, ... of each call and an all-gather share them, so the world computes each block once; used
through `gridgnn.cost.block_stats.blocks_split_by` around the resolution (`gridgnn.train.run.worker`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch.distributed as dist

from gridgnn.errors import DataError


def split_over_world(compute: Callable[[int], np.ndarray], count: int) -> list[np.ndarray]:
    """``[compute(k) for k in range(count)]``, block k computed by the process of rank ``k % P`` and all-gathered
    (pickled objects, on the default group). A block that fails fails the call on every process alike, with the
    first failing block's message (a damaged folder's `DataError` as such, anything else as `RuntimeError`), so
    that none waits on the others. Collective on the world: every process must call it with the same ``count``,
    in the same order."""
    rank, world = dist.get_rank(), dist.get_world_size()
    mine: dict[int, tuple[str, object]] = {}
    for k in range(rank, count, world):
        try:
            mine[k] = ("ok", compute(k))
        except Exception as error:  # noqa: BLE001 - sent to every process, raised there alike
            mine[k] = ("data" if isinstance(error, DataError) else "error", f"{error}")
            break
    parts: list[dict | None] = [None] * world
    dist.all_gather_object(parts, mine)
    merged = {k: value for part in parts for k, value in (part or {}).items()}
    failed = [merged[k] for k in sorted(merged) if merged[k][0] != "ok"]
    if failed:
        kind, message = failed[0]
        raise DataError(message) if kind == "data" else RuntimeError(f"block statistics failed: {message}")
    return [merged[k][1] for k in range(count)]
