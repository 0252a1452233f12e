"""What a checkpoint belongs to: the run fingerprint, and the check that a checkpoint fits the run resuming
it (not collective)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from gridgnn.config import TrainConfig
from gridgnn.data.attach import NODE_DATA_KEYS
from gridgnn.data.graph import Graph
from gridgnn.data.prepared import PreparedGraph, graph_digest
from gridgnn.errors import CheckpointError
from gridgnn.train.checkpoint.manifest import MANIFEST
from gridgnn.train.loop.task_metrics import resolve_metric


def run_fingerprint(config: TrainConfig, graph: Graph | PreparedGraph) -> dict:
    """What a checkpoint must share with the run that resumes it: the dataset (sizes and a digest of the
    adjacency structure, labels and feature shape, and of the node data files attached to it), the model (its
    kind, ``gcn``/``sage``/``gin``/``gat``, its widths and options), the optimizer settings and the metric that
    picks the best epoch (``evaluation``; the task is the dataset's).

    The grid (algorithm, P, replication, shape), the product order, the vertex order (``--reorder``) and the
    number of epochs may change, and so may the optimizer's ``lr`` and ``weight_decay`` (`RESUME_MAY_CHANGE`:
    the resumed run continues Adam's moments with the new values). A reordered graph is fingerprinted by the
    digest of its content in the original order (``meta["content_digest"]``, `gridgnn.data.reorder`), since the
    weights are not per vertex.
    """
    digest = graph.meta.get("content_digest") or (
        graph.digest if isinstance(graph, PreparedGraph) else graph_digest(graph))
    return {
        "dataset": {"name": graph.name, "num_nodes": graph.num_nodes, "num_edges": graph.num_edges,
                    "num_features": graph.num_features, "num_classes": graph.num_classes,
                    "directed": graph.directed, "feature_normalization": graph.meta.get("feature_normalization"),
                    "digest": digest, "node_data": node_data_digest(graph.meta),
                    "task": graph.task,
                    "target_standardization": _standardization(config, graph),
                    **_edge_features(graph)},
        "model": {"kind": config.model, "layers": config.layers, "hidden": config.hidden,
                  "dropout": config.dropout, "seed": config.seed, "sage_normalize": config.sage_normalize,
                  "gin_eps": config.gin_eps, "gin_train_eps": config.gin_train_eps,
                  # GIN's and GINE's alone: every other kind's fingerprint stays as it was before --gin-norm
                  **({"gin_norm": config.gin_norm} if config.model in ("gin", "gine") else {}), "heads": config.heads,
                  "output_heads": config.output_heads, "attn_dropout": config.attn_dropout,
                  "edge_dim": config.edge_dim,
                  "standardize_targets": config.standardize_targets},
        "optimizer": {"lr": config.lr, "weight_decay": config.weight_decay, "lr_schedule": config.lr_schedule,
                      "lr_step_size": config.lr_step_size, "lr_gamma": config.lr_gamma, "lr_min": config.lr_min,
                      "lr_plateau_patience": config.lr_plateau_patience},
        "evaluation": {"metric": resolve_metric(config.metric, graph.task)},
    }


def _edge_features(graph) -> dict:
    """``num_edge_features`` for a graph with edge features (a model reading them takes their width from it;
    absent otherwise, so that earlier checkpoints' fingerprints stay as they were)."""
    count = int(getattr(graph, "num_edge_features", 0) or 0)
    return {"num_edge_features": count} if count else {}


def node_data_digest(meta: dict) -> str | None:
    """SHA-256 over the digests of the node data files attached to the graph (``--features``, ``--labels``,
    ``--split``: `gridgnn.data.attach`), None when none was: features of the same shape and a split from other
    files are not in the graph digest, and a resume must not silently train on them."""
    parts = [f"{key}={meta[key]}" for key in NODE_DATA_KEYS if meta.get(key)]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest() if parts else None


RESUME_MAY_CHANGE = {("optimizer", "lr"), ("optimizer", "weight_decay")}
"""Fingerprint fields a resumed run may change (``--lr``, ``--weight-decay``): Adam continues from its saved
moments with the new step size and decay, a schedule set by hand; everything else of the optimizer, the data
and the model must match."""

_BEFORE_MODEL_KINDS = {("model", "kind"): "gcn", ("model", "sage_normalize"): False, ("model", "gin_eps"): 0.0,
                       ("model", "gin_train_eps"): False, ("model", "gin_norm"): "none", ("model", "heads"): 1,
                       ("model", "output_heads"): 1, ("model", "attn_dropout"): 0.0, ("model", "edge_dim"): 0,
                       ("dataset", "task"): "multiclass",
                       ("dataset", "target_standardization"): None, ("model", "standardize_targets"): False,
                       ("optimizer", "lr_schedule"): "none"}
"""What a checkpoint written before model kinds existed (no such fields) holds: a GCN; before tasks: classes;
before learning-rate schedules: none (its parameters unset); before ``--gin-norm``: none."""


_BEFORE_GROUPS = {"evaluation": {"metric": "accuracy"}}
"""Fingerprint groups of a checkpoint written before they existed: a classifier scored by accuracy."""


def _standardization(config: TrainConfig, graph) -> list | None:
    """``[shift, scale]`` of a ``--standardize-targets`` run (the model's output units: a checkpoint's weights
    mean nothing without them), else None."""
    if not config.standardize_targets or graph.task != "regression":
        return None
    from gridgnn.data.targets import standardization

    return [list(part) for part in standardization(graph.labels, graph.train_mask)]


def check_compatible(manifest: dict, current: dict, path: Path) -> None:
    """Raise `CheckpointError` naming the first field where the checkpoint's fingerprint differs."""
    saved = manifest["fingerprint"]
    for group, fields in current.items():
        recorded = saved.get(group, _BEFORE_GROUPS.get(group))
        if not isinstance(recorded, dict):
            raise CheckpointError(f"checkpoint '{path}': {MANIFEST} is malformed (fingerprint {group})")
        for name, value in fields.items():
            if (group, name) in RESUME_MAY_CHANGE:
                continue
            before = recorded.get(name, _BEFORE_MODEL_KINDS.get((group, name)))
            if before != value:
                what = "content" if name == "digest" else name
                raise CheckpointError(
                    f"checkpoint '{path}' belongs to another run: {group} {what} is {_show(before)} there and "
                    f"{_show(value)} here (the grid, order, epochs, --lr and --weight-decay may change; the data, the "
                    "model and the rest of the optimizer may not)")


def changed_on_resume(manifest: dict, current: dict) -> dict[str, list]:
    """The `RESUME_MAY_CHANGE` fields whose value differs between the checkpoint and this run:
    ``{"lr": [there, here], ...}`` (empty when none)."""
    saved = manifest["fingerprint"]
    return {name: [saved[group].get(name), current[group][name]] for group, name in sorted(RESUME_MAY_CHANGE)
            if saved.get(group, {}).get(name) != current[group][name]}


def _show(value: object) -> str:
    return f"{value[:12]}…" if isinstance(value, str) and len(value) == 64 else repr(value)
