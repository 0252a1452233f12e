"""What a graph's vertices are trained to predict: the task, and its targets in one canonical form.

Three tasks (``TASKS``), each with one array layout held in `gridgnn.data.graph.Graph.labels`:

=============  ==========================  ================================  ========================
task           ``labels``                  missing entries                   outputs (``num_classes``)
=============  ==========================  ================================  ========================
multiclass     int64 (n,), in [0, C)       -1 (an unlabelled vertex)         C classes
multilabel     float32 (n, T), in {0, 1}   NaN (that target of that vertex)  T binary targets
regression     float32 (n, T)              NaN (that target of that vertex)  T real targets
=============  ==========================  ================================  ========================

A vertex is *labelled* when it has at least one present entry (`labelled_vertices`); only labelled vertices
enter a split, a loss or a metric, and within a vertex only its present entries do. Readers and the Python
API turn whatever they were given into this form with `canonical_targets` (``task="auto"`` infers the task:
`infer_task`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gridgnn.config import TASK_CHOICES, TASKS
from gridgnn.errors import DataError
from gridgnn.limits import MAX_CLASSES

__all__ = ["TASKS", "TASK_CHOICES", "UNLABELLED", "Targets", "canonical_targets", "check_graph_targets",
           "infer_task", "labelled_vertices", "present_entries", "standardization", "target_block", "task_facts",
           "task_of"]
UNLABELLED = -1
"""The multiclass label of a vertex without one (NaN in float label files becomes this)."""


@dataclass(frozen=True)
class Targets:
    """Targets in canonical form: ``values`` laid out as the module table says for ``task``; ``num_outputs``:
    the model's output width (classes, or targets)."""

    values: np.ndarray
    task: str
    num_outputs: int


def infer_task(values: np.ndarray) -> str:
    """The task ``values`` (shape (n,) or (n, T)) most plausibly describe: ``multiclass`` for one column of
    integers (floats allowed when every present value is integral; NaN and -1 mark unlabelled vertices, a
    value below -1 is then refused as a class); ``multilabel`` for several columns whose present values are
    all 0 or 1; else ``regression``. Integer-valued regression targets are inferred as classes: say
    ``task="regression"`` for those."""
    values = np.asarray(values)
    columns = 1 if values.ndim == 1 else values.shape[1]
    return task_of(columns, values.dtype == np.bool_, *task_facts(values))


def task_facts(values: np.ndarray) -> tuple[bool, bool]:
    """(integral, binary) of ``values``' present entries (NaN is missing): all whole numbers, all 0 or 1. Facts
    of row blocks combine by ``and``, so that processes holding blocks infer the task of the whole
    (`gridgnn.prepare.node_data`)."""
    values = np.asarray(values)
    present = values[~np.isnan(values)] if values.dtype.kind == "f" else values.reshape(-1)
    integral = present.size == 0 or bool(np.all(present == np.round(present)))
    return integral, bool(np.all((present == 0) | (present == 1)))


def task_of(columns: int, boolean: bool, integral: bool, binary: bool) -> str:
    """`infer_task` from the shape, the dtype and the `task_facts` of the values."""
    if boolean:
        return "multiclass" if columns == 1 else "multilabel"
    if columns == 1 and integral:  # a class below -1 is refused as one, not read as a value
        return "multiclass"
    if columns > 1 and binary:
        return "multilabel"
    return "regression"


def canonical_targets(values, num_nodes: int, task: str = "auto", where: str = "labels",
                      whole: bool = True) -> Targets:
    """``values`` ((n,) or (n, T), any numeric dtype) as `Targets` for ``task`` (or the inferred one).
    Raises `DataError` with one line naming ``where`` when they do not fit: another length, a shape or
    dtype the task cannot take, values out of range, or (``whole``) no labelled vertex at all. ``whole=False``:
    ``values`` are one row block of the targets (its ``num_outputs`` that of the block alone, and a block
    without a labelled vertex allowed: the caller checks the whole)."""
    if task not in TASK_CHOICES:
        raise DataError(f"{where}: unknown task {task!r} (choose from {', '.join(TASK_CHOICES)})")
    values = np.asarray(values)
    if values.dtype.kind not in "biuf":
        raise DataError(f"{where}: targets must be numbers, got dtype {values.dtype}")
    if values.ndim == 0 or values.ndim > 2:
        raise DataError(f"{where}: targets must have shape (n,) or (n, T), got {values.shape}")
    if values.shape[0] != num_nodes:
        raise DataError(f"{where}: {values.shape[0]} labels for {num_nodes} nodes")
    if values.ndim == 2 and values.shape[1] == 0:
        raise DataError(f"{where}: targets have no columns")
    if values.dtype.kind == "f" and np.any(np.isinf(values)):
        raise DataError(f"{where}: targets contain inf")
    task = infer_task(values) if task == "auto" else task
    targets = {"multiclass": _multiclass, "multilabel": _multilabel, "regression": _regression}[task](values, where)
    if whole and num_nodes and not labelled_vertices(targets.values, task).any():
        raise DataError(f"{where}: no vertex has a target (all unlabelled or NaN)")
    return targets


def _multiclass(values: np.ndarray, where: str) -> Targets:
    if values.ndim == 2:
        if values.shape[1] != 1:
            raise DataError(f"{where}: multiclass labels are one integer per node, got shape {values.shape} "
                            "(several columns: --task multilabel or regression)")
        values = values[:, 0]
    if values.dtype.kind == "f":
        present = ~np.isnan(values)
        if np.any(values[present] != np.round(values[present])):
            raise DataError(f"{where}: multiclass labels must be integers, got fractional values "
                            "(real-valued targets: --task regression)")
        values = np.where(present, values, UNLABELLED)
    labels = values.astype(np.int64)
    if labels.size and labels.min() < UNLABELLED:
        raise DataError(f"{where}: negative label {int(labels.min())} (only -1 marks an unlabelled vertex; "
                        "real-valued targets: --task regression)")
    if labels.size and labels.max() >= MAX_CLASSES:
        raise DataError(f"{where}: label {int(labels.max())} is beyond the {MAX_CLASSES} classes gridgnn supports")
    return Targets(labels, "multiclass", max(int(labels.max()) + 1, 1) if labels.size else 1)


def _multilabel(values: np.ndarray, where: str) -> Targets:
    matrix = _as_float_matrix(values)
    present = matrix[~np.isnan(matrix)]
    if not np.all((present == 0) | (present == 1)):
        raise DataError(f"{where}: multilabel targets must be 0, 1 or NaN (missing)")
    return Targets(matrix, "multilabel", matrix.shape[1])


def _regression(values: np.ndarray, where: str) -> Targets:
    matrix = _as_float_matrix(values)
    return Targets(matrix, "regression", matrix.shape[1])


def _as_float_matrix(values: np.ndarray) -> np.ndarray:
    """(n,) or (n, T) -> float32 (n, T), a copy."""
    matrix = values.reshape(values.shape[0], -1) if values.ndim == 2 else values.reshape(-1, 1)
    return np.array(matrix, dtype=np.float32)


def labelled_vertices(values: np.ndarray, task: str) -> np.ndarray:
    """Bool (n,): the vertices with at least one present target entry (canonical ``values``)."""
    if task == "multiclass":
        return np.asarray(values) >= 0
    return ~np.all(np.isnan(values), axis=1)


def present_entries(values: np.ndarray, task: str) -> np.ndarray:
    """Bool of ``values``' shape ((n,) multiclass, else (n, T)): the target entries that are present."""
    if task == "multiclass":
        return np.asarray(values) >= 0
    return ~np.isnan(values)


def check_graph_targets(labels: np.ndarray, task: str, num_outputs: int, num_nodes: int, masks: dict,
                        where: str) -> None:
    """Raise `DataError` when canonical ``labels`` do not fit ``task``'s layout with ``num_outputs`` outputs, or
    when a split mask (name -> bool (n,)) names a vertex without any target."""
    if task not in TASKS:
        raise DataError(f"{where}: unknown task {task!r} (one of {', '.join(TASKS)})")
    if num_outputs < 1:
        raise DataError(f"{where}: num_classes must be positive, got {num_outputs}")
    if num_outputs > MAX_CLASSES:
        raise DataError(f"{where}: num_classes {num_outputs} is more than the {MAX_CLASSES} classes "
                        "gridgnn supports (labels or num_classes damaged?)")
    if task == "multiclass":
        if labels.shape != (num_nodes,):
            raise DataError(f"{where}: {labels.shape[0]} labels for {num_nodes} nodes")
        if not np.issubdtype(labels.dtype, np.integer):
            raise DataError(f"{where}: labels must be integers, got {labels.dtype}")
        if num_nodes and (labels.min() < UNLABELLED or labels.max() >= num_outputs):
            raise DataError(f"{where}: labels outside [0, {num_outputs}) (-1: unlabelled)")
    else:
        if labels.shape != (num_nodes, num_outputs):
            raise DataError(f"{where}: {task} targets have shape {labels.shape}, expected ({num_nodes}, "
                            f"{num_outputs})")
        if labels.dtype.kind != "f":
            raise DataError(f"{where}: {task} targets must be floating point, got {labels.dtype}")
        if np.any(np.isinf(labels)):
            raise DataError(f"{where}: targets contain inf")
        if task == "multilabel":
            present = labels[~np.isnan(labels)]
            if not np.all((present == 0) | (present == 1)):
                raise DataError(f"{where}: multilabel targets must be 0, 1 or NaN")
    unlabelled = ~labelled_vertices(labels, task)
    for name, mask in masks.items():
        count = int(np.count_nonzero(mask & unlabelled))
        if count:
            raise DataError(f"{where}: {name} names {count} vertices without a target (unlabelled or all NaN)")


def target_block(labels: np.ndarray) -> np.ndarray:
    """A block of canonical targets as an owned array torch can take: int64 (rows,) for classes, float32
    (rows, T) otherwise."""
    if np.issubdtype(labels.dtype, np.integer):
        return np.array(labels, dtype=np.int64)
    return np.array(labels, dtype=np.float32)


def standardization(labels: np.ndarray, train_mask: np.ndarray) -> tuple[list[float], list[float]]:
    """(shift, scale) of canonical regression targets (n, T): each column's mean and standard deviation over
    the present entries of the training vertices (``train_mask`` (n,)); a column with no spread (or no entry)
    keeps scale 1 (and shift 0 without entries), so no target is divided by zero."""
    rows = np.asarray(labels[np.asarray(train_mask, dtype=bool)], dtype=np.float64)
    shift, scale = [], []
    for column in rows.T:
        present = column[~np.isnan(column)]
        mean = float(present.mean()) if present.size else 0.0
        spread = float(present.std()) if present.size else 0.0
        shift.append(mean)
        scale.append(spread if spread > 0 else 1.0)
    return shift, scale
