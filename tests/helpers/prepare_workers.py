"""Worker functions of the distributed-preparation tests (module level, so that forked workers find them)."""

from __future__ import annotations

import argparse

import numpy as np


def job_args(dataset: str, **flags) -> argparse.Namespace:
    """The ``gridgnn prepare`` arguments `gridgnn.prepare.launch.plan_job` reads."""
    values = dict(dataset=dataset, directed=False, seed=0, normalize_features=None, reorder="none", task=None,
                  features=None, labels=None, split=None, edge_features=None)
    values.update(flags)
    return argparse.Namespace(**values)


def prepare_worker(rank: int, world: int, job_document: dict):
    """Run one process of a preparation job; rank 0 returns the summary."""
    from gridgnn.prepare.job import PrepareJob
    from gridgnn.prepare.launch import run_job

    return run_job(PrepareJob(**job_document), say=lambda *_: None)


def failing_worker(rank: int, world: int, job_document: dict):
    """A preparation whose input is stale on every rank: each must raise the same one-line `DataError`."""
    from gridgnn.errors import DataError
    from gridgnn.prepare.job import PrepareJob
    from gridgnn.prepare.launch import run_job

    try:
        run_job(PrepareJob(**job_document), say=lambda *_: None)
    except DataError as error:
        return str(error)
    return None


def renumber_worker(rank: int, world: int, parts: list[np.ndarray]):
    """Compact ids of this rank's edges and the original ids of an even row block."""
    from gridgnn.partition import block_bounds
    from gridgnn.prepare.renumber import renumber

    compact, share = renumber(parts[rank])
    bounds = block_bounds(share.num_nodes, world, allow_empty=True)
    return compact, share.vertex_ids(bounds[rank], bounds[rank + 1]), share.num_nodes


def prepared_train_worker(rank: int, world: int, config_kwargs: dict) -> dict:
    """Train on the prepared folder ``config_kwargs["dataset"]`` (as a launched worker opens it); returns the
    losses, accuracies and the merged communication records (rank 0), and every rank's final weights."""
    from gridgnn.config import TrainConfig
    from gridgnn.data.prepared import open_prepared
    from gridgnn.train.run.grid_train import train_on_grid
    from gridgnn.train.run.resolve import resolve_run

    config = TrainConfig(**config_kwargs)
    config, shape, graph = resolve_run(config, open_prepared(config.dataset), world)
    trained, model = train_on_grid(config, graph, return_model=True, shape=shape)
    weights = [p.detach().cpu().numpy() for p in model.parameters()]
    out = {"weights": weights}
    if rank == 0:
        out |= {"loss": [r.loss for r in trained.result.epochs], "comm": trained.comm,
                "acc": [(r.train_acc, r.val_acc, r.test_acc) for r in trained.result.epochs]}
    return out


def route_worker(rank: int, world: int, n: int, edges: np.ndarray, rows: tuple[int, int]):
    """Route ``edges`` (directed, each to its target's row) to one process owning rows ``rows`` of an n-vertex
    graph (two passes, in two rounds) and return its pattern block."""
    from gridgnn.prepare.pipeline import _route

    def rounds():  # each round's edges, without edge-feature rows
        yield edges[: len(edges) // 2], None
        yield edges[len(edges) // 2:], None

    received, sent = _route(rounds, True, False, lambda ids: np.zeros(len(ids), dtype=np.int64), *rows, n)
    block = received.pattern(*rows, n, forward_only=False)
    return block.indptr, block.indices, received.keys is None, sent
