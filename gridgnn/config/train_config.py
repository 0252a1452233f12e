"""`TrainConfig`: the resolved configuration of one training run, all six sections of
`gridgnn.config.sections` at once.

It is what the command line builds from its flags, what `gridgnn.fit` takes as keywords, what the metrics
JSON, the run spec and every checkpoint record under ``config``, and what the checkpoint fingerprint reads:
so its fields are flat (``TrainConfig(hidden=32, comm="sparse")``, ``config.hidden``) and keep the names and
the JSON order they had before the sections existed (`FIELD_ORDER`). A section is a value of its own:
``config.section("outputs")`` (or ``OutputOptions.of(config)``); and since `TrainConfig` inherits every
section, a function that takes one section also takes the whole config.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from gridgnn.config.checks import check_int
from gridgnn.config.choices import COLUMN_ORDERED, check_column_order
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
from gridgnn.errors import ConfigError

FIELD_ORDER = (
    "dataset", "data_root", "directed", "features", "labels", "split", "normalize_features", "layers", "hidden",
    "dropout", "lr", "weight_decay", "epochs", "seed", "algo", "order", "metrics_out", "tensorboard", "quiet",
    "progress", "nprocs", "replication", "grid", "overlap", "comm", "cache_panels", "full_feature_rows",
    "defer_weight_gather", "reorder", "profile", "checkpoint_dir", "checkpoint_every", "keep_checkpoints", "resume",
    "init_from", "auto_reason", "task_reason", "stop_on_nonfinite", "predictions_out", "embeddings_out",
    "embedding_layer", "save_model", "weights", "memory_per_proc", "memory_check", "task", "metric",
    "standardize_targets", "model", "sage_normalize", "gin_eps", "gin_train_eps", "heads", "output_heads",
    "attn_dropout", "patience", "eval_every", "lr_schedule", "lr_step_size", "lr_gamma", "lr_min",
    "lr_plateau_patience", "log_csv",
)
"""The order of `TrainConfig`'s fields in ``dataclasses.fields`` and ``asdict``, and so in every JSON file a run
writes: the order of the flat class the sections replaced, so that those files are byte for byte what they
were. A field added to a section later comes after these (in the order inheritance lists it) unless it is
appended here."""


@dataclass(frozen=True, kw_only=True)
class TrainConfig(DataOptions, ModelOptions, TrainingOptions, ExecutionOptions, OutputOptions, CheckpointOptions):
    """Everything that determines a training run: the fields of `DataOptions`, `ModelOptions`,
    `TrainingOptions`, `ExecutionOptions`, `OutputOptions` and `CheckpointOptions` (each documents its own),
    flat. Frozen: a changed run is a new one (`dataclasses.replace`, validated again).

    Validation runs every section's own checks, in the order of `SECTIONS`, then the rules that join two
    sections: a regression-only ``standardize_targets`` and the ``task``, ``embedding_layer`` and ``layers``,
    a GAT ``model`` and ``comm="sparse"`` or ``"cover"``, ``comm="cover"`` and a 2D or 3D ``algo``,
    ``reorder="double-random"`` and what it runs on (`gridgnn.config.choices.check_column_order`).
    """

    def validate(self) -> None:
        """Raise `ConfigError` (one line) on the first invalid field."""
        for section in SECTIONS.values():
            section.validate(self)
        if self.standardize_targets and self.task in ("multiclass", "multilabel"):
            raise ConfigError(f"--standardize-targets standardizes regression targets, not {self.task} ones")
        if self.embedding_layer is not None:
            check_int("embedding_layer", self.embedding_layer, minimum=1, maximum=self.layers)
        if self.model == "gat" and not self.edge_dim and self.comm in ("sparse", "cover"):  # --edge-dim: messages
            raise ConfigError(f"--comm {self.comm} is not implemented for --model gat (its attention stages move "
                              "whole blocks); use --comm dense or auto")
        if self.reorder in COLUMN_ORDERED:
            check_column_order(self.reorder, self.algo, self.comm, self.model, self.edge_dim)
        if self.comm == "cover" and self.algo in ("2d", "3d"):
            raise ConfigError(f"--comm cover runs on --algo 1d and 1.5d, not {self.algo} (a 2D/3D process holds "
                              "only a block of a row's entries); use --comm sparse, dense or auto")

    def section(self, name: str) -> Section:
        """The section ``name`` of `SECTIONS` (``data``, ``model``, ``training``, ``execution``, ``outputs``,
        ``checkpoints``) as a value of its own. Raises `ConfigError` for another name."""
        if name not in SECTIONS:
            raise ConfigError(f"a configuration section is one of {', '.join(SECTIONS)}; got {name!r}")
        return SECTIONS[name].of(self)

    def to_dict(self) -> dict:
        """A JSON-ready dict of every field, in `FIELD_ORDER` (the ``config`` object of the metrics file)."""
        return dataclasses.asdict(self)


def _keep_field_order(cls: type, order: tuple[str, ...]) -> None:
    """Put ``cls``'s dataclass fields in ``order`` (then any field not in it, as inherited): what
    ``dataclasses.fields``, ``asdict`` and ``replace`` read. Inheritance alone would list them section by
    section. Raises RuntimeError when ``order`` names a field ``cls`` does not have (a renamed field breaks
    the files' contract and must be decided, not absorbed)."""
    inherited = cls.__dataclass_fields__
    unknown = [name for name in order if name not in inherited]
    if unknown:
        raise RuntimeError(f"FIELD_ORDER names fields TrainConfig does not have: {unknown}")
    cls.__dataclass_fields__ = {name: inherited[name] for name in order} | {
        name: field for name, field in inherited.items() if name not in order}


_keep_field_order(TrainConfig, FIELD_ORDER)
