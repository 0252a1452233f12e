"""What a run in one process (`gridgnn.train.run.training`) and a run on a grid (`gridgnn.train.run.worker`)
share: the graph a configuration names and the `Run` they return. Not collective."""

from __future__ import annotations

from dataclasses import dataclass

from gridgnn.config import TrainConfig
from gridgnn.data.attach import NodeFiles
from gridgnn.data.graph import Graph
from gridgnn.data.prepared import is_prepared
from gridgnn.data.registry import load_dataset
from gridgnn.data.retarget import with_task
from gridgnn.errors import ConfigError
from gridgnn.train.loop.trainer import TrainResult


@dataclass
class Run:
    """A finished run: the graph it trained on, its records and the metrics document; ``model``: the trained
    model (on every rank), with the weights of the last epoch, or of ``config.weights`` when the run wrote
    predictions, embeddings or a model file."""

    graph: Graph
    result: TrainResult
    metrics: dict
    model: object = None


def load_graph(config: TrainConfig) -> Graph:
    """The dataset named by ``config.dataset`` (name, generator spec or path), seeded by ``config.seed``, with
    the node data files of ``config.features``, ``labels`` and ``split`` attached (`gridgnn.data.attach`), its
    targets laid out for ``config.task`` (`gridgnn.data.retarget.with_task`)."""
    if is_prepared(config.dataset):
        raise ConfigError(f"'{config.dataset}' is a prepared graph (gridgnn prepare): it is read by distributed "
                          "workers (--algo 1d|1.5d|2d|3d); give the original dataset here")
    graph = load_dataset(config.dataset, data_root=config.data_root, directed=config.directed,
                         normalize_features=config.normalize_features, seed=config.seed,
                         node_files=NodeFiles.of(config))
    return with_task(graph, config.task)
