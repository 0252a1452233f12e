"""Worker-side code of the distributed training tests (imported by forked processes)."""

from __future__ import annotations

from gridgnn.config import TrainConfig
from gridgnn.train.run.grid_train import train_on_grid
from gridgnn.train.run.resolve import resolve_run
from gridgnn.train.run.training import load_graph


def train_worker(rank: int, world_size: int, config_kwargs: dict) -> dict:
    """Train with ``config_kwargs`` on this grid; every rank returns its final weights, rank 0 also losses,
    accuracies, learning rates, the early stop and best epoch, and the merged communication records."""
    config = TrainConfig(**config_kwargs)
    config, shape, graph = resolve_run(config, load_graph(config), world_size)
    trained, model = train_on_grid(config, graph, return_model=True, shape=shape)
    result, comm, shape = trained.result, trained.comm, trained.shape
    weights = [p.detach().cpu().numpy() for p in model.parameters()]
    if rank != 0:
        return {"weights": weights}
    return {
        "loss": [r.loss for r in result.epochs],
        "acc": [(r.train_acc, r.val_acc, r.test_acc) for r in result.epochs],
        "comm": comm, "grid": shape.label(), "weights": weights,
        "lr": [r.lr for r in result.epochs], "stopped_early": result.stopped_early, "best_epoch": result.best_epoch,
    }
