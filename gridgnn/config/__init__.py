"""A training run's configuration (layer 0 of docs/architecture.md §4).

`TrainConfig` is the resolved configuration of one run: the flags of ``gridgnn train``, the keywords of
`gridgnn.fit`, the ``config`` object of every metrics file, run spec and checkpoint. It is made of six
sections a reader can take one at a time (`gridgnn.config.sections`): `DataOptions`, `ModelOptions`,
`TrainingOptions`, `ExecutionOptions`, `OutputOptions` and `CheckpointOptions`; each documents and validates
its own fields, and a function that needs one concern takes that section. `validate()` raises `ConfigError`
with one self-contained line naming the bad field. The values fields may take, and the rules several layers
share, are `gridgnn.config.choices`'.
"""

from gridgnn.config.choices import (
    ALGOS,
    COLUMN_ORDERED,
    COMM_PRECISION_CHOICES,
    COMM_PRECISIONS,
    COMMS,
    GRID_RE,
    LOWER_IS_BETTER,
    LR_DEFAULTS,
    LR_SCHEDULES,
    MAX_EDGE_FEATURES,
    MAX_HEADS,
    MAX_SEED,
    METRIC_CHOICES,
    METRICS,
    MODELS,
    ORDERS,
    REORDER_CHOICES,
    REORDERS,
    SCHEDULE_PARAMETERS,
    SWITCHES,
    TASK_CHOICES,
    TASKS,
    WEIGHTS,
    model_comms,
    resolve_order,
)
from gridgnn.config.sections import (
    SECTIONS,
    CheckpointOptions,
    DataOptions,
    ExecutionOptions,
    ModelOptions,
    OutputOptions,
    Section,
    TrainingOptions,
)
from gridgnn.config.train_config import FIELD_ORDER, TrainConfig

__all__ = [
    "ALGOS", "COLUMN_ORDERED", "COMM_PRECISIONS", "COMM_PRECISION_CHOICES", "COMMS", "FIELD_ORDER", "GRID_RE",
    "LOWER_IS_BETTER", "LR_DEFAULTS", "LR_SCHEDULES", "MAX_EDGE_FEATURES", "MAX_HEADS",
    "MAX_SEED", "METRICS", "METRIC_CHOICES", "MODELS", "ORDERS", "REORDERS", "REORDER_CHOICES",
    "SCHEDULE_PARAMETERS", "SECTIONS", "SWITCHES", "TASKS", "TASK_CHOICES", "WEIGHTS", "CheckpointOptions",
    "DataOptions", "ExecutionOptions", "ModelOptions", "OutputOptions", "Section", "TrainConfig",
    "TrainingOptions", "model_comms", "resolve_order",
]
