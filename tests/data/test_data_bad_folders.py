"""Bad Planetoid and OGB folders raise a one-line DataError naming the file, never a raw exception."""

from __future__ import annotations

import gzip
import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest
from data_error_helpers import fails, load

from gridgnn.data.readers.planetoid import read_planetoid

DATA = Path(__file__).resolve().parents[3] / "shared" / "datasets"
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"no shared datasets at {DATA}")


_fails, _load = fails, load


# --- Planetoid pickles ----------------------------------------------------------------------------------


def _planetoid_copy(tmp_path: Path) -> Path:
    folder = tmp_path / "cora"
    shutil.copytree(DATA / "cora", folder, ignore=shutil.ignore_patterns("README.md"))
    return folder


@needs_data
def test_planetoid_missing_and_truncated_files(tmp_path: Path) -> None:
    folder = _planetoid_copy(tmp_path)
    allx = folder / "ind.cora.allx"
    allx.write_bytes(allx.read_bytes()[:1000])
    _fails(lambda: read_planetoid(folder), allx, "cannot read pickle")
    (folder / "ind.cora.tx").unlink()
    _fails(lambda: read_planetoid(folder), folder / "ind.cora.tx", "file not found")


@needs_data
def test_planetoid_forbidden_class_is_never_called(tmp_path: Path) -> None:
    folder = _planetoid_copy(tmp_path)
    marker = tmp_path / "pwned"
    payload = f"cos\nsystem\n(S'touch {marker}'\ntR.".encode()
    (folder / "ind.cora.graph").write_bytes(payload)
    _fails(lambda: read_planetoid(folder), folder / "ind.cora.graph", "forbidden class os.system")
    assert not marker.exists()
    (folder / "ind.cora.graph").write_bytes(pickle.dumps({0: [1]}, protocol=2) + b"")
    (folder / "ind.cora.y").write_bytes(pickle.dumps(np.eye(3), protocol=4))
    _fails(lambda: read_planetoid(folder), folder / "ind.cora.y", "3 rows but x has 140")


@needs_data
@pytest.mark.parametrize(
    ("part", "content", "match"),
    [
        ("test.index", "1708\n-4\n", "negative test node id -4"),
        ("test.index", "", "no test node ids"),
        ("graph", {0: [1], 5: [99999]}, "vertex id 99999 is outside"),
        ("graph", [1, 2], "expected a dict of adjacency lists"),
        ("ally", np.zeros((1708, 3)), "7 columns but ally has 3"),
        ("tx", np.zeros(4), "expected a sparse matrix"),
    ],
)
def test_planetoid_bad_parts(tmp_path: Path, part: str, content: object, match: str) -> None:
    folder = _planetoid_copy(tmp_path)
    target = folder / f"ind.cora.{part}"
    if isinstance(content, str):
        target.write_text(content)
    else:
        target.write_bytes(pickle.dumps(content, protocol=4))
    _fails(lambda: read_planetoid(folder), folder, match)


# --- OGB folders ----------------------------------------------------------------------------------------


def _ogb(tmp_path: Path, **files: str) -> Path:
    contents = {"edge": "0,1\n1,2\n", "node-feat": "1,2\n3,4\n5,6\n", "node-label": "0\n1\n0\n", **files}
    for stem, text in contents.items():
        if text is not None:
            path = tmp_path / "ogb" / "raw" / f"{stem}.csv.gz"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(gzip.compress(text.encode()))
    return tmp_path / "ogb"


@pytest.mark.parametrize(
    ("files", "culprit", "match"),
    [
        ({"edge": "0,1\n1,7\n"}, "edge.csv.gz", r"vertex id 7 is outside \[0, 3\)"),
        ({"edge": ""}, "edge.csv.gz", "expected one 'src,dst' pair"),
        ({"node-feat": "1,2\n3,nan\n5,6\n"}, "node-feat.csv.gz", "NaN or inf"),
        ({"node-label": "0\n1\n"}, "node-label.csv.gz", "2 labels for 3 nodes"),
        ({"node-label": "nan\nnan\nnan\n"}, "node-label.csv.gz", "no vertex has a target"),  # one NaN: unlabelled
        ({"node-label": "0,1\n1,0\n0,inf\n"}, "node-label.csv.gz", "targets contain inf"),
        ({"num-node-list": "0\n"}, "num-node-list.csv.gz", "one positive node count"),
    ],
)
def test_bad_ogb_folders(tmp_path: Path, files: dict, culprit: str, match: str) -> None:
    folder = _ogb(tmp_path, **files)
    _fails(_load(folder), folder / "raw" / culprit, match)


def test_bad_ogb_split_and_truncated_gzip(tmp_path: Path) -> None:
    folder = _ogb(tmp_path)
    split = folder / "split" / "random"
    split.mkdir(parents=True)
    for part, ids in (("train", "0\n"), ("valid", "1\n"), ("test", "9\n")):
        (split / f"{part}.csv.gz").write_bytes(gzip.compress(ids.encode()))
    _fails(_load(folder), split / "test.csv.gz", r"node id 9 outside \[0, 3\)")
    feat = folder / "raw" / "node-feat.csv.gz"
    feat.write_bytes(feat.read_bytes()[:-6])
    _fails(_load(folder), feat, "cannot read node-feat")
    (folder / "raw" / "edge.csv.gz").unlink()
    _fails(_load(folder), folder, r"lacks raw/edge.csv\(.gz\)")
