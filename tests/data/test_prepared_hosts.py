"""Every host verifies the prepared graph it reads: a stale or altered copy is refused with one line."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from gridgnn.data.prepared import MANIFEST, prepare_graph
from gridgnn.data.prepared_check import check_same_prepared_graph, folder_fingerprint, verify_files
from gridgnn.data.registry import load_dataset
from gridgnn.errors import DataError
from gridgnn.launch.spawn import run_workers


def _prepare(folder, seed: int = 0):
    return prepare_graph(load_dataset("csbm:nodes=200", seed=seed), folder)


def _check(rank: int, world: int, folders: list[str]) -> str:
    """Rank r reads folders[r] on host 'h<r>'; returns 'ok' or the error's message."""
    try:
        check_same_prepared_graph(folders[rank], tuple(f"h{r} (10.0.0.{r + 1})" for r in range(world)))
    except DataError as error:
        return str(error)
    return "ok"


def test_the_manifest_lists_every_file_and_a_fresh_folder_verifies(tmp_path):
    folder = _prepare(tmp_path / "g")
    files = json.loads((folder / MANIFEST).read_text())["files"]
    assert set(files) == {p.name for p in folder.glob("*.npy")} and all(len(e["sha256"]) == 64 for e in files.values())
    assert verify_files(folder) is None
    copy = shutil.copytree(folder, tmp_path / "copy")
    assert folder_fingerprint(copy) == folder_fingerprint(folder) and verify_files(copy) is None


def test_hosts_with_the_same_copy_pass_and_a_stale_or_altered_copy_is_refused_on_every_rank(tmp_path):
    shared = _prepare(tmp_path / "shared")
    same = shutil.copytree(shared, tmp_path / "same")
    stale = _prepare(tmp_path / "stale", seed=1)  # another preparation (another seed: another graph)
    altered = shutil.copytree(shared, tmp_path / "altered")
    labels = np.load(altered / "labels.npy")
    labels[0] = (labels[0] + 1) % (labels.max() + 1)
    np.save(altered / "labels.npy", labels)  # same size, other content, the manifest unchanged
    short = shutil.copytree(shared, tmp_path / "short")
    with open(short / "adj_data.npy", "r+b") as handle:
        handle.truncate(handle.seek(0, 2) - 4)
    outcomes = run_workers(_check, 2, [str(shared), str(same)]) + \
        run_workers(_check, 2, [str(shared), str(stale)]) + run_workers(_check, 2, [str(shared), str(altered)]) + \
        run_workers(_check, 2, [str(shared), str(short)])
    assert outcomes[:2] == ["ok", "ok"]
    for pair, words in ((outcomes[2:4], "is not the one rank 0 reads"), (outcomes[4:6], "labels.npy differs"),
                        (outcomes[6:8], "adj_data.npy has")):
        assert pair[0] == pair[1]  # every rank refuses, with the same line
        assert words in pair[0] and "on host h1 (10.0.0.2) (rank 1)" in pair[0] and "\n" not in pair[0]


def test_a_single_process_verifies_its_own_copy(tmp_path):
    folder = _prepare(tmp_path / "g")
    (folder / "test_mask.npy").write_bytes(b"")
    with pytest.raises(DataError, match="test_mask.npy has 0 bytes"):
        check_same_prepared_graph(folder, ("h0",))
