"""Bad input never gives a traceback: one line ``gridgnn: error: ...`` on stderr and exit status 2."""

import os
import pickle
import shutil
import subprocess
import sys
import zipfile

import pytest
from model_helpers import REPO_ROOT, shared_datasets

from gridgnn.cli.main import main


class _Malicious:
    """Pickles as a call to os.system; a safe loader must refuse it before calling anything."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def _cora_copy(tmp_path):
    folder = tmp_path / "cora"
    shutil.copytree(shared_datasets() / "cora", folder)
    return folder


def _write_ogb(tmp_path, feat="1,0\n0,1\n1,1\n", label="0\n1\n0\n", edges="0,1\n1,2\n"):
    raw = tmp_path / "ogb" / "raw"
    raw.mkdir(parents=True)
    (raw / "edge.csv").write_text(edges)
    (raw / "node-feat.csv").write_text(feat)
    (raw / "node-label.csv").write_text(label)
    return raw.parent


def _missing_planetoid_file(tmp_path):
    folder = _cora_copy(tmp_path)
    (folder / "ind.cora.tx").unlink()
    return folder, "ind.cora.tx"


def _truncated_pickle(tmp_path):
    folder = _cora_copy(tmp_path)
    data = (folder / "ind.cora.allx").read_bytes()
    (folder / "ind.cora.allx").write_bytes(data[: len(data) // 2])
    return folder, "ind.cora.allx"


def _truncated_zip(tmp_path):
    source = next((shared_datasets() / "amazon-photo").glob("*.zip"))
    target = tmp_path / source.name
    target.write_bytes(source.read_bytes()[:5000])
    return target, source.name


def _truncated_npz_member(tmp_path):
    target = tmp_path / "graph.npz"
    with zipfile.ZipFile(target, "w") as archive:
        archive.writestr("adj_data.npy", b"\x93NUMPY garbage")
    return target, "graph.npz"


def _disallowed_pickle(tmp_path):
    folder = _cora_copy(tmp_path)
    marker = tmp_path / "pwned"
    (folder / "ind.cora.x").write_bytes(pickle.dumps(_Malicious(marker), protocol=2))
    return folder, "ind.cora.x"


def _file(name, text):
    def make(tmp_path):
        (tmp_path / name).write_text(text)
        return tmp_path / name, name
    return make


CASES = {
    "missing file": lambda tmp_path: (tmp_path / "absent.mtx", "absent.mtx"),
    "missing planetoid file": _missing_planetoid_file,
    "truncated pickle": _truncated_pickle,
    "truncated zip": _truncated_zip,
    "truncated npz": _truncated_npz_member,
    "unknown format": _file("graph.xyz", "1 2\n"),
    "vertex id out of range": _file("g.mtx", "%%MatrixMarket matrix coordinate pattern general\n3 3 2\n1 2\n4 1\n"),
    "negative vertex id": _file("g.edges", "0 1\n-1 2\n"),
    "empty graph": _file("empty.edges", "% nothing here\n"),
    "truncated mtx": _file("t.mtx", "%%MatrixMarket matrix coordinate pattern general\n3 3 5\n1 2\n"),
    "nan features": lambda tmp_path: (_write_ogb(tmp_path, feat="1,0\nnan,1\n1,1\n"), "node-feat"),
    "inf features": lambda tmp_path: (_write_ogb(tmp_path, feat="1,0\ninf,1\n1,1\n"), "node-feat"),
    "label out of range": lambda tmp_path: (_write_ogb(tmp_path, label="0\n-3\n1\n"), "node-label"),
    "mismatched lengths": lambda tmp_path: (_write_ogb(tmp_path, label="0\n1\n"), "node-label"),
    "disallowed pickle class": _disallowed_pickle,
}


def _one_error_line(captured):
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("gridgnn: error: ") and "Traceback" not in captured.err
    return lines[0]


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("command", ["info", "train"])
def test_bad_dataset_gives_one_line_and_exit_2(case, command, tmp_path, capsys):
    path, fragment = CASES[case](tmp_path)
    argv = ["info", str(path)] if command == "info" else ["train", "--dataset", str(path), "--epochs", "1"]
    assert main(argv) == 2
    line = _one_error_line(capsys.readouterr())
    assert fragment in line
    assert not (tmp_path / "pwned").exists()


@pytest.mark.parametrize("argv, fragment", [
    (["train", "--dataset", "pubmed"], "cora, citeseer"),
    (["train", "--dataset", "csbm:nodes=abc"], "nodes"),
    (["train", "--dataset", "csbm:colours=3"], "colours"),
    (["train", "--epochs", "ten"], "--epochs"),
    (["train", "--epochs", "0"], "epochs"),
    (["train", "--dropout", "1.5"], "dropout"),
    (["train", "--lr", "-1"], "lr"),
    (["train", "--order", "sideways"], "--order"),
    (["train", "--algo", "9d"], "--algo"),
    (["train", "--quiet", "--progress"], "--progress"),
    (["train", "--bogus"], "--bogus"),
    (["frobnicate"], "frobnicate"),
    ([], "command"),
    (["info"], "DATASET"),
])
def test_bad_flags_give_one_line_and_exit_2(argv, fragment, capsys):
    assert main(argv) == 2
    assert fragment in _one_error_line(capsys.readouterr())


def test_unwritable_metrics_path_fails_before_training(tmp_path, capsys):
    target = tmp_path / "missing-folder" / "m.json"
    assert main(["train", "--epochs", "100000", "--metrics-out", str(target)]) == 2
    assert "missing-folder" in _one_error_line(capsys.readouterr())


@pytest.mark.parametrize("args, fragment", [
    (["train", "--dataset", "pubmed"], "unknown dataset"),
    (["train", "--layers", "x"], "--layers"),
])
def test_errors_through_a_real_process(args, fragment, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run([sys.executable, "-m", "gridgnn", *args], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=120)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("gridgnn: error: ")
    assert fragment in done.stderr and "Traceback" not in done.stderr
