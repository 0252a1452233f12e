"""Node data files read by rows in a distributed preparation (``prepare --nprocs P --features --labels --split``).

Row i of every file is vertex i of the graph as the edge list's reader numbers it (its i-th smallest id:
`gridgnn.prepare.renumber`), as `gridgnn.data.attach` reads them in one process; the folder is the same.

- ``--features F.npy`` (n, f) or (n,): each process reads its rows [r0, r1) of the memory-mapped array, as
  float32 (a ``.npz``, a sparse matrix, is read by one process: `check_files` refuses it with ``--nprocs``);
- ``--labels L.npy`` (n,) or (n, T): each process reads its rows; the task is inferred from every block's facts
  (`gridgnn.data.targets.task_facts`, combined by ``and`` over the world), each block is laid out for it
  (`gridgnn.data.targets.canonical_targets` of the block), the class count is the largest over the world;
- ``--split DIR``: every process reads the three index files (their ids, 8 bytes each) and keeps its rows of
  the masks; without it, labels draw the split again among the labelled vertices, as one process does
  (`gridgnn.data.splits.random_split`, one permutation of all n vertices, with every process's labelled rows
  gathered first: 1 byte per vertex).

A file that does not fit (another row count, a value the task refuses, a split naming an unlabelled vertex)
stops every process alike with the one line one process would print (`gridgnn.prepare.exchange.agree`).
Collective on the world.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gridgnn.data.attach import split_digest
from gridgnn.data.file_digest import file_digest
from gridgnn.data.node_files import SPLIT_PARTS, index_file, read_split_dir
from gridgnn.data.readers._common import reading
from gridgnn.data.readers.npz_rows import NpzMember
from gridgnn.data.splits import random_split
from gridgnn.data.targets import canonical_targets, labelled_vertices, target_block, task_facts, task_of
from gridgnn.errors import ConfigError, DataError
from gridgnn.prepare.exchange import agree, all_gather_rows, maximum, total, world

ROWS_AT_A_TIME = 1 << 16
"""Rows of a memory-mapped file read, converted and checked at a time."""


@dataclass
class NodeInfo:
    """What the manifest needs of the node data: the feature width, the outputs and the task."""

    num_features: int
    num_classes: int
    task: str


def check_files(features: str | None, labels: str | None, split: str | None) -> tuple[dict, dict]:
    """Before any worker starts: the files' paths for the job (``features``, ``labels``, ``split``: as given,
    user-expanded) and the ``meta`` entries one process would record (`gridgnn.data.attach`: each file and its
    SHA-256). `ConfigError` for a file ``--nprocs`` cannot read by rows, `DataError` for one that is missing or
    not an array of numbers. Not collective."""
    paths, meta = {}, {}
    for name, given in (("features", features), ("labels", labels)):
        if not given:
            continue
        path = Path(given).expanduser()
        if not path.name.lower().endswith(".npy"):
            raise ConfigError(f"--{name} {given}: --nprocs reads {name} by rows from a .npy array; a "
                              f"{path.suffix or 'suffix-less'} file is read by one process: prepare without --nprocs")
        if not path.is_file():
            raise DataError(f"{path}: {name} file not found")
        with reading(path, name):
            array = np.load(path, mmap_mode="r", allow_pickle=False)
        what = "features" if name == "features" else "targets"  # the one-process readers' words
        if array.dtype.kind not in "biuf":
            raise DataError(f"{path}: {what} must be numbers, got dtype {array.dtype}")
        if array.ndim not in (1, 2):
            shape = "(n, f)" if name == "features" else "(n,) or (n, T)"
            raise DataError(f"{path}: {what} must have shape {shape}, got {array.shape}")
        paths[name] = str(path)
        meta.update({name: "file", f"{name}_file": str(path), f"{name}_sha256": file_digest(path)})
    if split:
        folder = Path(split).expanduser()
        if not folder.is_dir():
            raise DataError(f"{folder}: split folder not found (give a folder holding train, valid and test index "
                            "files)")
        found = {part: index_file(folder, part) for part in SPLIT_PARTS}
        missing = [part for part, path in found.items() if path is None]
        if missing:
            raise DataError(f"{folder}: missing {missing[0]}.csv.gz (or {missing[0]}.csv, {missing[0]}.npy, "
                            f"{missing[0]}.txt(.gz))")
        paths["split"] = str(folder)
        meta.update(split="files", split_dir=str(folder), split_sha256=split_digest(found))
    return paths, meta


def attach_rows(files: dict, name: str, n: int, r0: int, r1: int, seed: int, nodes: dict,
                placeholder: NodeInfo, ids: tuple[int, int] | None, check_split: bool = True) -> tuple[dict, NodeInfo]:
    """Collective on the world: ``nodes`` (this process's rows [r0, r1) of the source's own node data) with the
    rows of ``files`` (`check_files`' paths, or `gridgnn.prepare.ogb_parts`' member specs) in place of what they
    give; ``placeholder``: the source's own widths and task; ``ids``: the smallest and the largest id of the edge
    list (for a row count's message; None: the source numbers its vertices). ``check_split``: refuse a split
    naming an unlabelled vertex (``--split``; an OGB folder's own split is taken as it is, as one process does).
    Returns the rows and the `NodeInfo` of the result."""
    info = NodeInfo(placeholder.num_features, placeholder.num_classes, placeholder.task)
    nodes = dict(nodes)
    where = (name, n, ids)
    if "features" in files:
        nodes["features"], info.num_features = _feature_rows(files["features"], where, r0, r1)
    labelled = None
    if "labels" in files:
        labels, info.task, info.num_classes = _label_rows(files["labels"], where, r0, r1)
        nodes["labels"] = target_block(labels)
        labelled = labelled_vertices(labels, info.task)
    if "split" in files:
        masks = _split_rows(Path(files["split"]), n, r0, r1, labelled if check_split else None)
    elif labelled is not None:  # the source drew its split: drawn again among the labelled vertices
        every = all_gather_rows(labelled.astype(np.uint8)).astype(bool)
        masks = [mask[r0:r1].copy() for mask in random_split(n, seed=seed, among=every)]
    else:
        masks = [nodes["train_mask"], nodes["val_mask"], nodes["test_mask"]]
    nodes["train_mask"], nodes["val_mask"], nodes["test_mask"] = masks
    return nodes, info


def _rows_of(spec: str | dict, what: str, where: tuple):
    """The rows of ``spec`` after the row count check (the line `gridgnn.data.attach` prints), alike on every
    process: a memory-mapped ``.npy`` path, or a member of a ``.npz`` (`_source`; `NpzMember`, streamed: OGB's
    binary layout). ``where``: the graph's name, vertex count and (smallest, largest) id of an edge list (None: the
    source numbers its vertices itself)."""
    name, n, ids = where
    path, member, _ = _source(spec)
    array = NpzMember(path, member) if member else np.load(path, mmap_mode="r", allow_pickle=False)
    if ids is None:
        vertices = f"the {n} vertices of graph '{name}'"
    else:
        vertices = (f"the {n} vertices of graph '{name}' (its vertices are the {n} distinct ids of the edge list, "
                    f"ids {ids[0]} to {ids[1]}, in sorted order: an id on no edge is no vertex)")
    agree(None if array.shape[0] == n else f"{path}: {array.shape[0]} {what} rows for {vertices}")
    return array


def _close(array) -> None:
    """Release a streamed member's archive (a memory map is left to the garbage collector)."""
    if isinstance(array, NpzMember):
        array.close()


def _source(spec: str | dict) -> tuple[Path, str | None, np.dtype | None]:
    """(file, ``.npz`` member or None, dtype its values are read as or None) of a node file: a ``.npy`` path, or
    an OGB member ``{"npz": PATH, "member": NAME, "as": DTYPE or None}`` (`gridgnn.prepare.ogb_parts`)."""
    if isinstance(spec, dict):
        return Path(spec["npz"]), spec["member"], (np.dtype(spec["as"]) if spec.get("as") else None)
    return Path(spec), None, None


def _feature_rows(spec: str | dict, where: tuple, r0: int, r1: int) -> tuple[np.ndarray, int]:
    """(rows, f) float32 of rows [r0, r1), and f. Collective on the world (the checks)."""
    path = _source(spec)[0]
    array = _rows_of(spec, "feature", where)
    width = 1 if array.ndim == 1 else int(array.shape[1])
    out = np.empty((r1 - r0, width), dtype=np.float32)
    finite, problem = True, None
    try:
        for a in range(r0, r1, ROWS_AT_A_TIME):
            b = min(a + ROWS_AT_A_TIME, r1)
            block = np.asarray(array[a:b], dtype=np.float32).reshape(b - a, width)
            finite = finite and bool(np.all(np.isfinite(block)))
            out[a - r0:b - r0] = block
    except Exception as exc:  # noqa: BLE001 - a damaged file: every process must hear of it
        problem = str(exc) or repr(exc)
    finally:
        _close(array)
    agree(problem)
    agree(None if finite else f"{path}: features contain NaN or inf")
    return out, width


def _label_rows(spec: str | dict, where: tuple, r0: int, r1: int) -> tuple[np.ndarray, str, int]:
    """Canonical targets of rows [r0, r1), the task and the outputs, as one process lays out the whole file.
    Collective on the world."""
    n = where[1]
    path, _, cast = _source(spec)
    array = _rows_of(spec, "label", where)
    ndim, dtype = array.ndim, cast or array.dtype
    columns = 1 if ndim == 1 else int(array.shape[1])
    raw, problem = None, None
    try:
        raw = np.asarray(array[r0:r1])
    except Exception as exc:  # noqa: BLE001 - a damaged file: every process must hear of it
        problem = str(exc) or repr(exc)
    finally:
        _close(array)
    agree(problem)
    if cast is not None:
        raw = raw.astype(cast, copy=False)
    if ndim == 2 and columns == 1:
        raw, ndim = raw[:, 0], 1
    if ndim == 2 and columns == 0:
        agree(f"{path}: targets have no columns")
    infinite = raw.dtype.kind == "f" and bool(np.any(np.isinf(raw)))  # checked on the whole first, as one process
    agree(f"{path}: targets contain inf" if total(int(infinite)) else None)
    integral, binary = task_facts(raw)
    _, size = world()
    integral, binary = (total(int(fact)) == size for fact in (integral, binary))  # true on every process
    task = task_of(1 if ndim == 1 else columns, dtype == np.bool_, integral, binary)
    targets, problem = None, None
    try:
        targets = canonical_targets(raw, r1 - r0, task, where=str(path), whole=False)
    except DataError as exc:
        problem = str(exc)
    agree(problem)
    labelled = int(labelled_vertices(targets.values, task).sum())
    agree(None if total(labelled) or n == 0 else f"{path}: no vertex has a target (all unlabelled or NaN)")
    outputs = maximum(targets.num_outputs) if task == "multiclass" else targets.num_outputs
    return targets.values, task, outputs


def _split_rows(folder: Path, n: int, r0: int, r1: int, labelled: np.ndarray | None) -> list[np.ndarray]:
    """This process's rows of the split's three masks; every index file read whole. Collective on the world."""
    masks, problem = None, None
    try:
        whole, part_files = read_split_dir(folder, n)
        masks = [mask[r0:r1].copy() for mask in whole]
    except DataError as exc:
        problem = str(exc)
    agree(problem)
    if labelled is not None:
        for part, mask in zip(SPLIT_PARTS, masks, strict=True):
            count = total(int((mask & ~labelled).sum()))
            agree(None if not count else f"{part_files[part]}: names {count} vertices without a label (unlabelled "
                  "or all NaN); a split names labelled vertices only")
    return masks
