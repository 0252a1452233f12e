"""Per-vertex outputs of a trained model: predictions and embeddings, written by every rank's rows.

Files (the format follows the suffix; `check_output_path` rejects any other before work starts):

=============  ================================================================================================
``.npy``       predictions: a structured array of n records ``node`` (int64, the original vertex id) and, by
               task (`prediction_dtype`): multiclass ``predicted`` (int64, the class of highest probability)
               and ``probabilities`` (float32, (C,)); multilabel ``predicted`` (int64 (T,), 0/1) and
               ``probabilities`` (float32 (T,)); regression ``predicted`` (float32 (T,), the values);
               embeddings: a float32 matrix (n, d), row i = vertex i of the graph (order of ``node``)
``.csv``       one header line, then one line per vertex in the same order: ``node,predicted,prob_0,...``
               (multiclass), ``node,predicted_0,...,prob_0,...`` (multilabel), ``node,predicted_0,...``
               (regression) or ``node,dim_0,...``; floats with 9 significant digits (float32 round-trips)
=============  ================================================================================================

CSV is there for people (a spreadsheet opens it) and needs no dependency; Parquet would need pyarrow, which
gridgnn does not depend on. ``.npy`` is for programs (``np.load(FILE, mmap_mode="r")``).

Distributed runs: no process holds more than its own rows. For ``.npy`` rank 0 creates the whole file once
(header written, space reserved) and every rank writes its rows in place with ``pwrite``; for ``.csv`` every
rank writes its rows to a part file named by the run and rank 0 appends the parts in row order, streaming. Of
the ranks that hold the same rows (replicas, the processes of a 2D/3D grid row) only the first writes.
Everything goes to a hidden ``.NAME.partial`` next to the target and is renamed into place at the end, so a
failed run leaves no file (`gridgnn.train.outputs.row_writer`: the steps, the claim that keeps two runs apart, and
what a full disk does). A target that exists must be a regular file (`gridgnn.safe_files`).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from torch import Tensor, nn

from gridgnn.errors import ConfigError
from gridgnn.nn.layout import as_layout
from gridgnn.safe_files import check_target
from gridgnn.train.outputs.metrics import check_writable
from gridgnn.train.outputs.row_writer import write_rows_file

SUFFIXES = (".npy", ".csv")


def check_output_path(path: str | os.PathLike, flag: str) -> None:
    """Raise `ConfigError` (one line) unless ``path`` ends in .npy or .csv, is a regular file or absent, and
    can be written. Not collective."""
    if Path(path).suffix.lower() not in SUFFIXES:
        raise ConfigError(f"{flag} '{path}': the file name must end in .npy (for programs) or .csv (for "
                          "spreadsheets)")
    check_target(path, f"{flag} file")  # never replace a device, FIFO, link or folder
    check_writable(str(path), f"{flag} file")


def default_embedding_layer(model: nn.Module) -> int:
    """The last hidden layer (numbered from 1), or the only layer of a one-layer model."""
    return max(len(model.layers) - 1, 1)


def check_embedding_layer(layer: int | None, num_layers: int) -> None:
    """Raise `ConfigError` unless ``layer`` is None or in [1, num_layers]."""
    if layer is not None and not 1 <= layer <= num_layers:
        raise ConfigError(f"--embedding-layer must be in [1, {num_layers}] for a {num_layers}-layer model, "
                          f"got {layer}")


@torch.no_grad()
def infer(model: nn.Module, features, agg, embedding_layer: int | None = None) -> tuple[Tensor, Tensor | None]:
    """Eval-mode forward pass: this rank's log-probabilities (m, C) over all classes, and with
    ``embedding_layer`` = k the output of layer k (m, width), after ReLU for hidden layers (what layer k+1
    reads), before log-softmax for the last, with all its columns. Collective on the grid of ``agg``.
    """
    model.eval()
    captured: dict[str, Tensor] = {}
    handle = None
    if embedding_layer is not None:
        layer = model.layers[embedding_layer - 1]
        handle = layer.register_forward_hook(lambda module, inputs, output: captured.setdefault("z", output))
    try:
        log_probs = model(features, agg)
    finally:
        if handle is not None:
            handle.remove()
    if embedding_layer is None:
        return log_probs, None
    z = captured["z"]
    if embedding_layer < len(model.layers):
        z = torch.relu(z)
    layout = as_layout(agg, model.operator, log_probs.shape[0])
    return log_probs, layout.full_rows(z, model.layers[embedding_layer - 1].out_channels)


def vertex_ids(graph, rows: tuple[int, int]) -> np.ndarray:
    """Original ids of the graph's vertices ``rows[0]..rows[1]-1``: the reader's ids when it renumbered them
    (``meta["vertex_ids"]``), the row number plus the file's id base otherwise."""
    r0, r1 = rows
    ids = getattr(graph, "meta", {}).get("vertex_ids")
    if ids is not None:
        return np.asarray(ids[r0:r1], dtype=np.int64)
    base = graph.meta.get("id_base") if hasattr(graph, "meta") else None
    return np.arange(r0, r1, dtype=np.int64) + (base if isinstance(base, int) else 0)


def prediction_records(output: Tensor, ids: np.ndarray, task: str = "multiclass") -> np.ndarray:
    """Structured (m,) prediction records of the model's ``output`` (m, C) for ``task`` (see
    `prediction_dtype`): from log-probabilities (multiclass), logits (multilabel) or values (regression)."""
    values = output.detach().float().cpu()
    out = np.empty(len(ids), dtype=prediction_dtype(values.shape[1], task))
    out["node"] = ids
    if task == "multiclass":
        probs = values.exp().numpy()
        out["predicted"], out["probabilities"] = probs.argmax(axis=1), probs
    elif task == "multilabel":
        # a label is predicted where its logit is positive: the rule micro-F1 scores (`task_metrics`), which
        # sigmoid > 0.5 breaks in float32 for logits within rounding of 0
        out["predicted"], out["probabilities"] = values.numpy() > 0, torch.sigmoid(values).numpy()
    else:
        out["predicted"] = values.numpy()
    return out


def prediction_dtype(width: int, task: str = "multiclass") -> np.dtype:
    """The record of one vertex: ``node`` (int64) and, multiclass: ``predicted`` (int64, the most probable
    class), ``probabilities`` (float32, (C,)); multilabel: ``predicted`` (int64 (T,), 1 where the probability
    exceeds 0.5), ``probabilities`` (float32 (T,), sigmoid of the logits); regression: ``predicted``
    (float32 (T,), the values)."""
    if task == "multiclass":
        return np.dtype([("node", "<i8"), ("predicted", "<i8"), ("probabilities", "<f4", (width,))])
    if task == "multilabel":
        return np.dtype([("node", "<i8"), ("predicted", "<i8", (width,)), ("probabilities", "<f4", (width,))])
    return np.dtype([("node", "<i8"), ("predicted", "<f4", (width,))])


def write_rows(path: str | os.PathLike, rows: tuple[int, int], num_rows: int, block: np.ndarray,
               ids: np.ndarray, positions: np.ndarray | None = None, what: str = "output file") -> None:
    """Write this rank's ``block`` (rows ``rows`` of an (n, ...) output) into ``path``, every rank its own
    rows (see the module docstring). ``block`` is structured prediction records or a float32 matrix.
    ``positions``: the rows of the .npy file the block's rows go to (a reordered graph's original positions;
    default ``rows``); CSV parts keep the grid's order, each line naming its original vertex. ``what`` names
    the file in errors. Raises `ConfigError` (one line, on every rank) when the file cannot be written.
    Collective on the world when a process group exists (every rank calls it, writer or not).
    """
    write_rows_file(Path(path), what, rows, num_rows, block, ids, positions, _first_holder)


def _distributed() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def _first_holder(rows: tuple[int, int]) -> bool:
    """True on the lowest rank holding the rows ``rows`` (collective on the world)."""
    if not _distributed():
        return True
    every: list = [None] * dist.get_world_size()
    dist.all_gather_object(every, tuple(rows))
    return every.index(tuple(rows)) == dist.get_rank()
