"""Bad files (edge lists, Matrix Market, npz/zip, native) raise a one-line DataError naming the file."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import numpy as np
import pytest
from data_error_helpers import benchmark_arrays, fails, load

from gridgnn.data import load_dataset, save_graph
from gridgnn.data.generators import csbm

_fails, _load = fails, load


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


# --- edge lists, Matrix Market, unknown formats ---------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", "edge list is empty"),
        ("# only a comment\n%\n", "edge list is empty"),
        ("1 2\n-3 4\n", "negative vertex id -3"),
        ("1 2\n3 x\n", "could not convert string 'x'"),
        ("1 2\n1.5 2\n", "could not convert string '1.5'"),
        ("1 2\n3\n", "invalid column index"),
    ],
)
def test_bad_edge_lists(tmp_path: Path, text: str, match: str) -> None:
    path = _write(tmp_path / "e.txt", text)
    _fails(_load(path), path, match)


def test_edge_list_id_below_base(tmp_path: Path) -> None:
    from gridgnn.data.readers.edgelist import read_edgelist

    path = _write(tmp_path / "e.txt", "0 1\n")
    _fails(lambda: read_edgelist(path, id_base=1), path, "below the id base 1")


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("%%MatrixMarket matrix coordinate pattern general\n3 3 2\n1 2\n4 1\n", "out of bounds"),
        ("%%MatrixMarket matrix coordinate pattern general\n3 3 3\n1 2\n", "Truncated"),
        ("%%MatrixMarket matrix coordinate pattern general\n3 4 1\n1 2\n", "must be square"),
        ("%%MatrixMarket matrix coordinate real general\n2 2 1\n1 2 nan\n", "NaN or inf"),
        ("%%MatrixMarket matrix coordinate pattern general\n0 0 0\n", "empty"),
        ("not a matrix\n", "cannot read Matrix Market"),
    ],
)
def test_bad_matrix_market(tmp_path: Path, text: str, match: str) -> None:
    path = _write(tmp_path / "m.mtx", text)
    _fails(_load(path), path, match)


def test_unknown_things(tmp_path: Path) -> None:
    path = _write(tmp_path / "graph.bin", "hello")
    _fails(_load(path), path, "unknown dataset format")
    message = _fails(lambda: load_dataset("pubmedd"), "pubmedd", "not a known name")
    assert "cora, citeseer, amazon-photo, amazon-computers, coauthor-cs, coauthor-physics" in message
    (tmp_path / "empty").mkdir()
    _fails(_load(tmp_path / "empty"), tmp_path / "empty", "no dataset found in folder")
    _fails(lambda: load_dataset("csbm:nodes=0"), "csbm", "need 1 <= classes <= nodes")


# --- npz / zip ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"labels": np.array([0, 1])}, "2 labels for 3 nodes"),
        ({"labels": np.array([0, -1, 0])}, "negative label -1"),
        ({"attr_matrix": np.array([[1, 0], [np.nan, 1], [0, 0]], np.float32)}, "features contain NaN or inf"),
        ({"attr_matrix": np.ones((2, 2), np.float32)}, r"features have shape \(2, 2\)"),
        ({"adj_indices": np.array([1, 0, 7, 1])}, "cannot read adj matrix"),
        ({"adj_shape": np.array([3, 4])}, "must be square"),
        ({"adj_indptr": None}, "missing key"),
        ({"adj_data": np.array([1, np.inf, 1, 1], np.float32)}, "edge weights contain NaN or inf"),
    ],
)
def test_bad_gnn_benchmark_npz(tmp_path: Path, overrides: dict, match: str) -> None:
    path = tmp_path / "g.npz"
    np.savez(path, **benchmark_arrays(**overrides))
    _fails(_load(path), path, match)


def test_corrupt_and_truncated_archives(tmp_path: Path) -> None:
    good = tmp_path / "good.npz"
    np.savez(good, **benchmark_arrays())
    truncated = tmp_path / "truncated.npz"
    truncated.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    _fails(_load(truncated), truncated, "cannot read npz")
    garbage = tmp_path / "garbage.zip"
    garbage.write_bytes(b"PK\x03\x04" + os.urandom(200))
    _fails(_load(garbage), garbage, "cannot read npz")
    two = tmp_path / "two.zip"
    with zipfile.ZipFile(two, "w") as archive:
        archive.write(good, "a.npz")
        archive.write(good, "b.npz")
    _fails(_load(two), two, "exactly one .npz inside")
    other = tmp_path / "other.npz"
    np.savez(other, something=np.arange(3))
    _fails(_load(other), other, "neither a gridgnn graph nor a gnn-benchmark")


def test_bad_native_files(tmp_path: Path) -> None:
    path = save_graph(csbm(nodes=50, classes=2, features=3), tmp_path / "g.npz")
    with np.load(path) as npz:
        arrays = dict(npz)
    cases = [
        ({"labels": arrays["labels"] + 5}, r"labels outside \[0, 2\)"),
        ({"features": np.full((50, 3), np.inf, np.float32)}, "features contain NaN or inf"),
        ({"format_version": np.asarray(99)}, "format version 99 is not supported"),
        ({"train_mask": arrays["train_mask"].astype(np.int8)}, "train_mask must be a bool array"),
        ({"adj_indices": arrays["adj_indices"] + 1000}, "cannot read adj matrix"),
    ]
    for index, (override, match) in enumerate(cases):
        bad = tmp_path / f"bad{index}.npz"
        np.savez(bad, **{**arrays, **override})
        _fails(_load(bad), bad, match)
