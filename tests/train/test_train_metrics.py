"""The metrics JSON: every field, and atomic writes that never leave a partial file."""

import json
import os

import pytest
from model_helpers import random_graph

from gridgnn.config import TrainConfig
from gridgnn.errors import ConfigError
from gridgnn.train import run_training, write_json_atomic
from gridgnn.train.outputs.metrics import check_writable

EPOCH_KEYS = {"epoch", "loss", "train_acc", "val_acc", "test_acc", "time_s", "train_metric", "val_metric",
              "test_metric"}
FINAL_KEYS = {"train_acc", "val_acc", "test_acc", "best_val_acc", "test_acc_at_best_val", "metric", "train_metric",
              "val_metric", "test_metric", "best_val_metric", "test_metric_at_best_val", "best_epoch"}


def test_metrics_file_has_every_field(tmp_path):
    out = tmp_path / "metrics.json"
    config = TrainConfig(epochs=4, metrics_out=str(out))
    run_training(config, graph=random_graph())
    metrics = json.loads(out.read_text())
    settled = {"task": "multiclass", "metric": "accuracy", "task_reason": metrics["config"]["task_reason"]}
    assert metrics["config"] == {**config.to_dict(), **settled}  # as settled
    assert settled["task_reason"].startswith("task       multiclass (inferred from the targets): 3 classes")
    dataset = metrics["dataset"]
    assert (dataset["name"], dataset["num_nodes"], dataset["num_features"], dataset["num_classes"]) == (
        "random", 60, 12, 3)
    assert dataset["num_edges"] > 0 and isinstance(dataset["meta"], dict)
    graph = random_graph()
    assert dataset["split"] == {"train": int(graph.train_mask.sum()), "val": int(graph.val_mask.sum()),
                                "test": int(graph.test_mask.sum())}
    assert [e["epoch"] for e in metrics["epochs"]] == [1, 2, 3, 4]
    assert all(EPOCH_KEYS <= set(e) for e in metrics["epochs"])
    assert FINAL_KEYS <= set(metrics["final"])
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.json"]


def test_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    out = tmp_path / "m.json"
    write_json_atomic(out, {"ok": 1})
    with pytest.raises(ValueError):
        write_json_atomic(out, {"bad": float("nan")})  # not valid JSON: refused midway
    assert json.loads(out.read_text()) == {"ok": 1}
    assert os.listdir(tmp_path) == ["m.json"]


def test_unwritable_destinations_fail_before_training(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        check_writable(tmp_path / "missing" / "m.json")
    with pytest.raises(ConfigError, match="directory"):
        check_writable(tmp_path)
    config = TrainConfig(epochs=10**6, metrics_out=str(tmp_path / "no" / "m.json"))
    with pytest.raises(ConfigError):
        run_training(config, graph=random_graph())  # would take hours if it trained first


@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"), reason="resets VmHWM through /proc (Linux)")
def test_peak_memory_restarts_after_reset():
    import numpy as np
    import torch

    from gridgnn.train.loop.distributed import peak_memory_bytes, reset_peak_memory

    cpu = torch.device("cpu")
    block = np.ones(256 * 2**20, dtype=np.uint8)  # 256 MiB, touched; freed through munmap
    with_block = peak_memory_bytes(cpu)
    del block
    # a high-water mark: freeing does not lower it (the kernel's RSS counters are approximate by a few pages)
    assert peak_memory_bytes(cpu) > with_block - 16 * 2**20
    reset_peak_memory(cpu)
    assert peak_memory_bytes(cpu) < with_block - 200 * 2**20
