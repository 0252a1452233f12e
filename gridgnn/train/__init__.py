"""Training (docs/architecture.md §4, layer 6), in four rooms, each depending only on those listed before it:

``loop/``        the training loop of one process or one rank: construction, step, evaluation, the validation
                 judge, the learning-rate schedule, the task's metric
``checkpoint/``  resumable checkpoints: naming, saving, verifying, locking, resuming, ``--init-from``
``outputs/``     what a run writes or prints: the metrics file, the epoch CSV, TensorBoard events, the
                 per-epoch lines, predictions, embeddings and the model file
``run/``         from a `TrainConfig` to a finished run: resolving it, joining a process group, training on one
                 process or a grid, the memory guard, the planner's part, inference for ``gridgnn predict``

This package re-exports the names most callers want.
"""

from gridgnn.train.loop.trainer import EpochRecord, Trainer, TrainResult, deterministic
from gridgnn.train.outputs.metrics import build_metrics, write_json_atomic
from gridgnn.train.run.training import Run, build_aggregation, load_graph, run_training

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
