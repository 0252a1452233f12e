"""The configuration's sections (`gridgnn.config.sections`, issue 39 item 3): every `TrainConfig` field belongs to
exactly one section; the flat contract (field names, JSON order, defaults, the checkpoint fingerprint) is the one
of the flat class the sections replaced; a section is a value of its own that the functions of one concern take.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import scipy.sparse as sp

from gridgnn.config import (
    FIELD_ORDER,
    SECTIONS,
    CheckpointOptions,
    DataOptions,
    ExecutionOptions,
    ModelOptions,
    OutputOptions,
    TrainConfig,
    TrainingOptions,
)
from gridgnn.data.graph import Graph
from gridgnn.data.prepared import graph_digest
from gridgnn.errors import ConfigError
from gridgnn.train.checkpoint.fingerprint import run_fingerprint

FLAT_FIELDS = [
    "dataset", "data_root", "directed", "features", "labels", "split", "normalize_features", "layers", "hidden",
    "dropout", "lr", "weight_decay", "epochs", "seed", "algo", "order", "metrics_out", "tensorboard", "quiet",
    "progress", "nprocs", "replication", "grid", "overlap", "comm", "cache_panels", "full_feature_rows",
    "defer_weight_gather", "reorder", "profile", "checkpoint_dir", "checkpoint_every", "keep_checkpoints", "resume",
    "init_from", "auto_reason", "task_reason", "stop_on_nonfinite", "predictions_out", "embeddings_out",
    "embedding_layer", "save_model", "weights", "memory_per_proc", "memory_check", "task", "metric",
    "standardize_targets", "model", "sage_normalize", "gin_eps", "gin_train_eps", "heads", "output_heads",
    "attn_dropout", "patience", "eval_every", "lr_schedule", "lr_step_size", "lr_gamma", "lr_min",
    "lr_plateau_patience", "log_csv",
]
"""`dataclasses.fields` of the flat `TrainConfig` before the sections (commit 544420e), in order."""

DEFAULT_JSON = (
    '{"dataset": "csbm", "data_root": null, "directed": false, "features": null, "labels": null, "split": null, '
    '"normalize_features": null, "layers": 2, "hidden": 16, "dropout": 0.5, "lr": 0.01, "weight_decay": 0.0005, '
    '"epochs": 200, "seed": 0, "algo": "local", "order": "auto", "metrics_out": null, "tensorboard": null, '
    '"quiet": false, "progress": null, "nprocs": 1, "replication": 1, "grid": null, "overlap": true, '
    '"comm": "dense", "cache_panels": false, "full_feature_rows": false, "defer_weight_gather": false, '
    '"reorder": "none", "profile": null, "checkpoint_dir": null, "checkpoint_every": 10, "keep_checkpoints": 2, '
    '"resume": false, "init_from": null, "auto_reason": null, "task_reason": null, "stop_on_nonfinite": false, '
    '"predictions_out": null, "embeddings_out": null, "embedding_layer": null, "save_model": null, '
    '"weights": "best", "memory_per_proc": null, "memory_check": true, "task": "auto", "metric": "auto", '
    '"standardize_targets": false, "model": "gcn", "sage_normalize": false, "gin_eps": 0.0, '
    '"gin_train_eps": false, "heads": 1, "output_heads": 1, "attn_dropout": 0.0, "patience": 0, '
    '"eval_every": 1, "lr_schedule": "none", "lr_step_size": null, "lr_gamma": null, "lr_min": null, '
    '"lr_plateau_patience": null, "log_csv": null}'
)
"""``json.dumps(TrainConfig().to_dict())`` as the flat class wrote it (the ``config`` of every metrics file)."""

GAT_RUN = dict(dataset="ring.npz", model="gat", heads=2, output_heads=3, attn_dropout=0.25, layers=3, hidden=8,
               dropout=0.1, lr=0.05, lr_schedule="plateau", lr_gamma=0.5, algo="2d", nprocs=4, comm="dense",
               cache_panels=True, reorder="rcm", checkpoint_dir="ckpt", predictions_out="p.csv", epochs=7, seed=3,
               metric="accuracy", patience=2)
"""A config with a field changed in every section."""

GAT_RUN_FINGERPRINT = {
    "dataset": {"name": "ring", "num_nodes": 12, "num_edges": 24, "num_features": 3, "num_classes": 2,
                "directed": False, "feature_normalization": None, "node_data": None, "task": "multiclass",
                "target_standardization": None},
    "model": {"kind": "gat", "layers": 3, "hidden": 8, "dropout": 0.1, "seed": 3, "sage_normalize": False,
              "gin_eps": 0.0, "gin_train_eps": False, "heads": 2, "output_heads": 3, "attn_dropout": 0.25,
              "edge_dim": 0, "standardize_targets": False},
    "optimizer": {"lr": 0.05, "weight_decay": 0.0005, "lr_schedule": "plateau", "lr_step_size": None,
                  "lr_gamma": 0.5, "lr_min": None, "lr_plateau_patience": None},
    "evaluation": {"metric": "accuracy"},
}
"""`run_fingerprint` of `GAT_RUN` on `ring` as the flat class made it (less the graph digest)."""


def ring(n: int = 12) -> Graph:
    rows = np.arange(n)
    cols = (rows + 1) % n
    adj = sp.coo_matrix((np.ones(2 * n, np.float32), (np.r_[rows, cols], np.r_[cols, rows])), shape=(n, n)).tocsr()
    idx = np.arange(n)
    return Graph(adj, np.arange(n * 3, dtype=np.float32).reshape(n, 3) / 10, idx % 2, idx < 6,
                 (idx >= 6) & (idx < 9), idx >= 9, 2, name="ring")


def test_every_field_belongs_to_exactly_one_section_with_its_type_and_default():
    owners: dict[str, list[str]] = {}
    for name, section in SECTIONS.items():
        for field in dataclasses.fields(section):
            owners.setdefault(field.name, []).append(name)
    flat = {field.name: field for field in dataclasses.fields(TrainConfig)}
    assert sorted(owners) == sorted(flat)
    assert {name: len(found) for name, found in owners.items() if len(found) != 1} == {}
    assert list(SECTIONS) == ["data", "model", "training", "execution", "outputs", "checkpoints"]
    for section in SECTIONS.values():
        for field in dataclasses.fields(section):
            assert (field.type, field.default) == (flat[field.name].type, flat[field.name].default), field.name


def _flat_part(document: dict) -> str:
    """The JSON of ``document``'s first len(FLAT_FIELDS) entries (a field added later comes after them)."""
    return json.dumps(dict(list(document.items())[:len(FLAT_FIELDS)]))


def test_the_flat_contract_is_the_one_of_the_flat_class():
    names = [field.name for field in dataclasses.fields(TrainConfig)]
    assert names[:len(FLAT_FIELDS)] == FLAT_FIELDS == list(FIELD_ORDER)[:len(FLAT_FIELDS)]
    assert _flat_part(TrainConfig().to_dict()) == DEFAULT_JSON
    assert _flat_part(dataclasses.asdict(TrainConfig())) == DEFAULT_JSON
    config = TrainConfig(**GAT_RUN)
    assert list(config.to_dict()) == names
    assert TrainConfig(**config.to_dict()) == config  # a metrics file's config builds the same run
    moved = dataclasses.replace(config, comm="auto", hidden=4)  # flat replace, validated again
    assert (moved.comm, moved.hidden, moved.heads) == ("auto", 4, 2)
    with pytest.raises(ConfigError, match="hidden must be at least 1"):
        dataclasses.replace(config, hidden=0)


def test_the_checkpoint_fingerprint_is_the_one_of_the_flat_class():
    graph = ring()
    fingerprint = run_fingerprint(TrainConfig(**GAT_RUN), graph)
    assert fingerprint["dataset"].pop("digest") == graph_digest(graph)
    assert fingerprint == GAT_RUN_FINGERPRINT


def test_a_section_is_a_value_of_its_own():
    config = TrainConfig(**GAT_RUN)
    outputs = config.section("outputs")
    assert type(outputs) is OutputOptions and outputs == OutputOptions(predictions_out="p.csv")
    assert config.section("execution") == ExecutionOptions(algo="2d", nprocs=4, cache_panels=True, reorder="rcm")
    assert config.section("checkpoints") == CheckpointOptions.of(config) == CheckpointOptions(checkpoint_dir="ckpt")
    assert config.section("model") == ModelOptions(model="gat", heads=2, output_heads=3, attn_dropout=0.25,
                                                   layers=3, hidden=8, dropout=0.1)
    assert config.section("data") == DataOptions(dataset="ring.npz")
    assert config.section("training").lr_gamma == 0.5 and isinstance(config, TrainingOptions)
    assert len({config.section(name) for name in SECTIONS}) == len(SECTIONS)  # frozen values: hashable
    with pytest.raises(ConfigError, match="a configuration section is one of data, model"):
        config.section("optimizer")


def test_a_section_validates_its_own_fields_and_the_config_joins_them():
    with pytest.raises(ConfigError, match="resume needs a checkpoint folder"):
        CheckpointOptions(resume=True)
    with pytest.raises(ConfigError, match="--heads, --output-heads and --attn-dropout apply to --model gat"):
        ModelOptions(heads=2)
    with pytest.raises(ConfigError, match="--algo auto chooses the grid"):
        ExecutionOptions(algo="auto", grid="2x2")
    with pytest.raises(ConfigError, match="lr_min must be in"):
        TrainingOptions(lr_schedule="cosine", lr_min=0.5)
    with pytest.raises(ConfigError, match="quiet and progress cannot both be set"):
        OutputOptions(quiet=True, progress=True)
    # rules across two sections: each section alone is fine, the whole config is not
    assert ModelOptions(model="gat").model == "gat" and ExecutionOptions(comm="sparse").comm == "sparse"
    with pytest.raises(ConfigError, match="--comm sparse is not implemented for --model gat"):
        TrainConfig(model="gat", comm="sparse")
    assert OutputOptions(embedding_layer=5).embedding_layer == 5
    with pytest.raises(ConfigError, match="embedding_layer must be at most 2"):
        TrainConfig(embedding_layer=5)
    with pytest.raises(ConfigError, match="standardizes regression targets, not multiclass ones"):
        TrainConfig(standardize_targets=True, task="multiclass")


def test_functions_of_one_concern_take_their_section(tmp_path):
    import torch

    from gridgnn.train.checkpoint.lock import LOCK_FILE, hold_checkpoint_dir
    from gridgnn.train.checkpoint.resume import check_checkpoint_dir, checkpoint_to_resume
    from gridgnn.train.loop.trainer import build_optimizer
    from gridgnn.train.outputs.products import wants_products
    from gridgnn.train.outputs.progress import show_log, show_progress
    from gridgnn.train.run.grid_train import spmm_setup_record
    from gridgnn.train.run.memory_guard import available_per_proc
    from gridgnn.train.run.resolve import grid_shape_for

    assert wants_products(OutputOptions(save_model=str(tmp_path / "m.pt")))
    assert not wants_products(OutputOptions(metrics_out="m.json"))
    assert show_progress(OutputOptions(progress=True)) and not show_log(OutputOptions(quiet=True))
    assert available_per_proc(ExecutionOptions(memory_per_proc=12345), 4) == (12345, "--memory-per-proc")
    assert grid_shape_for(ExecutionOptions(algo="2d", nprocs=6, grid="3x2"), 6).sizes == (3, 2)
    record = spmm_setup_record(ExecutionOptions(algo="2d", comm="sparse", cache_panels=True), [], 0.5)
    assert (record["comm"], record["cache_panels"], record["index_exchange_calls"]) == ("sparse", True, 0)
    group = build_optimizer(torch.nn.Linear(2, 2), TrainingOptions(lr=0.25, weight_decay=0.125)).param_groups[0]
    assert (group["lr"], group["weight_decay"]) == (0.25, 0.125)
    folder = tmp_path / "ckpt"
    checkpoints = CheckpointOptions(checkpoint_dir=str(folder), resume=True)
    with hold_checkpoint_dir(checkpoints):
        assert (folder / LOCK_FILE).is_file()
        check_checkpoint_dir(checkpoints)
        assert checkpoint_to_resume(checkpoints) is None  # an empty folder: start from epoch 1
    assert not folder.exists()  # the lock made it and, unused, took it away
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(ConfigError, match="it is not a folder"):
        check_checkpoint_dir(CheckpointOptions(checkpoint_dir=str(tmp_path / "a-file")))


def test_the_planner_reads_the_execution_section():
    from gridgnn.plan.execution import UNSET, options_to_price, settle

    free = ExecutionOptions(algo="auto", **UNSET)
    assert free.free == ("algo", "comm", "reorder", "cache_panels", "full_feature_rows", "defer_weight_gather")
    assert options_to_price(free) == {"cache_options": (False, True), "rows_options": (False, True),
                                      "defer_options": (False, True)}
    assert ExecutionOptions().free == ()  # a library caller's defaults are pinned: dense, natural order, off
    config = TrainConfig(nprocs=4, algo="1d", **UNSET)
    assert config.free == ExecutionOptions.of(config).free == ("comm", "reorder", "cache_panels",
                                                                "full_feature_rows", "defer_weight_gather")

    class Entry:  # a plan entry's settled options
        comm, reorder, cache_panels, feature_rows, defer_weight_gather = "sparse", "rcm", False, True, False

    settled = settle(config, Entry())
    assert settled.section("execution").free == () and (settled.comm, settled.reorder) == ("sparse", "rcm")
    assert settled.full_feature_rows is True and settled.section("model") == config.section("model")
