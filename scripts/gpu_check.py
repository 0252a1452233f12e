"""What gridgnn does on a GPU, checked in a few minutes on one GPU and written as one JSON file.

Sections (each a key of the JSON document; a section that needs CUDA and finds none reads
``{"status": "skipped: no cuda"}``, one that needs two GPUs and finds one says so):

- ``environment``: Python, torch, torch_geometric and gridgnn versions, the devices.
- ``models_cuda_vs_cpu``: every model (gcn, sage, gin, gat) trained by the single-process layout (what
  ``--algo local`` runs) on ``cuda`` and on the CPU from the same seed; per-epoch losses within `LOSS_RTOL`
  (relative) and final accuracies within `ACC_ATOL` pass (float32 sums in another order, the same dropout
  masks: gridgnn's dropout is a pure function of the seed and the element, whatever the device).
- ``grid_gloo_cuda``: the multi-process code path with CUDA tensors and gloo, every algorithm (1d, 1.5d
  2x2, 2d 2x2, 3d 1x1x4; 3d 2x2x2 on 8 processes in the full run) on P = 4 processes sharing the one device,
  against the single-process run on that device, same tolerances; each rank's model must sit on ``cuda``.
  gloo moves CUDA tensors through the host: this checks device placement, not speed. Also 2d 2x2 with
  ``--comm-precision bf16`` and 1.5d 2x2 with ``int8`` (encoded rows as bytes), losses within `PRECISION_RTOL`.
- ``cli_train``: ``gridgnn train`` as a user types it (one process, no ``--algo``: the single-process layout)
  for every model, with ``--save-model`` and ``--predictions-out``, once as is (on the GPU where CUDA is
  present: the metrics file's ``device`` must say so) and once with ``CUDA_VISIBLE_DEVICES=`` (the CPU);
  losses and accuracies as in ``models_cuda_vs_cpu``, the model file loaded on the CPU must predict what the
  predictions file holds.
- ``nccl``: with two or more GPUs, the distributed SpMM tests on NCCL (one GPU per rank).
- ``pyg_timing``: single-process training-step time of GCN, SAGE and GAT against PyG's ``GCNConv``,
  ``SAGEConv`` and ``GATConv`` on the same GPU and graph, epochs alternating, medians and their ratio (one run).

``--device cpu`` runs the CUDA sections on the CPU instead (a dry run of this script, no GPU compared);
``--tiny`` shrinks every section to seconds (the test suite runs it). The document is rewritten after every
section, so a run cut short keeps what it finished. Imports only gridgnn, torch, pytest and torch_geometric
(the ``test`` extra). Usage: ``python scripts/gpu_check.py --out gpu_check.json [--tiny] [--device cpu]``;
``scripts/gpu_check.sh`` runs it with a time limit.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
import traceback
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from gridgnn import __version__
from gridgnn.config import TrainConfig
from gridgnn.data.operators import operator_matrix, pattern
from gridgnn.errors import ConfigError
from gridgnn.nn.layout import LocalLayout
from gridgnn.nn.models import operator_of
from gridgnn.spmm.local import LocalSpMM
from gridgnn.train.loop.trainer import Trainer, deterministic
from gridgnn.train.outputs.metrics import check_writable, write_json_atomic
from gridgnn.train.run.base import load_graph

REPO = Path(__file__).resolve().parent.parent
LOSS_RTOL = 1e-3
"""Largest relative difference of a per-epoch training loss between two devices or layouts."""
ACC_ATOL = 0.02
"""Largest difference of a final accuracy (a fraction) between two devices or layouts."""
MODELS = ("gcn", "sage", "gin", "gat")
GRIDS = (("1d", 4, None, 1), ("1.5d", 4, None, 2), ("2d", 4, "2x2", 1), ("3d", 4, "1x1x4", 1))
FULL_EXTRA_GRIDS = (("3d", 8, "2x2x2", 1),)
PRECISION_GRIDS = (("2d", 4, "2x2", 1, "bf16"), ("1.5d", 4, None, 2, "int8"))
"""Grid runs with ``--comm-precision`` (encoded rows moved as bytes on CUDA tensors), held to `PRECISION_RTOL`."""
PRECISION_RTOL = 3e-2
TIMED_MODELS = ("gcn", "sage", "gat")
GRID_TIMEOUT_S = 90
"""The longest one grid run may take (a hang in gloo on CUDA tensors is a finding, not the end of the check)."""
SKIPPED = {"status": "skipped: no cuda"}


def sizes(tiny: bool) -> dict:
    """The dataset and epochs of each section."""
    if tiny:
        return {"dataset": "csbm:nodes=300", "epochs": 3, "timing_dataset": "csbm:nodes=300", "timing_epochs": 4}
    return {"dataset": "csbm:nodes=3000", "epochs": 20, "timing_dataset": "csbm:nodes=100000,features=128",
            "timing_epochs": 30}


def one_line(error: BaseException, limit: int = 1200) -> str:
    """``error`` on one line; past ``limit`` characters its start and its end (a worker's error carries the
    worker's traceback, whose last line names what failed)."""
    lines = [line for line in traceback.format_exception_only(type(error), error)[-1].splitlines() if line]
    text = " ".join(" ".join(lines).split())
    return text if len(text) <= limit else f"{text[:200]} ... {text[-(limit - 205):]}"


def environment() -> dict:
    found = {"python": platform.python_version(), "torch": torch.__version__, "gridgnn": __version__,
             "cuda_available": torch.cuda.is_available(),
             "gpus": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
             if torch.cuda.is_available() else []}
    try:
        found["torch_geometric"] = importlib.metadata.version("torch_geometric")
    except importlib.metadata.PackageNotFoundError:
        found["torch_geometric"] = None
    return found


def local_trainer(config: TrainConfig, graph, device: str) -> Trainer:
    """The single-process layout of ``config.model`` (what ``--algo local`` builds) with its operator on
    ``device``."""
    operator = operator_of(config.model)
    return Trainer(config, graph, LocalLayout(LocalSpMM(operator_matrix(operator, graph.adj), device=device),
                                              operator))


def train_local(config: TrainConfig, graph, device: str) -> dict:
    """Per-epoch losses and the final accuracies of a single-process run on ``device``."""
    trainer = local_trainer(config, graph, device)
    with deterministic(config.seed):
        result = trainer.fit()
    last = result.epochs[-1]
    return {"device": str(next(trainer.model.parameters()).device), "loss": [r.loss for r in result.epochs],
            "accuracy": {"train": last.train_acc, "val": last.val_acc, "test": last.test_acc}}


def agreement(reference: dict, other: dict, loss_rtol: float = LOSS_RTOL, acc_atol: float = ACC_ATOL) -> dict:
    """How far ``other``'s losses and accuracies lie from ``reference``'s, and whether within tolerance."""
    loss = max(abs(a - b) / max(abs(a), 1e-12) for a, b in zip(reference["loss"], other["loss"], strict=True))
    acc = max(abs(reference["accuracy"][k] - other["accuracy"][k]) for k in reference["accuracy"])
    finite = all(math.isfinite(v) for v in other["loss"])
    return {"max_loss_rel_diff": loss, "max_acc_diff": acc, "pass": finite and loss <= loss_rtol and acc <= acc_atol}


def models_section(device: str, size: dict, models: tuple[str, ...] = MODELS) -> dict:
    """Every model on ``device`` against the CPU."""
    found = {}
    for model in models:
        config = TrainConfig(dataset=size["dataset"], epochs=size["epochs"], model=model)
        try:
            graph = load_graph(config)
            cpu, other = train_local(config, graph, "cpu"), train_local(config, graph, device)
            found[model] = {"cpu": cpu, "device": other, **agreement(cpu, other)}
        except Exception as error:  # noqa: BLE001 - one model's failure is a finding, not the end of the check
            found[model] = {"error": one_line(error), "pass": False}
    return found


def cli_run(model: str, size: dict, folder: Path, hide_cuda: bool) -> dict:
    """``gridgnn train`` of ``model`` in a subprocess writing its metrics, model file and predictions into
    ``folder``; ``hide_cuda``: with ``CUDA_VISIBLE_DEVICES=`` (the CPU). Its device, losses, accuracies."""
    side = "cpu" if hide_cuda else "as-is"
    paths = {name: folder / f"{model}-{side}.{suffix}" for name, suffix in
             (("metrics", "json"), ("model", "pt"), ("predictions", "csv"))}
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    if hide_cuda:
        env["CUDA_VISIBLE_DEVICES"] = ""
    command = [sys.executable, "-m", "gridgnn", "train", "--dataset", size["dataset"], "--model", model,
               "--epochs", str(size["epochs"]), "--quiet", "--metrics-out", str(paths["metrics"]),
               "--save-model", str(paths["model"]), "--predictions-out", str(paths["predictions"])]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=GRID_TIMEOUT_S)
    if done.returncode != 0:
        raise RuntimeError(f"exit {done.returncode}: {(done.stderr.strip().splitlines() or [''])[-1][:300]}")
    metrics = json.loads(paths["metrics"].read_text())
    last = metrics["epochs"][-1]
    return {"device": metrics.get("device"), "loss": [e["loss"] for e in metrics["epochs"]],
            "accuracy": {"train": last["train_acc"], "val": last["val_acc"], "test": last["test_acc"]},
            **{f"{name}_file": str(path) for name, path in paths.items()}}


def file_predictions_agree(kind: str, run: dict, size: dict) -> bool:
    """Whether the model file of ``run`` (a ``kind`` model), loaded on the CPU, predicts every vertex's class
    as the run's predictions file says (the file trained on the GPU, read back where no GPU is)."""
    from gridgnn.nn.export import load_model
    from gridgnn.train.outputs.per_vertex import infer
    from gridgnn.train.run.inference import local_inputs

    model, _ = load_model(run["model_file"])
    features, layout = local_inputs(load_graph(TrainConfig(dataset=size["dataset"])), operator_of(kind))
    with torch.no_grad():
        predicted = infer(model, features, layout)[0].argmax(dim=1).numpy()
    written = np.loadtxt(run["predictions_file"], delimiter=",", skiprows=1, usecols=1, dtype=np.int64)
    return bool(np.array_equal(predicted, written))


def cli_section(device: str, size: dict, models: tuple[str, ...] = MODELS) -> dict:
    """Every model through ``gridgnn train``, as is (expected on ``device``) and on the CPU."""
    import tempfile

    found = {}
    with tempfile.TemporaryDirectory(prefix="gpu-check-cli-") as folder:
        for model in models:
            try:
                cpu, other = (cli_run(model, size, Path(folder), hide) for hide in (True, False))
                where = {"cpu_run": cpu["device"], "run": other["device"], "expected": device}
                agree = agreement(cpu, other)
                loads = file_predictions_agree(model, other, size)
                found[model] = {"devices": where, "loss": other["loss"], **agree, "model_file_predicts": loads,
                                "pass": agree["pass"] and loads and cpu["device"] == "cpu"
                                and other["device"] == device}
            except Exception as error:  # noqa: BLE001 - one model's failure is a finding, not the end
                found[model] = {"error": one_line(error), "pass": False}
    return found


def grid_worker(rank: int, world: int, config_fields: dict) -> dict:
    """One rank of a grid run (a spawned or forked worker): train, and report rank 0's record and where each
    rank's model lies."""
    import torch.distributed as dist

    from gridgnn.train.run.grid_train import train_on_grid
    from gridgnn.train.run.resolve import resolve_run

    config = TrainConfig(**config_fields)
    config, shape, graph = resolve_run(config, load_graph(config), world)  # a run is resolved once, first
    trained, model = train_on_grid(config, graph, return_model=True, shape=shape)
    devices = [None] * world
    dist.all_gather_object(devices, str(next(model.parameters()).device))
    epochs = trained.result.epochs
    last = epochs[-1]
    return {"loss": [r.loss for r in epochs], "devices": devices, "grid": trained.shape.label(),
            "accuracy": {"train": last.train_acc, "val": last.val_acc, "test": last.test_acc}}


def grid_section(device: str, size: dict, tiny: bool, algos: list[str] | None, deadline: float = math.inf) -> dict:
    """Every algorithm on P processes with gloo, tensors on ``device`` (CUDA: all ranks share GPU 0); an
    algorithm not started by ``deadline`` (`time.monotonic`) is reported as skipped."""
    from gridgnn.launch.spawn import run_workers

    config = TrainConfig(dataset=size["dataset"], epochs=size["epochs"])
    reference = train_local(config, load_graph(config), device)
    found = {"reference": {"device": reference["device"], "loss": reference["loss"]}}
    grids = [(*grid, "fp32") for grid in GRIDS + (() if tiny else FULL_EXTRA_GRIDS)] + list(PRECISION_GRIDS)
    for algo, world, shape, replication, precision in grids:
        if algos is not None and algo not in algos:
            continue
        name = f"{algo} {shape or world}" + ("" if precision == "fp32" else f" --comm-precision {precision}")
        if time.monotonic() > deadline:
            found[name] = {"status": "skipped: out of time"}
            continue
        fields = {**config.to_dict(), "algo": algo, "nprocs": world, "grid": shape, "replication": replication,
                  "comm_precision": precision}
        try:
            ranks = run_workers(grid_worker, world, fields, timeout_s=GRID_TIMEOUT_S, backend="gloo",
                                start_method="spawn" if device == "cuda" else None)
            result = ranks[0]
            placed = all(d.split(":")[0] == device for d in result["devices"])
            tolerance = {} if precision == "fp32" else {"loss_rtol": PRECISION_RTOL, "acc_atol": 0.05}
            found[name] = {**result, **agreement(reference, result, **tolerance), "on_device": placed}
            found[name]["pass"] = found[name]["pass"] and placed
        except Exception as error:  # noqa: BLE001
            found[name] = {"error": one_line(error), "pass": False}
    return found


def nccl_section() -> dict:
    """The distributed SpMM tests on NCCL, one GPU per rank (world sizes above the GPU count skip)."""
    if not torch.cuda.is_available():
        return dict(SKIPPED)
    count = torch.cuda.device_count()
    if count < 2:
        return {"status": f"skipped: {count} GPU{'s' * (count != 1)} (NCCL needs one GPU per rank, two at least)"}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "tests/spmm/test_spmm_distributed.py"], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "GRIDGNN_TEST_DEVICE": "cuda"}, timeout=120)
    tail = done.stdout.strip().splitlines()[-1:] or [""]
    return {"gpus": count, "returncode": done.returncode, "summary": tail[0], "pass": done.returncode == 0}


class PygModel(torch.nn.Module):
    """Two PyG layers as gridgnn's models run them: dropout, conv, ReLU (ELU for GAT), dropout, conv,
    log-softmax."""

    def __init__(self, kind: str, f_in: int, hidden: int, classes: int, dropout: float):
        super().__init__()
        from torch_geometric.nn import GATConv, GCNConv, SAGEConv

        make = {"gcn": lambda a, b: GCNConv(a, b, normalize=False),
                "sage": lambda a, b: SAGEConv(a, b, aggr="mean"), "gat": lambda a, b: GATConv(a, b, heads=1)}[kind]
        self.conv1, self.conv2, self.dropout, self.kind = make(f_in, hidden), make(hidden, classes), dropout, kind

    def forward(self, x, edges):
        x = F.dropout(x, self.dropout, training=self.training)
        x = self.conv1(x, edges)
        x = F.elu(x) if self.kind == "gat" else F.relu(x)
        x = F.dropout(x, self.dropout, training=self.training)
        return F.log_softmax(self.conv2(x, edges), dim=1)


def pyg_inputs(kind: str, graph, device: str):
    """PyG's input on ``device``: Â (GCN, normalized as gridgnn's) or the 0/1 pattern (SAGE) as a CSR
    ``adj_t`` (rows = targets), or an ``edge_index`` (GAT, which adds its self-loops itself)."""
    if kind == "gat":
        coo = pattern(graph.adj).tocoo()
        return torch.from_numpy(np.vstack([coo.col, coo.row]).astype(np.int64)).to(device)
    matrix = operator_matrix("gcn", graph.adj) if kind == "gcn" else pattern(graph.adj)
    matrix = matrix.tocsr().astype(np.float32)
    return torch.sparse_csr_tensor(torch.from_numpy(matrix.indptr.astype(np.int64)),
                                   torch.from_numpy(matrix.indices.astype(np.int64)),
                                   torch.from_numpy(matrix.data), matrix.shape, check_invariants=False).to(device)


class PygSide:
    """PyG's model, Adam, features, edges, labels and training mask on ``device``, seeded as gridgnn's."""

    def __init__(self, kind: str, graph, config: TrainConfig, device: str):
        torch.manual_seed(config.seed)
        self.model = PygModel(kind, graph.num_features, config.hidden, graph.num_classes, config.dropout).to(device)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
        features = graph.features.toarray() if hasattr(graph.features, "toarray") else graph.features
        self.x = torch.from_numpy(np.ascontiguousarray(features, dtype=np.float32)).to(device)
        self.edges, self.labels = pyg_inputs(kind, graph, device), torch.from_numpy(graph.labels).long().to(device)
        self.mask = torch.from_numpy(graph.train_mask).to(device)

    def step(self) -> None:
        """One training step: zero_grad, forward, masked NLL, backward, Adam."""
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        F.nll_loss(self.model(self.x, self.edges)[self.mask], self.labels[self.mask]).backward()
        self.optimizer.step()


def timing_section(device: str, size: dict, models: tuple[str, ...] = TIMED_MODELS) -> dict:
    """gridgnn's and PyG's training step, alternating epochs on one device; medians and ratio."""
    try:
        import torch_geometric  # noqa: F401
    except ImportError:
        return {"status": "skipped: torch_geometric not installed (pip install -e '.[test]')"}
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    found = {}
    graph = load_graph(TrainConfig(dataset=size["timing_dataset"]))  # once: every model reads the same graph
    for kind in models:
        config = TrainConfig(dataset=size["timing_dataset"], epochs=size["timing_epochs"], model=kind)
        try:
            ours, theirs = local_trainer(config, graph, device), PygSide(kind, graph, config, device)
            times: dict[str, list[float]] = {"gridgnn": [], "pyg": []}
            for epoch in range(1, config.epochs + 1):
                for side in (("gridgnn", "pyg") if epoch % 2 else ("pyg", "gridgnn")):
                    sync()
                    tick = time.perf_counter()
                    if side == "gridgnn":
                        ours.train_step(epoch)
                    else:
                        theirs.step()
                    sync()
                    times[side].append(time.perf_counter() - tick)
            medians = {side: statistics.median(values[1:] or values) for side, values in times.items()}
            found[kind] = {"dataset": config.dataset, "epochs": config.epochs,
                           "gridgnn_median_step_s": medians["gridgnn"], "pyg_median_step_s": medians["pyg"],
                           "ratio_gridgnn_over_pyg": medians["gridgnn"] / medians["pyg"]}
        except Exception as error:  # noqa: BLE001
            found[kind] = {"error": one_line(error)}
    found["note"] = "median training-step time (first epoch left out), one run, epochs alternating"
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="gpu_check.json", help="the JSON file (default: %(default)s)")
    parser.add_argument("--tiny", action="store_true", help="seconds per section (the test suite's dry run)")
    parser.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto",
                        help="where the CUDA sections run: auto = cuda when present, else they are skipped; cpu = "
                             "a dry run of the script on the CPU")
    parser.add_argument("--sections", default="models,grid,cli,nccl,timing",
                        help="comma-separated sections to run (default: %(default)s)")
    parser.add_argument("--algos", default=None, help="comma-separated algorithms of the grid section (default: all)")
    parser.add_argument("--budget-s", type=float, default=260.0,
                        help="sections (and grid runs) not started within this many seconds are skipped, so the "
                             "document is complete before gpu_check.sh's limit" + " (default: %(default)s)")
    parser.add_argument("--models", default=None,
                        help="comma-separated models of the models and timing sections (default: all of each)")
    args = parser.parse_args(argv)
    cuda = torch.cuda.is_available()
    device = ("cuda" if cuda else None) if args.device == "auto" else args.device
    if device == "cuda" and not cuda:
        parser.error("--device cuda: no CUDA device")
    try:
        check_writable(args.out, "check file")
    except ConfigError as error:
        parser.error(str(error))
    size, wanted = sizes(args.tiny), set(args.sections.split(","))
    models = tuple(args.models.split(",")) if args.models else None
    started = time.monotonic()
    document = {"format": "gridgnn-gpu-check", "version": 1, "device": device or "none", "tiny": args.tiny,
                "sizes": size, "tolerance": {"loss_rtol": LOSS_RTOL, "acc_atol": ACC_ATOL},
                "environment": environment()}
    sections = {"models_cuda_vs_cpu": ("models", lambda: models_section(device, size, models or MODELS)),
                "grid_gloo_cuda": ("grid", lambda: grid_section(device, size, args.tiny,
                                                                args.algos.split(",") if args.algos else None,
                                                                deadline=started + args.budget_s)),
                "cli_train": ("cli", lambda: cli_section(device, size, models or MODELS)),
                "nccl": ("nccl", nccl_section),
                "pyg_timing": ("timing", lambda: timing_section(
                    device, size, tuple(m for m in models if m in TIMED_MODELS) if models else TIMED_MODELS))}
    for key, (name, run) in sections.items():
        if name not in wanted:
            document[key] = {"status": "not asked for (--sections)"}
        elif device is None and name != "nccl":
            document[key] = dict(SKIPPED)
        elif time.monotonic() - started > args.budget_s:
            document[key] = {"status": f"skipped: out of time (--budget-s {args.budget_s:g})"}
        else:
            tick = time.monotonic()
            try:
                document[key] = run()
            except Exception as error:  # noqa: BLE001 - the document is written whatever a section does
                document[key] = {"error": one_line(error), "pass": False}
            document[key]["seconds"] = round(time.monotonic() - tick, 1)
            print(f"{key}: {_verdict(document[key])} in {document[key]['seconds']} s", flush=True)
        document.pop("seconds", None)
        document.pop("passed", None)
        document["seconds"] = round(time.monotonic() - started, 1)
        document["passed"] = _passed(document)
        write_json_atomic(args.out, document)
    print(f"gpu check: {'passed' if document['passed'] else 'FAILED'} ({document['device']}), "
          f"{document['seconds']} s, written to {args.out}", flush=True)
    return 0 if document["passed"] else 1


def _entries(section: dict) -> list[dict]:
    return [value for value in section.values() if isinstance(value, dict) and "pass" in value] + (
        [section] if "pass" in section else [])


def _verdict(section: dict) -> str:
    if "status" in section:
        return section["status"]
    entries = _entries(section)
    return f"{sum(e['pass'] for e in entries)}/{len(entries)} passed" if entries else "ran"


def _out_of_time(section: dict) -> bool:
    return any("out of time" in str(value.get("status", "")) for value in (section, *section.values())
               if isinstance(value, dict))


def _passed(document: dict) -> bool:
    """Every checked entry of every section passed and none ran out of time (sections skipped for want of
    CUDA or of a second GPU pass; timings are not judged)."""
    judged = [document[key] for key in ("models_cuda_vs_cpu", "grid_gloo_cuda", "cli_train", "nccl")
              if key in document]
    timed = [document["pyg_timing"]] if "pyg_timing" in document else []
    return all(entry["pass"] for section in judged for entry in _entries(section)) and \
        not any(_out_of_time(section) for section in judged + timed)


if __name__ == "__main__":
    sys.exit(main())
