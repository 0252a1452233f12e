"""The hostile corpus of issue 40 ("hard to break, round three"), classes 5-7, run by `test_hostile_round3.py`.

Class 5, valid work refused: ``RESUME_CASES`` (id, first run, resumed run): a checkpoint must resume across
process counts, grids and vertex orders. Class 6, untrusted sizes: ``MODEL_FILE_CASES`` (id, builder, key
word): a builder takes a valid model file's document and the case's folder and writes a bad model file;
``ARCHIVE_CASES`` (id, builder, key word): datasets whose zip members inflate like a bomb. Class 7, tracebacks
and wrong lines: ``FLAG_CASES`` (id, command line with ``{tmp}`` and ``{model}``, key word), ``ENV_CASES``
(id, torchrun variables, key word) and ``API_CASES`` (id, call, key word).
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from data_error_helpers import benchmark_arrays

from gridgnn.data import save_graph
from gridgnn.data.generators import csbm

SMALL = "csbm:nodes=120,classes=3,features=12"

# --- class 5: (id, first run, resumed run); both TrainConfig keywords on `world` processes -------------------

RESUME_CASES = [
    ("metis-p2-to-p4", ({"reorder": "metis", "algo": "1d"}, 2), ({"reorder": "metis", "algo": "1d"}, 4)),
    ("metis-to-none", ({"reorder": "metis", "algo": "1d"}, 2), ({"reorder": "none", "algo": "1d"}, 2)),
    ("none-to-metis-nnz", ({"reorder": "none", "algo": "1d"}, 2), ({"reorder": "metis-nnz", "algo": "1d"}, 2)),
    ("rcm-1d-to-random-2d", ({"reorder": "rcm", "algo": "1d"}, 2), ({"reorder": "random", "algo": "2d"}, 4)),
]

# --- class 6: model files ---------------------------------------------------------------------------------


def _config(**changes: object) -> Callable[[dict, Path], Path]:
    """The valid document with its ``config`` fields changed."""
    def build(document: dict, tmp: Path) -> Path:
        torch.save({**document, "config": {**document["config"], **changes}}, tmp / "bad.pt")
        return tmp / "bad.pt"

    return build


def _kind(kind: str, **changes: object) -> Callable[[dict, Path], Path]:
    """The valid document claiming another model ``kind`` with that kind's fields (``changes``)."""
    def build(document: dict, tmp: Path) -> Path:
        config = {**document["config"], "normalize": False, "eps": 0.0, "train_eps": False, "heads": 1,
                  "output_heads": 1, "attn_dropout": 0.0, **changes}
        torch.save({**document, "model": kind, "config": config}, tmp / "bad.pt")
        return tmp / "bad.pt"

    return build


def _deflated(document: dict, tmp: Path) -> Path:
    """A model file whose one extra tensor (20 MiB of zeros) is stored deflated: it inflates about 1,000x."""
    torch.save({**document, "state": {**document["state"], "pad": torch.zeros(5 << 20)}}, tmp / "plain.pt")
    with zipfile.ZipFile(tmp / "plain.pt") as source, zipfile.ZipFile(tmp / "bomb.pt", "w", zipfile.ZIP_DEFLATED) \
            as target:
        for name in source.namelist():
            target.writestr(name, source.read(name))
    (tmp / "plain.pt").unlink()
    return tmp / "bomb.pt"


MODEL_FILE_CASES = [
    ("model-negative-hidden", _config(hidden_channels=-3), "hidden_channels must be an integer"),
    ("model-zero-in-channels", _config(in_channels=0), "in_channels must be an integer"),
    ("model-boolean-width", _config(out_channels=True), "out_channels must be an integer"),
    ("model-fractional-width", _config(hidden_channels=2.5), "hidden_channels must be an integer"),
    ("model-string-layers", _config(num_layers="2"), "num_layers must be an integer"),
    ("model-layers-beyond-limit", _config(num_layers=100000), "num_layers must be an integer in [1, 1024]"),
    ("model-nan-dropout", _config(dropout=float("nan")), "dropout must be a number in [0, 1)"),
    ("model-negative-seed", _config(seed=-1), "seed must be an integer"),
    ("model-bias-not-a-flag", _config(bias="yes"), "bias must be true or false"),
    # widths the 12 -> 16 -> 3 weights of the file cannot fill: refused before 60 MB of matrices is allocated
    ("model-hidden-beyond-the-state", _config(hidden_channels=1_000_000), "need at least 15000000 weights"),
    ("model-gat-heads-beyond-limit", _kind("gat", heads=10**6), "heads must be an integer in [1, 1024]"),
    # 1024 heads of 16 channels: layers 12 -> 16384 -> 3 need 245,760 weights, the file's state 259
    ("model-gat-heads-beyond-the-state", _kind("gat", heads=1024), "its layers 12 -> 16384 -> 3 need at least"),
    ("model-gin-infinite-eps", _kind("gin", eps=float("inf")), "eps must be a finite number"),
    ("model-zip-bomb", _deflated, "would inflate"),
]

# --- class 6: datasets whose zip members inflate like a bomb -------------------------------------------------


def _native_bomb(tmp: Path) -> tuple[str, str]:
    """A native graph file with an extra 64 MiB member of zeros, deflated (about 1,000x)."""
    path = save_graph(csbm(nodes=20, classes=2, features=3), tmp / "graph.npz")
    with zipfile.ZipFile(path, "a", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("features_pad.npy", bytes(64 << 20))
    return str(path), "graph.npz"


def _benchmark_bomb(tmp: Path) -> tuple[str, str]:
    """A gnn-benchmark ``.npz`` whose labels member inflates 1,000x (savez_compressed of zeros)."""
    arrays = benchmark_arrays()
    np.savez_compressed(tmp / "g.npz", **arrays, attr_pad=np.zeros(8 << 20))
    return str(tmp / "g.npz"), "g.npz"


def _nested_bomb(tmp: Path) -> tuple[str, str]:
    """A ``.zip`` holding one ``.npz`` whose own member inflates 1,000x (stored as is in the outer zip)."""
    inner = io.BytesIO()
    np.savez_compressed(inner, **benchmark_arrays(), attr_pad=np.zeros(8 << 20))
    with zipfile.ZipFile(tmp / "g.zip", "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("graph.npz", inner.getvalue())
    return str(tmp / "g.zip"), "g.zip"


ARCHIVE_CASES = [
    ("native-npz-deflated-bomb", _native_bomb, "would inflate"),
    ("benchmark-npz-deflated-bomb", _benchmark_bomb, "would inflate"),
    ("zip-holding-a-bombed-npz", _nested_bomb, "would inflate"),
]

# --- class 7: flags (``{tmp}``: the case's folder; ``{model}``: a valid model file) --------------------------

_TRAIN = ["train", "--dataset", SMALL, "--epochs", "1", "--quiet"]
_PREDICT = ["predict", "--model", "{model}", "--dataset", SMALL, "--predictions-out", "{tmp}/p.npy"]
_PLAN = ["plan", "--num-nodes", "1000", "--num-edges", "5000", "--num-features", "8", "--num-classes", "2"]

FLAG_CASES = [
    *[(f"lr-1e38-{model}-{algo}", [*_TRAIN, "--lr", "1e38", "--model", model, "--algo", algo, "--nprocs", procs],
       "lr must be in (0, 3.40282e+37]")
      for model, algo, procs in (("gcn", "local", "1"), ("sage", "1d", "2"), ("gin", "2d", "4"), ("gat", "3d", "8"),
                                 ("gcn", "1.5d", "4"))],
    ("lr-just-beyond-adams-first-step", [*_TRAIN, "--lr", "3.5e37"], "lr must be in"),
    ("weight-decay-beyond-float32", [*_TRAIN, "--weight-decay", "1e39"], "weight_decay must be in"),
    ("train-memory-per-proc-1e400", [*_TRAIN, "--memory-per-proc", "1e400"], "memory size '1e400' is beyond"),
    ("train-memory-per-proc-half-a-byte", [*_TRAIN, "--memory-per-proc", "0.5"], "less than one byte"),
    ("train-memory-per-proc-1e19", [*_TRAIN, "--memory-per-proc", "1e19"], "is beyond 8.0 EiB"),
    ("plan-memory-per-proc-1e400", [*_PLAN, "--memory-per-proc", "1e400"], "memory size '1e400' is beyond"),
    ("plan-memory-per-proc-half-a-byte", [*_PLAN, "--memory-per-proc", "0.25B"], "less than one byte"),
    ("predict-memory-per-proc-1e400", [*_PREDICT, "--memory-per-proc", "1e400"], "memory size '1e400' is beyond"),
    ("predict-memory-per-proc-half-a-byte", [*_PREDICT, "--memory-per-proc", "0.5"], "less than one byte"),
]

# `gridgnn plan` runs that must succeed without any warning on stderr (numpy's included)
QUIET_PLAN_CASES = [
    ("plan-84-procs-no-edges", [*_PLAN[:2], "100", "--num-edges", "0", *_PLAN[5:], "--nprocs", "84"]),
    ("plan-84-procs-sparse", [*_PLAN[:2], "90", "--num-edges", "0", *_PLAN[5:], "--nprocs", "84", "--comm",
                              "sparse"]),
]

# --- class 7: hand-set torchrun environments (id, variables, key word) ---------------------------------------

_MASTER = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29511"}
ENV_CASES = [
    ("env-without-master-addr", {"WORLD_SIZE": "2", "RANK": "0"}, "but not MASTER_ADDR"),
    ("env-world-size-not-a-number", {"WORLD_SIZE": "two", "RANK": "0", **_MASTER}, "WORLD_SIZE='two'"),
    ("env-master-port-99999", {"WORLD_SIZE": "2", "RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "99999"},
     "MASTER_PORT='99999'"),
    ("env-rank-5-of-2", {"WORLD_SIZE": "2", "RANK": "5", **_MASTER}, "RANK='5'"),
    ("env-rank-without-world-size", {"RANK": "0", **_MASTER}, "sets RANK but not WORLD_SIZE"),
    ("env-negative-world-size", {"WORLD_SIZE": "-1", "RANK": "0", **_MASTER}, "WORLD_SIZE='-1'"),
    ("env-local-rank-beyond-local-world", {"WORLD_SIZE": "2", "RANK": "0", "LOCAL_WORLD_SIZE": "2",
                                           "LOCAL_RANK": "3", **_MASTER}, "LOCAL_RANK='3'"),
]

# --- class 7: the Python API's array helpers (id, call, key word of the DataError) --------------------------


def _graph_from_arrays(adjacency, **arrays) -> Callable[[], object]:
    def call():
        from gridgnn import graph_from_arrays

        return graph_from_arrays(adjacency() if callable(adjacency) else adjacency, **arrays)

    return call


def _sparse(matrix: list) -> Callable[[], object]:
    import scipy.sparse as sp

    return lambda: sp.csr_matrix(np.array(matrix, dtype=np.float64))


def _local_block(rows: int) -> Callable[[], object]:
    def call():
        from gridgnn import grid_aggregation, local_block
        from gridgnn.data.generators import csbm

        graph = csbm(nodes=40, classes=2, features=3)
        return local_block(np.zeros((rows, 3), np.float32), grid_aggregation(graph.adj))

    return call


API_CASES = [
    ("api-float-edge-ids", _graph_from_arrays(np.array([[0.5, 1.7], [1.2, 0.0]])), "0.5, not a whole vertex id"),
    ("api-nan-edge-ids", _graph_from_arrays(np.array([[0.0, np.nan], [1.0, 0.0]])), "nan, not a whole vertex id"),
    ("api-string-edge-ids", _graph_from_arrays(np.array([["a", "b"], ["b", "a"]])), "integer vertex ids"),
    ("api-empty-edge-list", _graph_from_arrays(np.zeros((2, 0), np.int64)), "the edge index is empty"),
    ("api-empty-python-list", _graph_from_arrays([]), "must have shape (2, E)"),
    ("api-non-square-sparse", _graph_from_arrays(_sparse([[0, 1, 0, 1], [1, 0, 1, 0], [0, 1, 0, 1]])),
     "must be a square (n, n) matrix"),
    ("api-nan-adjacency-value", _graph_from_arrays(_sparse([[0, np.nan], [1, 0]])), "NaN, infinite"),
    ("api-inf-adjacency-value", _graph_from_arrays(_sparse([[0, np.inf], [1, 0]])), "NaN, infinite"),
    ("api-local-block-short-array", _local_block(25), "got shape (25, 3)"),
    ("api-local-block-long-array", _local_block(41), "got shape (41, 3)"),
]
