"""Worker-side code of the distributed training tests (imported by forked processes)."""

from __future__ import annotations

from gridgnn.config import TrainConfig
from gridgnn.train.run import load_graph
from gridgnn.train.run_distributed import train_on_grid


def train_worker(rank: int, world_size: int, config_kwargs: dict) -> dict | None:
    """Train with ``config_kwargs`` on this grid; rank 0 returns losses, accuracies and comm."""
    config = TrainConfig(**config_kwargs)
    result, comm, shape = train_on_grid(config, load_graph(config))
    if rank != 0:
        return None
    return {
        "loss": [r.loss for r in result.epochs],
        "acc": [(r.train_acc, r.val_acc, r.test_acc) for r in result.epochs],
        "comm": comm, "grid": shape.label(),
    }
