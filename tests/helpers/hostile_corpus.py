"""The hostile-input corpus of `test_hostile_inputs.py` (issue 6): malformed dataset files and folders, bad
flags and grids, each with the key word its one error line must contain.

``DATA_CASES``: (id, builder, key word); a builder takes the case's tmp folder and returns (dataset argument,
fragment naming the culprit). ``FLAG_CASES``: (id, arguments after ``gridgnn train`` or a whole ``info``
command line, key word); ``{tmp}`` is the case's folder. Pickle payloads would create ``MARKER`` in that folder
if they ever ran.
"""

from __future__ import annotations

import gzip
import os
import pickle
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from data_error_helpers import benchmark_arrays

from gridgnn.data import save_graph
from gridgnn.data.generators import csbm

REPO_ROOT = Path(__file__).resolve().parents[2]
MARKER = "PWNED"
"""The file a malicious pickle would create (``touch``) in the test's folder if it ever ran."""


class _Malicious:
    """Pickles as a call ``os.system("touch <marker>")``; a safe loader refuses it before calling anything."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


# --- builders: each takes the case's tmp folder and returns (dataset argument, fragment naming the culprit) --


def _text(name: str, content: str | bytes) -> Callable[[Path], tuple[str, str]]:
    def build(tmp: Path) -> tuple[str, str]:
        path = tmp / name
        if isinstance(content, bytes):
            path.write_bytes(gzip.compress(content) if name.endswith(".gz") else content)
        else:
            path.write_text(content)
        return str(path), name

    return build


def _one_hot(rows: int, classes: int = 2) -> np.ndarray:
    labels = np.zeros((rows, classes))
    labels[np.arange(rows), np.arange(rows) % classes] = 1
    return labels


def _planetoid(culprit: str, test_index: str | None = None, **parts: object) -> Callable[[Path], tuple[str, str]]:
    """A tiny valid Planetoid folder ``ind.tiny.*`` (2 train, 500 val, 3 test nodes) with ``parts`` replaced:
    an object is pickled, bytes are written as they are, None deletes the file."""

    def build(tmp: Path) -> tuple[str, str]:
        folder = tmp / "ind-folder"
        folder.mkdir()
        num_base, num_test = 502, 3
        files: dict[str, object] = {
            "x": sp.csr_matrix(np.ones((2, 3), np.float32)),
            "y": _one_hot(2),
            "allx": sp.csr_matrix(np.ones((num_base, 3), np.float32)),
            "ally": _one_hot(num_base),
            "tx": sp.csr_matrix(np.ones((num_test, 3), np.float32)),
            "ty": _one_hot(num_test),
            "graph": {i: [(i + 1) % (num_base + num_test)] for i in range(num_base + num_test)},
        }
        files.update({part: value(tmp) if callable(value) else value for part, value in parts.items()})
        for part, value in files.items():
            if value is not None:
                data = value if isinstance(value, bytes) else pickle.dumps(value, protocol=4)
                (folder / f"ind.tiny.{part}").write_bytes(data)
        index = "".join(f"{num_base + i}\n" for i in range(num_test)) if test_index is None else test_index
        (folder / "ind.tiny.test.index").write_text(index)
        return str(folder), culprit

    return build


def _truncated_pickle(tmp: Path) -> bytes:
    return pickle.dumps(sp.csr_matrix(np.ones((502, 3), np.float32)), protocol=4)[:300]


def _reduce_payload(tmp: Path) -> bytes:
    return pickle.dumps(_Malicious(tmp / MARKER), protocol=2)


def _nested_payload(tmp: Path) -> bytes:
    return pickle.dumps({0: [1], 1: [_Malicious(tmp / MARKER)]}, protocol=2)


def _opcode_payload(module: str, name: str) -> Callable[[Path], bytes]:
    """A protocol-0 pickle that calls ``module.name`` with a command creating the marker."""

    def build(tmp: Path) -> bytes:
        argument = f"touch {tmp / MARKER}" if name == "system" else f"open('{tmp / MARKER}', 'w')"
        return f"c{module}\n{name}\n(S{argument!r}\ntR.".encode()

    return build


def _benchmark(**overrides: object) -> Callable[[Path], tuple[str, str]]:
    """A 3-node gnn-benchmark ``g.npz`` with ``overrides`` (None removes a key; a callable gets the folder)."""

    def build(tmp: Path) -> tuple[str, str]:
        path = tmp / "g.npz"
        values = {k: v(tmp) if callable(v) else v for k, v in overrides.items()}
        np.savez(path, **benchmark_arrays(**values))
        return str(path), "g.npz"

    return build


def _benchmark_damaged(how: str) -> Callable[[Path], tuple[str, str]]:
    def build(tmp: Path) -> tuple[str, str]:
        good = tmp / "good.npz"
        np.savez(good, **benchmark_arrays())
        path = tmp / ("g.zip" if how.endswith("zip") else "g.npz")
        if how == "truncated":
            path.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
        elif how == "wrong magic":
            path.write_bytes(b"GIF89a" + good.read_bytes()[6:])
        elif how == "corrupt member":
            with zipfile.ZipFile(path, "w") as archive:
                archive.writestr("adj_data.npy", b"\x93NUMPY garbage")
        elif how == "two npz in zip":
            with zipfile.ZipFile(path, "w") as archive:
                archive.write(good, "a.npz")
                archive.write(good, "b.npz")
        good.unlink()
        return str(path), path.name

    return build


def _object_array(tmp: Path) -> np.ndarray:
    return np.array([_Malicious(tmp / MARKER)] * 3, dtype=object)


def _native(update: dict | None = None, **overrides: object) -> Callable[[Path], tuple[str, str]]:
    """A native gridgnn ``graph.npz`` (20 nodes) with the arrays of ``update`` and ``overrides`` replaced
    (a callable override gets the original arrays)."""

    def build(tmp: Path) -> tuple[str, str]:
        path = save_graph(csbm(nodes=20, classes=2, features=3), tmp / "graph.npz")
        with np.load(path) as npz:
            arrays = dict(npz)
        arrays.update(update or {})
        arrays.update({k: v(arrays) if callable(v) else v for k, v in overrides.items()})
        np.savez(path, **arrays)
        return str(path), "graph.npz"

    return build


def _native_truncated(tmp: Path) -> tuple[str, str]:
    path = save_graph(csbm(nodes=20, classes=2, features=3), tmp / "graph.npz")
    path.write_bytes(path.read_bytes()[:700])
    return str(path), "graph.npz"


def _native_pickled_labels(tmp: Path) -> tuple[str, str]:
    path = save_graph(csbm(nodes=20, classes=2, features=3), tmp / "graph.npz")
    with np.load(path) as npz:
        arrays = dict(npz)
    arrays["labels"] = np.array([_Malicious(tmp / MARKER)] * 20, dtype=object)
    np.savez(path, **arrays)
    return str(path), "graph.npz"


EMPTY_NATIVE = {
    "adj_data": np.zeros(0, np.float32), "adj_indices": np.zeros(0, np.int32), "adj_indptr": np.zeros(1, np.int32),
    "adj_shape": np.array([0, 0]), "features": np.zeros((0, 3), np.float32), "labels": np.zeros(0, np.int64),
    **{mask: np.zeros(0, bool) for mask in ("train_mask", "val_mask", "test_mask")},
}


def _ogb(culprit: str, split: dict[str, str] | None = None, truncate: str | None = None,
         **files: str | None) -> Callable[[Path], tuple[str, str]]:
    """A 3-node OGB folder (gzipped CSVs under raw/) with some files replaced, removed (None) or truncated."""

    def build(tmp: Path) -> tuple[str, str]:
        folder = tmp / "ogbn_tiny"
        raw = folder / "raw"
        raw.mkdir(parents=True)
        contents = {"edge": "0,1\n1,2\n", "node-feat": "1,2\n3,4\n5,6\n", "node-label": "0\n1\n0\n", **files}
        for stem, text in contents.items():
            if text is not None:
                (raw / f"{stem}.csv.gz").write_bytes(gzip.compress(text.encode()))
        if truncate is not None:
            path = raw / f"{truncate}.csv.gz"
            path.write_bytes(path.read_bytes()[:-6])
        if split is not None:
            (folder / "split" / "random").mkdir(parents=True)
            for part, ids in split.items():
                (folder / "split" / "random" / f"{part}.csv.gz").write_bytes(gzip.compress(ids.encode()))
        return str(folder), culprit

    return build


def _empty_folder(tmp: Path) -> tuple[str, str]:
    (tmp / "nothing").mkdir()
    return str(tmp / "nothing"), "nothing"


def _truncated_gzip(tmp: Path) -> tuple[str, str]:
    path = tmp / "g.txt.gz"
    path.write_bytes(gzip.compress(b"1 2\n2 3\n3 4\n")[:20])
    return str(path), "g.txt.gz"


def _unrelated_npz(tmp: Path) -> tuple[str, str]:
    np.savez(tmp / "other.npz", something=np.arange(3))
    return str(tmp / "other.npz"), "other.npz"


def _fifo(tmp: Path) -> tuple[str, str]:
    os.mkfifo(tmp / "pipe.edges")
    return str(tmp / "pipe.edges"), "pipe.edges"


def _shared_lists(tmp: Path) -> dict:
    """A Planetoid graph dict whose 505 keys all name one list (the pickle memo): 505 x 400 entries from a
    file of a few KB."""
    shared = [i % 505 for i in range(400)]
    return {i: shared for i in range(505)}


def _object_labels_with_none(tmp: Path) -> np.ndarray:
    labels = np.empty((502, 2), dtype=object)
    labels[:] = None
    return labels


def _spec(spec: str) -> Callable[[Path], tuple[str, str]]:
    """A generator spec or name; the error names it (``csbm:`` ...; a bare name in quotes)."""
    return lambda tmp: (spec, spec.split(":")[0] + ":" if ":" in spec else f"'{spec}'")


MTX = "%%MatrixMarket matrix coordinate pattern general\n"

# (id, builder, key word the error line must contain)
DATA_CASES = [
    # Planetoid raw pickles
    ("planetoid-truncated-pickle", _planetoid("ind.tiny.allx", allx=_truncated_pickle), "cannot read pickle"),
    ("planetoid-wrong-magic", _planetoid("ind.tiny.y", y=b"GIF89a not a pickle at all"), "cannot read pickle"),
    ("planetoid-empty-pickle-file", _planetoid("ind.tiny.ty", ty=b""), "cannot read pickle"),
    ("planetoid-missing-file", _planetoid("ind.tiny.tx", tx=None), "file not found"),
    ("planetoid-forbidden-os-system-reduce", _planetoid("ind.tiny.x", x=_reduce_payload), "forbidden class"),
    ("planetoid-forbidden-class-nested-in-graph", _planetoid("ind.tiny.graph", graph=_nested_payload),
     "forbidden class"),
    ("planetoid-forbidden-builtins-eval", _planetoid("ind.tiny.ally", ally=_opcode_payload("builtins", "eval")),
     "forbidden class builtins.eval"),
    ("planetoid-forbidden-posix-system", _planetoid("ind.tiny.allx", allx=_opcode_payload("posix", "system")),
     "forbidden class posix.system"),
    ("planetoid-id-out-of-range", _planetoid("ind.tiny.graph", graph={0: [1], 5: [99999]}), "outside"),
    ("planetoid-negative-id", _planetoid("ind.tiny.graph", graph={0: [1], 1: [-7]}), "outside"),
    ("planetoid-negative-test-id", _planetoid("ind.tiny.test.index", test_index="503\n-4\n504\n"),
     "negative test node id"),
    ("planetoid-non-numeric-test-index", _planetoid("ind.tiny.test.index", test_index="503\nfoo\n504\n"),
     "cannot read test index"),
    ("planetoid-empty-test-index", _planetoid("ind.tiny.test.index", test_index=""), "no test node ids"),
    ("planetoid-nan-features", _planetoid("ind-folder", allx=sp.csr_matrix(np.full((502, 3), np.nan, np.float32))),
     "NaN"),
    ("planetoid-mismatched-labels-vs-features", _planetoid("ind.tiny.ty", ty=_one_hot(2)), "mismatched lengths"),
    ("planetoid-labels-not-an-array", _planetoid("ind.tiny.y", y="labels"), "expected a 2-D numpy array"),
    ("planetoid-graph-not-a-dict", _planetoid("ind.tiny.graph", graph=[1, 2]), "expected a dict"),
    ("planetoid-features-not-a-matrix", _planetoid("ind.tiny.tx", tx=np.zeros(4)), "expected a sparse matrix"),
    # issue 15: structured parts validated before use, and no amplification
    ("planetoid-object-labels-holding-none", _planetoid("ind.tiny.ally", ally=_object_labels_with_none),
     "expected a numeric (one-hot) array"),
    ("planetoid-float-labels-with-nan", _planetoid("ind.tiny.y", y=np.full((2, 2), np.nan)), "NaN or inf"),
    ("planetoid-shared-adjacency-lists", _planetoid("ind.tiny.graph", graph=_shared_lists),
     "share one adjacency list"),
    # gnn-benchmark .npz / .zip
    ("npz-truncated", _benchmark_damaged("truncated"), "cannot read npz"),
    ("npz-wrong-magic", _benchmark_damaged("wrong magic"), "cannot read npz"),
    ("npz-corrupt-member", _benchmark_damaged("corrupt member"), "cannot read"),
    ("zip-two-npz-inside", _benchmark_damaged("two npz in zip"), "exactly one .npz"),
    ("npz-id-out-of-range", _benchmark(adj_indices=np.array([1, 0, 7, 1])), "cannot read adj matrix"),
    ("npz-negative-id", _benchmark(adj_indices=np.array([1, 0, -2, 1])), "cannot read adj matrix"),
    ("npz-negative-label", _benchmark(labels=np.array([0, -1, 0])), "negative label"),
    ("npz-float-labels", _benchmark(labels=np.array([0.0, 0.5, 1.0])), "non-integer"),
    ("npz-nan-features", _benchmark(attr_matrix=np.array([[1, 0], [np.nan, 1], [0, 0]], np.float32)), "NaN or inf"),
    ("npz-inf-edge-weight", _benchmark(adj_data=np.array([1, np.inf, 1, 1], np.float32)), "NaN or inf"),
    ("npz-labels-shorter-than-nodes", _benchmark(labels=np.array([0, 1])), "2 labels for 3 nodes"),
    ("npz-features-rows-mismatch", _benchmark(attr_matrix=np.ones((2, 2), np.float32)), "features have shape"),
    ("npz-not-square", _benchmark(adj_shape=np.array([3, 4])), "must be square"),
    ("npz-missing-key", _benchmark(adj_indptr=None), "missing key"),
    ("npz-empty-graph", _benchmark(adj_data=np.zeros(0, np.float32), adj_indices=np.zeros(0, np.int32),
                                   adj_indptr=np.zeros(1, np.int32), adj_shape=np.array([0, 0]),
                                   attr_matrix=np.zeros((0, 2), np.float32), labels=np.zeros(0, np.int64)),
     "empty"),
    ("npz-pickled-object-labels", _benchmark(labels=_object_array), "holds Python objects"),
    ("npz-label-2-to-the-62", _benchmark(labels=np.array([0, 2**62, 0])), "beyond the 16777216 classes"),
    ("npz-empty-file", _text("empty.npz", b""), "cannot read npz"),
    ("npz-unrelated-arrays", _unrelated_npz, "neither a gridgnn graph nor a gnn-benchmark"),
    # Matrix Market
    ("mtx-wrong-header", _text("g.mtx", "not a matrix\n1 2\n"), "cannot read Matrix Market"),
    ("mtx-truncated", _text("g.mtx", MTX + "3 3 5\n1 2\n"), "Truncated"),
    ("mtx-id-out-of-range", _text("g.mtx", MTX + "3 3 2\n1 2\n4 1\n"), "out of bounds"),
    ("mtx-negative-id", _text("g.mtx", MTX + "3 3 1\n-1 1\n"), "out of bounds"),
    ("mtx-zero-id", _text("g.mtx", MTX + "3 3 1\n0 1\n"), "out of bounds"),
    ("mtx-nan-weight", _text("g.mtx", "%%MatrixMarket matrix coordinate real general\n2 2 1\n1 2 nan\n"),
     "NaN or inf"),
    ("mtx-complex-values", _text("g.mtx", "%%MatrixMarket matrix coordinate complex general\n2 2 1\n1 2 1 1\n"),
     "complex"),
    ("mtx-not-square", _text("g.mtx", MTX + "3 4 1\n1 2\n"), "must be square"),
    ("mtx-empty-graph", _text("g.mtx", MTX + "0 0 0\n"), "empty"),
    ("mtx-huge-declared-size", _text("g.mtx", MTX + "1000000000000000 1000000000000000 1\n1 1\n"), "allocate"),
    ("mtx-binary-garbage", _text("g.mtx", bytes(range(256)) * 4), "cannot read Matrix Market"),
    ("mtx-integer-value-overflows", _text("g.mtx", "%%MatrixMarket matrix coordinate integer general\n2 2 1\n"
                                              "1 2 100000000000000000000000\n"), "out of range"),
    # text edge lists
    ("edgelist-empty-file", _text("g.edges", ""), "edge list is empty"),
    ("edgelist-only-comments", _text("g.txt", "# nothing\n% here\n"), "edge list is empty"),
    ("edgelist-negative-id", _text("g.edges", "0 1\n-3 2\n"), "negative vertex id -3"),
    ("edgelist-non-numeric-id", _text("g.txt", "1 2\n3 x\n"), "could not convert"),
    ("edgelist-float-id", _text("g.txt", "1 2\n1.5 2\n"), "could not convert"),
    ("edgelist-id-overflows-int64", _text("g.txt", "1 99999999999999999999\n"), "could not convert"),
    ("edgelist-one-column", _text("g.tsv", "1\t2\n3\n"), "invalid column index"),
    ("edgelist-binary-garbage", _text("g.txt", b"1 2\n\x00\x81\xff\xfe\x93garbage\n"), "cannot read edge list"),
    ("edgelist-truncated-gzip", _truncated_gzip, "cannot read edge list"),
    # OGB folders
    ("ogb-id-out-of-range", _ogb("edge.csv.gz", edge="0,1\n1,7\n"), "vertex id 7 is outside"),
    ("ogb-negative-id", _ogb("edge.csv.gz", edge="0,1\n-1,2\n"), "vertex id -1 is outside"),
    ("ogb-empty-edges", _ogb("edge.csv.gz", edge=""), "expected one 'src,dst' pair"),
    ("ogb-nan-features", _ogb("node-feat.csv.gz", **{"node-feat": "1,2\n3,nan\n5,6\n"}), "NaN or inf"),
    ("ogb-inf-features", _ogb("node-feat.csv.gz", **{"node-feat": "1,2\n3,inf\n5,6\n"}), "NaN or inf"),
    ("ogb-ragged-features", _ogb("node-feat.csv.gz", **{"node-feat": "1,2\n3\n5,6\n"}), "cannot read node-feat"),
    ("ogb-labels-shorter-than-nodes", _ogb("node-label.csv.gz", **{"node-label": "0\n1\n"}), "2 labels for 3 nodes"),
    ("ogb-negative-label", _ogb("node-label.csv.gz", **{"node-label": "0\n-3\n1\n"}), "negative label -3"),
    ("ogb-all-nan-labels", _ogb("node-label.csv.gz", **{"node-label": "nan\nnan\nnan\n"}),
     "no vertex has a target"),  # one NaN is an unlabelled vertex (docs/tasks.md); all of them is no data
    ("ogb-infinite-label", _ogb("node-label.csv.gz", **{"node-label": "0\ninf\n1\n"}), "targets contain inf"),
    ("ogb-label-2-to-the-62", _ogb("node-label.csv.gz", **{"node-label": f"0\n{2**62}\n1\n"}),
     "beyond the 16777216 classes"),
    ("ogb-ragged-label-rows", _ogb("node-label.csv.gz", **{"node-label": "0,1\n1\n0,0\n"}), "node-label"),
    ("ogb-zero-node-count", _ogb("num-node-list.csv.gz", **{"num-node-list": "0\n"}), "one positive node count"),
    ("ogb-huge-node-count", _ogb("edge.csv.gz", **{"num-node-list": "1000000000000000\n", "node-feat": None,
                                                  "node-label": None}), "do not fit in memory"),
    ("ogb-split-id-out-of-range", _ogb("test.csv.gz", split={"train": "0\n", "valid": "1\n", "test": "9\n"}),
     "node id 9 outside"),
    ("ogb-split-missing-part", _ogb("random", split={"train": "0\n", "valid": "1\n"}), "missing test.csv.gz"),
    ("ogb-truncated-gzip", _ogb("node-feat.csv.gz", truncate="node-feat"), "cannot read node-feat"),
    ("ogb-missing-edge-file", _ogb("ogbn_tiny", edge=None), "lacks raw/edge.csv"),
    # gridgnn native .npz
    ("native-truncated", _native_truncated, "cannot read npz"),
    ("native-wrong-marker", _native(gridgnn_format=np.asarray("something-else")), "not a gridgnn graph file"),
    ("native-future-version", _native(format_version=np.asarray(99)), "format version 99"),
    ("native-labels-out-of-range", _native(labels=lambda a: a["labels"] + 5), "labels outside [0, 2)"),
    ("native-inf-features", _native(features=np.full((20, 3), np.inf, np.float32)), "NaN or inf"),
    ("native-id-out-of-range", _native(adj_indices=lambda a: a["adj_indices"] + 1000), "cannot read adj matrix"),
    ("native-mask-not-bool", _native(train_mask=lambda a: a["train_mask"].astype(np.int8)), "must be a bool array"),
    ("native-mask-shorter-than-nodes", _native(val_mask=lambda a: a["val_mask"][:5]), "val_mask must be"),
    ("native-labels-shorter-than-features", _native(labels=lambda a: a["labels"][:5]), "5 labels for 20 nodes"),
    ("native-features-shorter-than-labels", _native(features=lambda a: a["features"][:7]), "features have shape"),
    ("native-zero-classes", _native(num_classes=np.asarray(0)), "num_classes must be positive"),
    ("native-bad-meta-json", _native(meta_json=np.asarray("{not json")), "cannot read graph meta"),
    ("native-empty-graph", _native(EMPTY_NATIVE), "empty"),
    ("native-pickled-object-labels", _native_pickled_labels, "holds Python objects"),
    ("native-meta-json-is-a-list", _native(meta_json=np.asarray("[]")), "graph meta must be a JSON object"),
    ("native-meta-format-is-a-list", _native(meta_json=np.asarray('{"format": [1]}')), "entry 'format'"),
    ("native-meta-seed-is-a-string", _native(meta_json=np.asarray('{"seed": "0"}')), "entry 'seed' must be a int"),
    ("native-meta-too-deep", _native(meta_json=np.asarray("[" * 100000 + "]" * 100000)), "graph meta"),
    ("native-num-classes-2-to-the-62", _native(num_classes=np.asarray(2**62)), "16777216 classes"),
    ("native-labels-2-to-the-62", _native(labels=np.full(20, 2**62), num_classes=np.asarray(2**62 + 1)),
     "16777216 classes"),
    ("native-num-classes-is-a-list", _native(num_classes=np.arange(3)), "'num_classes' must be a single integer"),
    ("native-format-is-a-list", _native(gridgnn_format=np.asarray(["gridgnn-graph", "x"])),
     "'gridgnn_format' must be a single string"),
    ("native-directed-is-a-float", _native(directed=np.asarray(0.5)), "'directed' must be a single boolean"),
    # generator specs, names and paths
    ("csbm-zero-nodes", _spec("csbm:nodes=0"), "classes <= nodes"),
    ("csbm-negative-nodes", _spec("csbm:nodes=-5"), "classes <= nodes"),
    ("csbm-zero-classes", _spec("csbm:classes=0"), "classes <= nodes"),
    ("csbm-zero-features", _spec("csbm:features=0"), "features must be >= 1"),
    ("csbm-negative-degree", _spec("csbm:avg_degree=-1"), "avg_degree must be >= 0"),
    ("csbm-homophily-above-one", _spec("csbm:homophily=2"), "homophily must lie in [0, 1]"),
    ("csbm-nan-value", _spec("csbm:signal=nan"), "not a valid float"),
    ("csbm-non-numeric-value", _spec("csbm:nodes=abc"), "not a valid int"),
    ("csbm-unknown-key", _spec("csbm:colours=3"), "unknown or malformed 'colours=3'"),
    ("csbm-key-given-twice", _spec("csbm:nodes=10,nodes=20"), "given twice"),
    ("csbm-too-large-for-memory", _spec("csbm:nodes=1e15"), "too large to generate in memory"),
    ("rmat-zero-scale", _spec("rmat:scale=0"), "scale must lie in [1, 40]"),
    ("rmat-negative-scale", _spec("rmat:scale=-1"), "scale must lie in [1, 40]"),
    ("rmat-zero-edge-factor", _spec("rmat:edge_factor=0"), "edge_factor must be >= 1"),
    ("rmat-probabilities-above-one", _spec("rmat:a=2"), "a + b + c <= 1"),
    ("rmat-too-large-for-memory", _spec("rmat:scale=40,edge_factor=1000"), "too large to generate in memory"),
    ("unknown-dataset-name", _spec("pubmedd"), "not a known name"),
    ("unknown-file-format", _text("graph.xyz", "1 2\n"), "unknown dataset format"),
    ("folder-without-dataset", _empty_folder, "no dataset found in folder"),
    ("dataset-is-a-fifo", _fifo, "a FIFO"),
]


PLAN_COUNTS = ["--num-nodes", "1000", "--num-edges", "5000", "--num-features", "8", "--num-classes", "2"]
SMALL = "csbm:nodes=60,classes=2"
"""A dataset that trains in milliseconds, for flag cases (so a flag that is wrongly accepted fails fast)."""

# (id, arguments after ``gridgnn train`` (or a whole ``info`` command line), key word); ``{tmp}`` is the
# case's folder. Train cases get ``--epochs 1 --dataset SMALL --metrics-out <fresh path>`` in front.
FLAG_CASES = [
    ("hidden-zero", ["--hidden", "0"], "hidden must be at least 1"),
    ("hidden-negative", ["--hidden", "-16"], "hidden must be at least 1"),
    ("hidden-too-large-for-memory", ["--hidden", "100000000000000"], "not enough memory"),
    ("layers-zero", ["--layers", "0"], "layers must be at least 1"),
    ("epochs-zero", ["--epochs", "0"], "epochs must be at least 1"),
    ("epochs-negative", ["--epochs", "-1"], "epochs must be at least 1"),
    ("nprocs-zero", ["--nprocs", "0"], "nprocs must be at least 1"),
    ("nprocs-negative", ["--nprocs", "-2", "--algo", "1d"], "nprocs must be at least 1"),
    ("nprocs-above-local-limit", ["--algo", "1d", "--nprocs", "100"], "more than 64 workers"),
    ("timeout-zero", ["--timeout", "0"], "--timeout"),
    ("timeout-negative", ["--timeout", "-5", "--algo", "2d"], "--timeout"),
    ("timeout-nan", ["--timeout", "nan"], "--timeout"),
    ("timeout-inf", ["--timeout", "inf"], "--timeout"),
    ("threads-zero", ["--threads", "0"], "--threads"),
    ("threads-zero-distributed", ["--threads", "0", "--algo", "1d", "--nprocs", "2"], "--threads"),
    ("grid-algo-on-one-process", ["--algo", "2d"], "needs several processes: add --nprocs P"),
    ("local-algo-on-several-processes", ["--algo", "local", "--nprocs", "2"], "--algo local trains on one process"),
    ("replication-zero", ["--algo", "1.5d", "--nprocs", "4", "--replication", "0"], "replication must be at least 1"),
    ("seed-negative", ["--seed", "-1"], "seed must be at least 0"),
    ("seed-beyond-64-bits", ["--seed", str(2**70)], "seed must be at most"),
    ("dropout-one", ["--dropout", "1"], "dropout must be in [0, 1)"),
    ("dropout-nan", ["--dropout", "nan"], "dropout must be a finite number"),
    ("lr-zero", ["--lr", "0"], "lr must be in (0, 3.40282e+37]"),
    ("lr-inf", ["--lr", "inf"], "lr must be a finite number"),
    ("weight-decay-negative", ["--weight-decay", "-1"], "weight_decay must be in"),
    # issue 15: sizes checked against what the machine and the libraries can represent, before allocating
    ("hidden-2-to-the-62", ["--hidden", str(2**62)], "not enough memory for the model"),
    ("hidden-2-to-the-62-distributed", ["--hidden", str(2**62), "--algo", "1d", "--nprocs", "2"],
     "not enough memory for the model"),
    ("threads-above-limit", ["--threads", "100000", "--algo", "1d", "--nprocs", "2"], "between 1 and 1024"),
    ("threads-above-limit-local", ["--threads", "1025"], "between 1 and 1024"),
    ("timeout-1e300", ["--timeout", "1e300", "--algo", "1d", "--nprocs", "2"], "between 1 and 604800"),
    ("timeout-microsecond", ["--timeout", "0.000001", "--algo", "1d", "--nprocs", "2"], "between 1 and 604800"),
    ("nprocs-2-to-the-40", ["--algo", "1d", "--nprocs", str(2**40)], "more than 64 workers"),
    ("plan-nprocs-65536", ["plan", "--num-nodes", "1000", "--num-edges", "5000", "--num-features", "8",
                           "--num-classes", "2", "--nprocs", "65536"], "more than the 16384 processes"),
    ("layers-above-limit", ["--layers", "1000000"], "layers must be at most 1024"),
    ("plan-hidden-2-to-the-62", ["plan", *PLAN_COUNTS, "--hidden", str(2**62)], "beyond what the cost model counts"),
    ("plan-num-classes-2-to-the-62", ["plan", "--num-nodes", "1000", "--num-edges", "5000", "--num-features", "8",
                                      "--num-classes", str(2**62)], "classes 4611686018427387904 is beyond"),
    ("plan-num-nodes-2-to-the-62", ["plan", "--num-nodes", str(2**62), "--num-edges", "5000", "--num-features",
                                    "8", "--num-classes", "2"], "4611686018427387904 vertices"),
    ("plan-layers-above-limit", ["plan", *PLAN_COUNTS, "--layers", "1000000"], "--layers must be at most 1024"),
    ("plan-nprocs-2-to-the-40", ["plan", "--num-nodes", "1000", "--num-edges", "5000", "--num-features", "8",
                                 "--num-classes", "2", "--nprocs", "4", str(2**40)], "more than the 16384"),
    # grids that do not fit the process count (rejected before any worker starts)
    ("grid-2d-3x3-on-4-procs", ["--algo", "2d", "--nprocs", "4", "--grid", "3x3"], "needs 9 processes"),
    ("grid-1.5d-replication-3-on-4-procs", ["--algo", "1.5d", "--replication", "3", "--nprocs", "4"],
     "does not divide 4 processes"),
    ("grid-3d-on-6-procs", ["--algo", "3d", "--nprocs", "6"], "cube number of processes"),
    ("grid-3d-not-square-base", ["--algo", "3d", "--nprocs", "6", "--grid", "2x3x1"], "equal first two"),
    ("grid-3d-2x2x3-on-8-procs", ["--algo", "3d", "--nprocs", "8", "--grid", "2x2x3"], "needs 12 processes"),
    ("grid-2d-three-dimensions", ["--algo", "2d", "--nprocs", "2", "--grid", "1x2x1"], "two dimensions"),
    ("grid-1d-two-dimensions-on-1-proc", ["--algo", "1d", "--grid", "2x2"], "needs 4 processes"),
    ("grid-1.5d-contradicts-replication", ["--algo", "1.5d", "--nprocs", "4", "--grid", "2x2", "--replication", "4"],
     "contradicts"),
    ("grid-zero-dimension", ["--algo", "2d", "--nprocs", "4", "--grid", "0x4"], "grid must look like"),
    ("grid-not-a-shape", ["--algo", "2d", "--nprocs", "4", "--grid", "axb"], "grid must look like"),
    ("replication-without-1.5d", ["--algo", "1d", "--nprocs", "2", "--replication", "2"], "applies to --algo 1.5d"),
    # values that are not numbers or not choices
    ("hidden-not-a-number", ["--hidden", "abc"], "argument --hidden: invalid int value"),
    ("epochs-fractional", ["--epochs", "1.5"], "argument --epochs: invalid int value"),
    ("nprocs-fractional", ["--nprocs", "2.5"], "argument --nprocs: invalid int value"),
    ("dropout-not-a-number", ["--dropout", "x"], "argument --dropout: invalid float value"),
    ("timeout-not-a-number", ["--timeout", "soon"], "argument --timeout: invalid float value"),
    ("seed-not-a-number", ["--seed", "x"], "argument --seed: invalid int value"),
    ("algo-unknown", ["--algo", "9d"], "argument --algo: invalid choice"),
    ("order-unknown", ["--order", "sideways"], "argument --order: invalid choice"),
    ("comm-unknown", ["--comm", "sparsest"], "argument --comm: invalid choice"),
    ("reorder-unknown", ["--reorder", "hilbert"], "argument --reorder: invalid choice"),
    ("unknown-flag", ["--bogus"], "unrecognized arguments: --bogus"),
    ("dataset-without-value", ["--dataset"], "expected one argument"),
    ("quiet-and-progress", ["--quiet", "--progress"], "not allowed with argument"),
    # multi-host: the network interface and the rendezvous endpoint (issue 19)
    ("interface-unknown", ["--interface", "nope0"], "no network interface of that name"),
    ("interface-unknown-distributed", ["--interface", "nope0", "--algo", "1d", "--nprocs", "2"],
     "no network interface of that name"),
    ("netcheck-endpoint-without-port", ["netcheck", "--rdzv-endpoint", "127.0.0.1"], "expected HOST:PORT"),
    ("netcheck-port-zero", ["netcheck", "--rdzv-endpoint", "127.0.0.1:0"], "port in 1..65535"),
    ("netcheck-port-too-large", ["netcheck", "--rdzv-endpoint", "127.0.0.1:70000"], "port in 1..65535"),
    ("netcheck-interface-unknown", ["netcheck", "--rdzv-endpoint", "127.0.0.1:29400", "--interface", "nope0"],
     "no network interface of that name"),
    ("netcheck-without-endpoint", ["netcheck"], "--rdzv-endpoint"),
    ("data-root-missing", ["--data-root", "{tmp}/no-root", "--dataset", "cora"], "not found under data root"),
    # unwritable metrics paths
    ("metrics-out-is-a-directory", ["--metrics-out", "{tmp}/out"], "is a directory"),
    ("metrics-out-folder-missing", ["--metrics-out", "{tmp}/missing/m.json"], "does not exist"),
    ("metrics-out-parent-is-a-file", ["--metrics-out", f"{REPO_ROOT / 'README.md'}/m.json"], "is not a folder"),
    # refused before training: the early check probes the folder with a temporary file (root included)
    ("metrics-out-unwritable-filesystem", ["--metrics-out", "/sys/gridgnn-metrics.json"], "is not writable"),
    # --tensorboard DIR: refused before training, by the launcher too
    ("tensorboard-is-a-file", ["--tensorboard", f"{REPO_ROOT / 'README.md'}"], "--tensorboard"),
    ("tensorboard-unwritable-filesystem", ["--tensorboard", "/sys/gridgnn-tb", "--algo", "1d", "--nprocs", "2"],
     "--tensorboard: cannot write into folder"),
    ("tensorboard-empty", ["--tensorboard", ""], "tensorboard must be a folder name"),
    # gridgnn info
    ("info-without-dataset", ["info"], "DATASET"),
    ("info-negative-seed", ["info", "--seed", "-3", "csbm"], "seed must be a non-negative integer"),
    ("info-unknown-flag", ["info", "--json", "--bogus", "csbm"], "unrecognized arguments: --bogus"),
    ("no-command", [], "choose a command"),
    ("unknown-command", ["frobnicate"], "invalid choice: 'frobnicate'"),
]

# Checkpoint flags; damaged, tampered and foreign checkpoints (truncated data or metadata, a flipped byte, a
# missing file or manifest, a pickle asking for os.system, another model's or dataset's checkpoint) are in
# tests/train/test_checkpoint.py with the same contract, plus "existing checkpoints stay byte-identical".
CHECKPOINT_CASES = [
    ("checkpoint-resume-without-dir", ["--resume"], "--checkpoint-dir"),
    ("checkpoint-dir-is-a-file", ["--checkpoint-dir", f"{REPO_ROOT / 'README.md'}"], "not a folder"),
    ("checkpoint-dir-under-a-file", ["--checkpoint-dir", f"{REPO_ROOT / 'README.md'}/ck"], "not a folder"),
    ("checkpoint-every-zero", ["--checkpoint-dir", "{tmp}/ck", "--checkpoint-every", "0"], "checkpoint_every"),
    ("checkpoint-keep-zero", ["--checkpoint-dir", "{tmp}/ck", "--keep-checkpoints", "0"], "keep_checkpoints"),
    ("checkpoint-every-not-a-number", ["--checkpoint-every", "often"], "invalid int value"),
    # issue 38: a folder the system will not create names the flag; a model file to start from must exist
    ("checkpoint-dir-under-proc", ["--checkpoint-dir", "/proc/gridgnn-ck"], "--checkpoint-dir: cannot keep"),
    ("init-from-missing", ["--init-from", "{tmp}/none.pt"], "--init-from: model file"),
    ("init-from-not-a-model-file", ["--init-from", f"{REPO_ROOT / 'README.md'}"], "--init-from: model file"),
    ("log-every-negative", ["--log-every", "-1"], "argument --log-every"),
    ("log-every-nan", ["--log-every", "nan"], "argument --log-every"),
]
# Outputs and the memory guard (issue 16); bad model files for `gridgnn predict` are in tests/train/test_use_trained.py.
OUTPUT_CASES = [
    ("predictions-out-unknown-suffix", ["--predictions-out", "{tmp}/p.txt"], "must end in .npy"),
    ("predictions-out-folder-missing", ["--predictions-out", "{tmp}/missing/p.npy"], "does not exist"),
    ("embeddings-out-parent-is-a-file", ["--embeddings-out", f"{REPO_ROOT / 'README.md'}/e.csv"], "is not a folder"),
    ("embedding-layer-beyond-the-model", ["--embedding-layer", "3"], "embedding_layer must be at most 2"),
    ("embedding-layer-zero", ["--embedding-layer", "0"], "embedding_layer must be at least 1"),
    ("save-model-folder-missing", ["--save-model", "{tmp}/missing/m.pt"], "does not exist"),
    ("weights-unknown", ["--weights", "middle"], "argument --weights: invalid choice"),
    ("memory-per-proc-too-small", ["--memory-per-proc", "1KiB"], "not enough memory"),
    ("memory-per-proc-not-a-size", ["--memory-per-proc", "lots"], "memory size 'lots'"),
    ("memory-per-proc-too-small-distributed", ["--memory-per-proc", "1KiB", "--algo", "1d", "--nprocs", "2"],
     "not enough memory"),
]
FLAG_CASES = FLAG_CASES + CHECKPOINT_CASES + OUTPUT_CASES

# Model kinds (issue 17): an unknown kind, and each kind's options given to another kind.
MODEL_CASES = [
    ("model-unknown", ["--model", "transformer"], "argument --model: invalid choice"),
    ("sage-normalize-without-sage", ["--sage-normalize"], "applies to --model sage"),
    ("gin-eps-without-gin", ["--model", "sage", "--gin-eps", "0.5"], "apply to --model gin"),
    ("gin-train-eps-without-gin", ["--gin-train-eps"], "apply to --model gin"),
    ("gin-norm-without-gin", ["--model", "gat", "--gin-norm", "layer"], "--gin-norm applies to --model gin and gine"),
    ("gin-norm-unknown", ["--model", "gin", "--gin-norm", "batch"], "argument --gin-norm: invalid choice"),
    ("gin-eps-nan", ["--model", "gin", "--gin-eps", "nan"], "gin_eps must be a finite number"),
    ("gin-eps-not-a-number", ["--model", "gin", "--gin-eps", "x"], "argument --gin-eps: invalid float value"),
    ("heads-zero", ["--model", "gat", "--heads", "0"], "heads must be at least 1"),
    ("heads-huge", ["--model", "gat", "--heads", "5000"], "heads must be at most 1024"),
    ("heads-not-a-number", ["--model", "gat", "--heads", "two"], "argument --heads: invalid int value"),
    ("heads-without-gat", ["--model", "sage", "--heads", "4"], "apply to --model gat"),
    ("output-heads-zero", ["--model", "gat", "--output-heads", "0"], "output_heads must be at least 1"),
    ("attn-dropout-one", ["--model", "gat", "--attn-dropout", "1"], "attn_dropout"),
    ("attn-dropout-negative", ["--model", "gat", "--attn-dropout", "-0.1"], "attn_dropout"),
    ("attn-dropout-nan", ["--model", "gat", "--attn-dropout", "nan"], "attn_dropout"),
    ("attn-dropout-without-gat", ["--attn-dropout", "0.5"], "apply to --model gat"),
]
FLAG_CASES = FLAG_CASES + MODEL_CASES
