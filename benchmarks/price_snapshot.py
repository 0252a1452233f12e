"""The cost model's prediction for 2,823 configurations, to check that a refactor of the cost model changes no
number (issue 39: the model's description traced from its forward instead of restated in cost/).

    PYTHONPATH=TREE python benchmarks/price_snapshot.py OUT.json     # once per tree (each its own worktree)
    python benchmarks/same_prices.py BEFORE.json AFTER.json           # 0 differences expected

Every model kind with its options (SAGE normalize, GIN trained eps, GAT heads and output heads, attention
dropout) x three orders x 1-3 layers x two widths x six grids (1d, 1.5d, 2d, 3d, one process, 2d 1x4), on a
generated CSBM (three sampled combinations of comm, cached panels, full feature rows, deferred weight gather,
device and profile each) and on Cora (sparse features; one combination each): bytes and calls per rank and
phase, memory by component, communication and compute seconds, set-up bytes, calls and seconds. Runs on trees
before the redesign (`ModelSpec.of`) and after it (`gridgnn.nn.trace.model_spec`). ``DATA_ROOT``: where Cora is
(default ``../shared/datasets``).
"""

from __future__ import annotations

import itertools
import json
import os
import random
import sys

from gridgnn.config import TrainConfig
from gridgnn.cost.epoch_model import predict_epoch, stats_for
from gridgnn.cost.profile import CPU_GLOO_LOOPBACK, GPU_CLUSTER
from gridgnn.data.registry import load_dataset
from gridgnn.grid.shape import resolve_grid

try:
    from gridgnn.nn.trace import model_spec

    def spec_of(config, graph):
        return model_spec(config, graph)
except ImportError:  # a tree before the redesign
    from gridgnn.cost.epoch_model import ModelSpec

    def spec_of(config, graph):
        return ModelSpec.of(config, stats_for(config, graph))

MODELS = [dict(model="gcn"), dict(model="sage"), dict(model="sage", sage_normalize=True), dict(model="gin"),
          dict(model="gin", gin_train_eps=True), dict(model="gat", heads=2), dict(model="gat", heads=2, output_heads=3),
          dict(model="gat", heads=3, attn_dropout=0.3)]
ORDERS = ["auto", "aggregate-first", "transform-first"]
SHAPES = [("1d", 4, {}), ("1.5d", 8, {"replication": 2}), ("2d", 6, {"grid": "2x3"}), ("3d", 8, {"grid": "2x2x2"}),
          ("1d", 1, {}), ("2d", 4, {"grid": "1x4"})]
SWITCHES = list(itertools.product(("dense", "sparse"), (False, True), (False, True), (False, True), ("cpu", "cuda"),
                                  (GPU_CLUSTER, CPU_GLOO_LOOPBACK)))


def main(out: str) -> None:
    graphs = {"csbm": load_dataset("csbm:nodes=200,classes=5,features=13", seed=0),
              "cora": load_dataset("cora", data_root=os.environ.get("DATA_ROOT", "../shared/datasets"))}
    rng = random.Random(0)
    found = {}
    for name, model, order, layers, hidden, (algo, p, extra) in itertools.product(
            graphs, MODELS, ORDERS, (1, 2, 3), (8, 30), SHAPES):
        graph = graphs[name]
        for comm, cache, rows, defer, device, profile in rng.sample(SWITCHES, 3 if name == "csbm" else 1):
            if model["model"] == "gat" and comm == "sparse":
                continue
            config = TrainConfig(dataset="x", layers=layers, hidden=hidden, order=order, full_feature_rows=rows,
                                 defer_weight_gather=defer, **model)
            pred = predict_epoch(spec_of(config, graph), graph, resolve_grid(algo, p, **extra), comm=comm,
                                 cache_panels=cache, device=device, profile=profile)
            key = json.dumps([name, model, order, layers, hidden, algo, p, extra, comm, cache, rows, defer, device,
                              profile.name])
            found[key] = {"bytes": {k: v.tolist() for k, v in pred.bytes_by_phase.items()},
                          "calls": {k: v.tolist() for k, v in pred.calls_by_phase.items()},
                          "memory": {k: v.tolist() for k, v in pred.memory.items()},
                          "comm_s": pred.comm_s.tolist(), "compute_s": pred.compute_s.tolist(),
                          "setup_bytes": pred.setup_bytes.tolist(), "setup_calls": pred.setup_calls.tolist(),
                          "setup_s": None if pred.setup_s is None else pred.setup_s.tolist()}
    with open(out, "w", encoding="utf-8") as f:
        json.dump(found, f, sort_keys=True)
    print(len(found), "configurations")


if __name__ == "__main__":
    main(sys.argv[1])
