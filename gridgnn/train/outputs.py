"""Per-vertex outputs of a trained model: predictions and embeddings, written by every rank's rows.

Files (the format follows the suffix; `check_output_path` rejects any other before work starts):

=============  ================================================================================================
``.npy``       predictions: a structured array of n records ``node`` (int64, the original vertex id),
               ``predicted`` (int64, the class of highest probability) and ``probabilities`` (float32, (C,));
               embeddings: a float32 matrix (n, d), row i = vertex i of the graph (order of ``node``)
``.csv``       one header line, then one line per vertex in the same order: ``node,predicted,prob_0,...`` or
               ``node,dim_0,...``; floats with 9 significant digits (float32 round-trips exactly)
=============  ================================================================================================

CSV is there for people (a spreadsheet opens it) and needs no dependency; Parquet would need pyarrow, which
gridgnn does not depend on. ``.npy`` is for programs (``np.load(FILE, mmap_mode="r")``).

Distributed runs: no process holds more than its own rows. For ``.npy`` rank 0 creates the whole file once
(``numpy.lib.format.open_memmap``) and every rank writes its rows in place; for ``.csv`` every rank writes its
rows to a part file and rank 0 concatenates the parts in row order, streaming. Of the ranks that hold the
same rows (replicas, the processes of a 2D/3D grid row) only the first writes. Everything goes to a hidden
``.NAME.partial`` next to the target and is renamed into place at the end, so a failed run leaves no file.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from torch import Tensor, nn

from gridgnn.errors import ConfigError
from gridgnn.nn.layout import as_layout
from gridgnn.train.metrics import check_writable

SUFFIXES = (".npy", ".csv")


def check_output_path(path: str | os.PathLike, flag: str) -> None:
    """Raise `ConfigError` (one line) unless ``path`` ends in .npy or .csv and can be written. Not collective."""
    if Path(path).suffix.lower() not in SUFFIXES:
        raise ConfigError(f"{flag} '{path}': the file name must end in .npy (for programs) or .csv (for "
                          "spreadsheets)")
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


def prediction_records(log_probs: Tensor, ids: np.ndarray) -> np.ndarray:
    """Structured (m,) records node / predicted / probabilities from log-probabilities (m, C)."""
    probs = log_probs.detach().exp().float().cpu().numpy()
    out = np.empty(len(ids), dtype=prediction_dtype(probs.shape[1]))
    out["node"], out["predicted"], out["probabilities"] = ids, probs.argmax(axis=1), probs
    return out


def prediction_dtype(num_classes: int) -> np.dtype:
    return np.dtype([("node", "<i8"), ("predicted", "<i8"), ("probabilities", "<f4", (num_classes,))])


def write_rows(path: str | os.PathLike, rows: tuple[int, int], num_rows: int, block: np.ndarray,
               ids: np.ndarray, positions: np.ndarray | None = None) -> None:
    """Write this rank's ``block`` (rows ``rows`` of an (n, ...) output) into ``path``, every rank its own
    rows (see the module docstring). ``block`` is structured prediction records or a float32 matrix.
    ``positions``: the rows of the .npy file the block's rows go to (a reordered graph's original positions;
    default ``rows``); CSV parts keep the grid's order, each line naming its original vertex.
    Collective on the world when a process group exists (every rank calls it, writer or not).
    """
    target = Path(path)
    partial = target.with_name(f".{target.name}.partial")
    csv = target.suffix.lower() == ".csv"
    writer = _first_holder(rows)
    if _rank() == 0 and not csv:
        shape = (num_rows,) if block.dtype.names else (num_rows, block.shape[1])
        np.lib.format.open_memmap(partial, mode="w+", dtype=block.dtype, shape=shape).flush()
    _barrier()
    if writer and csv:
        _write_csv_part(_part(partial, rows[0]), block, ids)
    elif writer and rows[1] > rows[0]:
        mapped = np.lib.format.open_memmap(partial, mode="r+")
        mapped[slice(*rows) if positions is None else positions] = block
        mapped.flush()
        del mapped
    _barrier()
    if _rank() == 0:
        if csv:
            _join_csv_parts(partial, block)
        os.replace(partial, target)
    _barrier()


def _part(partial: Path, first_row: int) -> Path:
    return partial.with_name(f"{partial.name}.{first_row:015d}")


def _write_csv_part(path: Path, block: np.ndarray, ids: np.ndarray) -> None:
    if block.dtype.names:
        values = np.column_stack([block["predicted"].astype(np.float64), block["probabilities"]])
        formats = ["%d"] + ["%.9g"] * block["probabilities"].shape[1]
    else:
        values, formats = block, ["%.9g"] * block.shape[1]
    table = np.column_stack([ids.astype(np.float64), values]) if len(ids) else np.empty((0, len(formats) + 1))
    with open(path, "w", encoding="ascii") as out:
        np.savetxt(out, table, fmt=["%d", *formats], delimiter=",")


def _join_csv_parts(partial: Path, block: np.ndarray) -> None:
    if block.dtype.names:
        width = block["probabilities"].shape[1]
        header = ["node", "predicted"] + [f"prob_{k}" for k in range(width)]
    else:
        header = ["node"] + [f"dim_{k}" for k in range(block.shape[1])]
    parts = sorted(partial.parent.glob(f"{partial.name}.*"))
    with open(partial, "w", encoding="ascii") as out:
        out.write(",".join(header) + "\n")
        for part in parts:
            with open(part, encoding="ascii") as source:
                shutil.copyfileobj(source, out)
            part.unlink()


def _distributed() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def _rank() -> int:
    return dist.get_rank() if _distributed() else 0


def _barrier() -> None:
    if _distributed():
        dist.barrier()


def _first_holder(rows: tuple[int, int]) -> bool:
    """True on the lowest rank holding the rows ``rows`` (collective on the world)."""
    if not _distributed():
        return True
    every: list = [None] * dist.get_world_size()
    dist.all_gather_object(every, tuple(rows))
    return every.index(tuple(rows)) == dist.get_rank()
