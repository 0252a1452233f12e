"""Training: the single-process loop, metrics and the config-to-run glue (docs/architecture.md §4, layer 6)."""

from gridgnn.train.metrics import build_metrics, write_json_atomic
from gridgnn.train.run import Run, build_aggregation, load_graph, run_training
from gridgnn.train.trainer import EpochRecord, Trainer, TrainResult, deterministic

__all__ = [
    "EpochRecord",
    "Run",
    "TrainResult",
    "Trainer",
    "build_aggregation",
    "build_metrics",
    "deterministic",
    "load_graph",
    "run_training",
    "write_json_atomic",
]
