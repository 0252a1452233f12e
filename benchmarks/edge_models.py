"""The figures of the edge-feature models (docs/edge-features.md): bytes, step time, memory and speed.

Four parts, each a section of ``results/edge_models/edge_models.{md,json}``:

1. ``grids``: GINE, GAT with ``--edge-dim`` and MeshGraphNet trained by ``gridgnn train`` on 1d (dense and
   sparse communication) and 1.5d 2x2, and (GINE and GAT, whose messages are separable over feature columns) 2d
   2x2 (dense and sparse), 3d 2x2x1 and 3d 1x1x4 at P = 4, on the mesh generator, and GINE and GAT on Amazon
   Computers with 8 generated edge features (``--edge-features``, N(0, 1), seeded): the largest bytes per rank per step,
   whether every rank's measured bytes equal the cost model's per phase (the metrics file's
   ``predicted_by_phase``), and the median step time.
2. ``halo``: the rows a 1D message layer moves, counted here from the graph alone (the distinct source
   vertices of other blocks among each block row's edges, plain numpy), against the bytes measured in
   ``spmm_forward`` of a GINE run (one all-to-all per layer of those rows): equal.
3. ``memory``: the peak working set per rank of two training steps (tests/helpers/plan_workers.memory_worker)
   against the memory model, with edge features (GINE, MeshGraphNet, GAT --edge-dim; 1d and 2d) and without
   (GIN, GAT), each row in a fresh interpreter.
4. ``speed``: GINE on one process against PyG's ``GINEConv`` stack holding the same weights (`gridgnn.to_pyg`),
   training steps alternating in one process: median step and ratio.

Usage (the committed run)::

    python benchmarks/edge_models.py --data-root ../shared/datasets --out results/edge_models

``--only-memory`` re-runs the memory section alone into ``--out``'s results.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

MODELS = {"gine": ["--model", "gine"], "gat-edge": ["--model", "gat", "--edge-dim", "{d}", "--heads", "2"],
          "meshgraphnet": ["--model", "meshgraphnet"]}
GRIDS = {"1d": ["--algo", "1d"], "1d sparse": ["--algo", "1d", "--comm", "sparse"],
         "1.5d 2x2": ["--algo", "1.5d", "--replication", "2"], "2d 2x2": ["--algo", "2d", "--grid", "2x2"],
         "2d 2x2 sparse": ["--algo", "2d", "--grid", "2x2", "--comm", "sparse"],
         "3d 2x2x1": ["--algo", "3d", "--grid", "2x2x1"], "3d 1x1x4": ["--algo", "3d", "--grid", "1x1x4"]}
SEPARABLE = ("gine", "gat-edge")
"""The models whose messages run on 2D and 3D (separable over feature columns)."""


def _train(dataset: list[str], model: list[str], grid: list[str], epochs: int, metrics: Path) -> dict:
    command = [sys.executable, "-m", "gridgnn", "train", *dataset, *model, *grid, "--nprocs", "4", "--epochs",
               str(epochs), "--hidden", "16", "--threads", "1", "--quiet", "--reorder", "none",
               "--metrics-out", str(metrics)]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env={**os.environ, "OMP_NUM_THREADS": "1"})
    return json.loads(metrics.read_text()) | {"command": " ".join(["gridgnn", *command[3:]])}


def grids(datasets: dict[str, tuple[list[str], int, tuple[str, ...]]], epochs: int, folder: Path) -> list[dict]:
    rows = []
    for name, (dataset, d, models) in datasets.items():
        for model in models:
            flags = MODELS[model]
            for grid, grid_flags in GRIDS.items():
                if grid.startswith(("2d", "3d")) and model not in SEPARABLE:
                    continue
                document = _train(dataset, [f.format(d=d) for f in flags], grid_flags, epochs, folder / "m.json")
                comm = [epoch["comm"] for epoch in document["epochs"]]
                exact = all(c["by_phase"] == c["predicted_by_phase"] for c in comm)
                steps = [epoch["time_s"] for epoch in document["epochs"][1:]]
                rows.append({"dataset": name, "model": model, "grid": grid, "bytes_per_rank": max(comm[-1]["bytes"]),
                             "measured_equals_model": exact, "median_step_ms": 1e3 * statistics.median(steps),
                             "halo_forward_bytes": comm[-1]["by_phase"]["spmm_forward"],
                             "command": document["command"]})
                print(json.dumps({k: rows[-1][k] for k in ("dataset", "model", "grid", "bytes_per_rank",
                                                           "measured_equals_model", "median_step_ms")}), flush=True)
    return rows


def halo_rows(graph, parts: int) -> list[int]:
    """Per block row of ``parts`` balanced blocks: the distinct source vertices of other blocks among its
    edges (the rows a 1D message layer receives), from the adjacency alone."""
    from gridgnn.partition import block_bounds

    adj = graph.adj.tocsr()
    bounds = block_bounds(adj.shape[0], parts)  # the balanced row blocks of --reorder none
    out = []
    for k in range(parts):
        cols = np.unique(adj.indices[adj.indptr[bounds[k]]:adj.indptr[bounds[k + 1]]])
        out.append(int(((cols < bounds[k]) | (cols >= bounds[k + 1])).sum()))
    return out


def halo(grid_rows: list[dict], graphs: dict, widths: dict) -> list[dict]:
    """GINE's measured ``spmm_forward`` bytes on 1d against the halo rows counted from the graph: a GINE layer
    gathers its input rows (width = the layer's input width: the features, then the hidden width)."""
    out = []
    for row in grid_rows:
        if row["model"] != "gine" or row["grid"] != "1d":
            continue
        rows = halo_rows(graphs[row["dataset"]], 4)
        expected = [r * 4 * sum(widths[row["dataset"]]) for r in rows]
        out.append({"dataset": row["dataset"], "halo_rows": rows, "expected_bytes": expected,
                    "measured_bytes": row["halo_forward_bytes"], "equal": expected == row["halo_forward_bytes"]})
    return out


MEMORY_CASES = {
    "gine": {"model": "gine"},
    "gine, 4 layers of 32": {"model": "gine", "layers": 4, "hidden": 32},
    "meshgraphnet": {"model": "meshgraphnet"},
    "gat --edge-dim 3": {"model": "gat", "edge_dim": 3, "heads": 2},
    "gin (no edge features)": {"model": "gin"},
    "gat (no edge features)": {"model": "gat", "heads": 2},
    "gine, 2d 2x2": {"model": "gine", "algo": "2d", "nprocs": 4},
    "gat --edge-dim 3, 2d 2x2": {"model": "gat", "edge_dim": 3, "heads": 2, "algo": "2d", "nprocs": 4},
}
"""The memory section's rows: 1d P = 2 and 3 layers of 64 unless the options say otherwise."""


def memory(dataset: str) -> list[dict]:
    """Each `MEMORY_CASES` row measured in a fresh interpreter (`memory_case`), as a run's workers start: forked
    from a process that had already run other configurations, the same GIN run measured 1.64x its model instead
    of 1.04x (glibc raises its mmap threshold when a large block is freed, and the children inherit it, so their
    large temporaries stay on the heap and add up)."""
    rows = []
    for label in MEMORY_CASES:
        out = subprocess.run([sys.executable, __file__, "--memory-case", label, "--memory-dataset", dataset],
                             capture_output=True, text=True, check=True).stdout
        rows.append(json.loads(out.strip().splitlines()[-1]))
        print(json.dumps(rows[-1]), flush=True)
    return rows


def memory_case(label: str, dataset: str) -> dict:
    """One memory row (`MEMORY_CASES`): the peak working set of two training steps per rank
    (tests/helpers/plan_workers.memory_worker) against the memory model."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "helpers"))
    import plan_workers as pw

    from gridgnn.config import TrainConfig
    from gridgnn.cost.epoch_model import predict_epoch
    from gridgnn.launch.spawn import run_workers
    from gridgnn.nn.trace import model_spec
    from gridgnn.train.run.resolve import grid_shape_for
    from gridgnn.train.run.training import load_graph

    kwargs = {"dataset": dataset, "epochs": 2, "algo": "1d", "nprocs": 2, "hidden": 64, "layers": 3,
              **MEMORY_CASES[label]}
    config = TrainConfig(**kwargs)
    graph = load_graph(config)
    prediction = predict_epoch(model_spec(config, graph), graph, grid_shape_for(config, config.nprocs))
    measured = run_workers(pw.memory_worker, config.nprocs, kwargs, graph, timeout_s=900)
    return {"model": label, "dataset": dataset, "measured_bytes": [o["peak"] for o in measured],
            "model_bytes": [int(b) for b in prediction.memory_bytes],
            "ratio": [round(o["peak"] / int(b), 3) for o, b in zip(measured, prediction.memory_bytes, strict=True)],
            "messages_bytes": [int(b) for b in prediction.memory.get("messages", [0] * config.nprocs)]}


def speed(dataset: str, steps: int) -> dict:
    import torch

    import gridgnn
    from gridgnn.data.interop import graph_to_pyg
    from gridgnn.train.run.training import build_aggregation

    torch.set_num_threads(1)
    graph = gridgnn.as_graph(dataset)
    config = gridgnn.TrainConfig(dataset=dataset, model="gine", hidden=64, dropout=0.0, algo="local")
    from gridgnn.nn.models import build_model

    ours = build_model(config, graph.num_features, graph.num_classes, graph.task, graph.num_edge_features)
    layout = build_aggregation(config, graph)
    pyg = gridgnn.to_pyg(ours).train()
    data = graph_to_pyg(graph)
    x = torch.from_numpy(graph.dense_features())
    y = torch.from_numpy(np.nan_to_num(graph.labels))
    optimizers = (torch.optim.Adam(ours.parameters(), lr=0.01), torch.optim.Adam(pyg.parameters(), lr=0.01))
    ours.train()
    times: dict[str, list[float]] = {"gridgnn": [], "pyg": []}
    for step in range(steps + 1):
        for name in ("gridgnn", "pyg"):
            optimizer = optimizers[0 if name == "gridgnn" else 1]
            start = time.perf_counter()
            optimizer.zero_grad()
            out = ours(x, layout) if name == "gridgnn" else pyg(x, data.edge_index, data.edge_attr)
            ((out - y) ** 2).mean().backward()
            optimizer.step()
            if step:  # the first step warms both up
                times[name].append(time.perf_counter() - start)
    ours_ms, pyg_ms = (1e3 * statistics.median(times[k]) for k in ("gridgnn", "pyg"))
    return {"dataset": dataset, "edges": graph.num_edges, "gridgnn_ms": ours_ms, "pyg_ms": pyg_ms,
            "ratio": ours_ms / pyg_ms, "steps": steps}


def markdown(result: dict, argv: list[str]) -> str:
    lines = ["# Edge-feature models: bytes, time, memory, speed", "",
             "Command: `python benchmarks/edge_models.py " + " ".join(argv) + "`", "",
             "## Grids (P = 4, hidden 16, 2 layers)", "",
             "| dataset | model | grid | bytes per rank | measured = model | median step |",
             "|---|---|---|---|---|---|"]
    for row in result["grids"]:
        lines.append(f"| {row['dataset']} | {row['model']} | {row['grid']} | {row['bytes_per_rank']:,} | "
                     f"{'yes' if row['measured_equals_model'] else 'NO'} | {row['median_step_ms']:.1f} ms |")
    lines += ["", "## Halo rows (GINE, 1d P = 4): counted from the graph vs measured", "",
              "| dataset | halo rows per rank | expected bytes | measured bytes | equal |", "|---|---|---|---|---|"]
    for row in result["halo"]:
        lines.append(f"| {row['dataset']} | {row['halo_rows']} | {row['expected_bytes']} | {row['measured_bytes']} | "
                     f"{'yes' if row['equal'] else 'NO'} |")
    if "memory_command" in result:
        lines += ["", f"Memory section re-run alone: `python benchmarks/edge_models.py {result['memory_command']}`"]
    lines += ["", "## Memory per rank (1d P = 2, 3 layers of 64 unless said): measured peak working set / model",
              "", "Each row in a fresh interpreter (`memory` in the benchmark says why).", "",
              "| model | dataset | measured | model | ratio | of which messages (model) |", "|---|---|---|---|---|---|"]
    for row in result["memory"]:
        lines.append(f"| {row['model']} | {row['dataset']} | {row['measured_bytes']} | {row['model_bytes']} | "
                     f"{row['ratio']} | {row['messages_bytes']} |")
    s = result["speed"]
    lines += ["", "## One process: GINE against PyG's GINEConv (same weights, steps alternating)", "",
              f"{s['dataset']} ({s['edges']:,} stored edges), hidden 64: gridgnn {s['gridgnn_ms']:.1f} ms, PyG "
              f"{s['pyg_ms']:.1f} ms per training step (median of {s['steps']}): ratio {s['ratio']:.2f}."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-root", default="../shared/datasets")
    parser.add_argument("--mesh-nodes", type=int, default=20000)
    parser.add_argument("--memory-nodes", type=int, default=60000)
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--speed-steps", type=int, default=20)
    parser.add_argument("--no-amazon", action="store_true", help="skip Amazon Computers (no dataset folder)")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--only-memory", action="store_true",
                        help="re-run the memory section alone, into --out's existing results")
    parser.add_argument("--memory-case", help=argparse.SUPPRESS)  # one memory row, in a fresh interpreter
    parser.add_argument("--memory-dataset", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_case:
        print(json.dumps(memory_case(args.memory_case, args.memory_dataset)))
        return
    memory_dataset = f"mesh:nodes={args.memory_nodes}"
    if args.only_memory:
        if args.out is None:
            parser.error("--only-memory re-runs the memory section into --out's results: give --out")
        result = json.loads((args.out / "edge_models.json").read_text())
        result["memory"] = memory(memory_dataset)
        result["memory_command"] = " ".join(sys.argv[1:])
        report = markdown(result, result.get("command", []))
        print(report)
        (args.out / "edge_models.json").write_text(json.dumps(result, indent=1) + "\n")
        (args.out / "edge_models.md").write_text(report)
        return
    import gridgnn
    from gridgnn.data.formats import read_path

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        mesh = f"mesh:nodes={args.mesh_nodes}"
        datasets = {"mesh": (["--dataset", mesh], 3, tuple(MODELS))}
        graphs = {"mesh": gridgnn.as_graph(mesh)}
        widths = {"mesh": [graphs["mesh"].num_features, 16]}
        if not args.no_amazon:
            root = Path(args.data_root) / "amazon-computers"
            raw = read_path(root)  # the source's stored edges: the rows --edge-features reads, in CSR order
            np.save(folder / "edges8.npy", np.random.default_rng(0).standard_normal((raw.num_edges, 8)).astype(
                np.float32))
            flags = ["--dataset", "amazon-computers", "--data-root", args.data_root, "--edge-features",
                     str(folder / "edges8.npy")]
            # MeshGraphNet's edge MLP on 767-wide rows would hold E x 1542 floats: GINE and GAT only
            datasets["amazon-computers (8 generated edge features)"] = (flags, 8, ("gine", "gat-edge"))
            amazon = gridgnn.load_dataset("amazon-computers", data_root=args.data_root)
            graphs["amazon-computers (8 generated edge features)"] = amazon
            widths["amazon-computers (8 generated edge features)"] = [amazon.num_features, 16]
        result = {"grids": grids(datasets, args.epochs, folder)}
        result["halo"] = halo(result["grids"], graphs, widths)
    result["memory"] = memory(memory_dataset)
    result["command"] = sys.argv[1:]
    result["speed"] = speed(f"mesh:nodes={args.mesh_nodes}", args.speed_steps)
    report = markdown(result, sys.argv[1:])
    print(report)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "edge_models.json").write_text(json.dumps(result, indent=1) + "\n")
        (args.out / "edge_models.md").write_text(report)


if __name__ == "__main__":
    main()
