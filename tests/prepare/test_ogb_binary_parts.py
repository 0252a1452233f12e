"""OGB's binary layout (``raw/data.npz``, ogbn-papers100M's) prepared by P processes, each streaming its ranges of
the compressed arrays (`gridgnn.prepare.ogb_parts`, `gridgnn.data.readers.npz_rows`): the folder equals the
one-process folder (arrays, digest, meta) with and without labels and split, directed or not, multilabel with
unlabelled rows; what one process must prepare is refused in one line; the streamed reader returns the rows
a full load gives."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest
from test_distributed_prepare import assert_same_graph, distributed, one_process

from gridgnn.data.readers.npz_rows import NpzMember
from gridgnn.errors import ConfigError
from gridgnn.prepare.ogb_parts import ogb_layout


def ogb_folder(root: Path, *, n: int = 300, edges: int = 2400, labels: str | None = "classes", split: bool = True,
               extra: dict | None = None, seed: int = 0) -> Path:
    """A small OGB folder in the binary layout: random edges (a few isolated vertices, duplicates and
    self-loops), node features, labels (``classes``: 5 classes as floats, some NaN; ``multilabel``: 3 columns of
    0/1 with an unlabelled row), and a split folder naming labelled vertices."""
    rng = np.random.default_rng(seed)
    folder = root / "ogbn_tiny"
    (folder / "raw").mkdir(parents=True)
    edge_index = rng.integers(0, n - 5, size=(2, edges))  # vertices n-5..n-1: isolated
    edge_index[:, :20] = edge_index[:, 20:40]  # duplicates
    edge_index[1, 40:45] = edge_index[0, 40:45]  # self-loops
    arrays = {"edge_index": edge_index, "num_nodes_list": np.array([n]), "num_edges_list": np.array([edges]),
              "node_feat": rng.normal(size=(n, 7)).astype(np.float32)}
    np.savez_compressed(folder / "raw" / "data.npz", **arrays, **(extra or {}))
    unlabelled = np.zeros(n, dtype=bool)
    if labels == "classes":
        values = rng.integers(0, 5, size=(n, 1)).astype(np.float64)
        values[::7] = np.nan
        unlabelled = np.isnan(values[:, 0])
        np.savez_compressed(folder / "raw" / "node-label.npz", node_label=values)
    elif labels == "multilabel":
        values = rng.integers(0, 2, size=(n, 3)).astype(np.float32)
        values[3] = np.nan
        unlabelled[3] = True
        np.savez_compressed(folder / "raw" / "node-label.npz", node_label=values)
    if split:
        kind = folder / "split" / "time"
        kind.mkdir(parents=True)
        ids = rng.permutation(np.flatnonzero(~unlabelled))
        for part, chosen in zip(("train", "valid", "test"), np.array_split(ids, [len(ids) // 2, 3 * len(ids) // 4]),
                                strict=True):
            with gzip.open(kind / f"{part}.csv.gz", "wt") as out:
                out.write("\n".join(str(int(v)) for v in chosen) + "\n")
    return folder


@pytest.mark.parametrize("nprocs, shards, labels, split, directed", [
    (2, 2, "classes", True, False),
    (3, 5, "classes", False, True),
    (2, 3, "multilabel", True, False),
    (2, 2, None, False, False),
])
def test_an_ogb_binary_folder_prepared_by_p_processes_equals_the_one_process_folder(tmp_path, nprocs, shards, labels,
                                                                                    split, directed):
    source = str(ogb_folder(tmp_path, labels=labels, split=split))
    expected = one_process(tmp_path, source, "gcn", directed=directed, seed=1)
    actual = distributed(tmp_path, source, "gcn", nprocs, shards, directed=directed, seed=1)
    assert_same_graph(expected, actual)


def test_a_random_order_of_an_ogb_binary_folder(tmp_path):
    from test_distributed_prepare import assert_same_reordered_graph, one_process_reordered

    source = str(ogb_folder(tmp_path))
    expected = one_process_reordered(tmp_path, source, "sage", 2, seed=3)
    assert_same_reordered_graph(expected, distributed(tmp_path, source, "sage", 2, 3, reorder="random", parts=2,
                                                      seed=3))


@pytest.mark.parametrize("extra, words", [
    ({"edge_feat": np.ones((2400, 2), dtype=np.float32)}, "edge features"),
])
def test_what_one_process_must_prepare_is_refused_in_one_line(tmp_path, extra, words):
    with pytest.raises(ConfigError, match=words):
        ogb_layout(ogb_folder(tmp_path, extra=extra))


def test_a_folder_without_node_features_is_refused(tmp_path):
    folder = ogb_folder(tmp_path)
    with np.load(folder / "raw" / "data.npz") as arrays:
        kept = {k: arrays[k] for k in arrays.files if k != "node_feat"}
    np.savez_compressed(folder / "raw" / "data.npz", **kept)
    with pytest.raises(ConfigError, match="no node_feat"):
        ogb_layout(folder)


def test_the_streamed_member_reads_the_rows_a_load_gives(tmp_path):
    rng = np.random.default_rng(5)
    table = rng.normal(size=(1000, 3)).astype(np.float32)
    pairs = rng.integers(0, 10**9, size=(2, 5000))
    np.savez_compressed(tmp_path / "a.npz", table=table, pairs=pairs)
    member = NpzMember(tmp_path / "a.npz", "table")
    assert member.shape == (1000, 3) and member.dtype == np.float32
    for a, b in [(0, 10), (10, 500), (999, 1000), (3, 7), (500, 500)]:  # forward, then behind the stream
        np.testing.assert_array_equal(member[a:b], table[a:b])
    flat = NpzMember(tmp_path / "a.npz", "pairs")
    np.testing.assert_array_equal(flat.flat(4990, 10), pairs[0, 4990:])
    np.testing.assert_array_equal(flat.flat(5000 + 4990, 10), pairs[1, 4990:])


@pytest.mark.parametrize("damage", ["truncated", "corrupt"])
def test_a_damaged_archive_stops_every_process_in_one_line(tmp_path, damage):
    """A truncated archive fails at planning; bytes flipped near the end of ``edge_index`` fail only in the
    last process's range (a bad CRC there), and every process stops with its line, no folder left."""
    import subprocess
    import sys

    folder = ogb_folder(tmp_path, n=3000, edges=200_000)
    data = folder / "raw" / "data.npz"
    raw = bytearray(data.read_bytes())
    if damage == "truncated":
        raw = raw[:len(raw) // 2]
    else:
        import zipfile

        with zipfile.ZipFile(data) as archive:
            info = archive.getinfo("edge_index.npy")
        end = info.header_offset + 30 + len(info.filename) + len(info.extra) + info.compress_size
        for k in range(end - 40, end - 32):
            raw[k] ^= 0xFF
    data.write_bytes(bytes(raw))
    out = tmp_path / "out"
    run = subprocess.run([sys.executable, "-m", "gridgnn", "prepare", str(folder), "--out", str(out), "--nprocs", "2"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr and len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert str(data) in run.stderr
    assert not out.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith("out")]
