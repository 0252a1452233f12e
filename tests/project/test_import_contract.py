"""The import contract of scripts/import_contract.py holds on the package, and the checker finds what it
must (a layer breach, a cycle, a pure module reaching for torch.distributed)."""

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "import_contract.py"
spec = importlib.util.spec_from_file_location("import_contract", SCRIPT)
contract = importlib.util.module_from_spec(spec)
spec.loader.exec_module(contract)


def test_the_package_keeps_its_layers_and_has_no_cycles():
    assert contract.breaches() == []


def test_layers_follow_the_longest_prefix():
    assert contract.layer_of("gridgnn.grid.shape") == 1 and contract.layer_of("gridgnn.grid.comm") == 2
    assert contract.layer_of("gridgnn.cost.epoch_model") == 1 and contract.layer_of("gridgnn.cli.main") == 7
    assert contract.layer_of("gridgnn.train.run.training") > contract.layer_of("gridgnn.nn.gcn")


def test_cycles_are_found_and_a_chain_is_not_a_cycle():
    assert contract._cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []
    assert contract._cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]


def test_a_breach_in_a_module_is_reported_with_its_line(tmp_path, monkeypatch):
    package = tmp_path / "gridgnn"
    (package / "cost").mkdir(parents=True)
    (package / "train").mkdir()
    for init in (package, package / "cost", package / "train"):
        (init / "__init__.py").write_text("")
    (package / "cost" / "model.py").write_text(
        "import torch.distributed\n\n\ndef f():\n    from gridgnn.train.loop import g\n")
    (package / "train" / "loop.py").write_text("from gridgnn.cost.model import f\n")
    monkeypatch.setattr(contract, "PACKAGE", package)
    found = contract.breaches()
    assert any(line.startswith("gridgnn/cost/model.py:1: pure module") for line in found), found
    assert any(line.startswith("gridgnn/cost/model.py:5: gridgnn.cost.model (layer 1) imports gridgnn.train.loop")
               for line in found), found
    assert "import cycle: gridgnn.cost.model -> gridgnn.train.loop -> gridgnn.cost.model" in found


def _package(tmp_path, files: dict[str, str]):
    """A throwaway ``gridgnn`` package of ``files`` (relative path -> source), every folder a package."""
    package = tmp_path / "gridgnn"
    for rel, source in files.items():
        path = package / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
    for folder in [package, *[p for p in package.rglob("*") if p.is_dir()]]:
        (folder / "__init__.py").touch()
    return package


LAZY = "def stages(self):\n    from gridgnn.{pkg}.attention_x import StagesX\n    return StagesX(self)\n"
BACK = ("from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from gridgnn.{pkg}.spmm_x import SpMMX\n\n\n"
        "class StagesX:\n    def __init__(self, spmm: 'SpMMX'):\n        self.spmm = spmm\n")


def test_a_circle_through_a_lazy_and_a_type_checking_import_in_spmm_is_reported(tmp_path, monkeypatch):
    package = _package(tmp_path, {"spmm/spmm_x.py": LAZY.format(pkg="spmm"),
                                  "spmm/attention_x.py": BACK.format(pkg="spmm")})
    monkeypatch.setattr(contract, "PACKAGE", package)
    assert contract.breaches() == [
        "import cycle: gridgnn.spmm.attention_x -> gridgnn.spmm.spmm_x -> gridgnn.spmm.attention_x"]


def test_a_type_checking_import_that_goes_one_way_is_no_circle(tmp_path, monkeypatch):
    package = _package(tmp_path, {"spmm/spmm_x.py": "X = 1\n",
                                  "spmm/attention_x.py": BACK.format(pkg="spmm")})
    monkeypatch.setattr(contract, "PACKAGE", package)
    assert contract.breaches() == []
    imports = contract.imports_of(package / "spmm" / "attention_x.py", contract.module_files())
    assert imports == [("typing", 1)]  # the layer check still reads outside TYPE_CHECKING only
    assert contract.imports_of(package / "spmm" / "attention_x.py", contract.module_files(),
                               type_checking=True) == [("gridgnn.spmm.spmm_x", 4)]


def test_a_room_of_train_importing_a_later_room_is_a_breach(tmp_path, monkeypatch):
    package = tmp_path / "gridgnn"
    for room in ("", "train", "train/loop", "train/run"):
        (package / room).mkdir(parents=True, exist_ok=True)
        (package / room / "__init__.py").write_text("")
    (package / "train" / "loop" / "step.py").write_text("def f():\n    from gridgnn.train.run.go import g\n")
    (package / "train" / "run" / "go.py").write_text("def g():\n    pass\n")
    monkeypatch.setattr(contract, "PACKAGE", package)
    assert contract.breaches() == ["gridgnn/train/loop/step.py:2: gridgnn.train.loop.step (room loop/) imports "
                                   "gridgnn.train.run.go (room run/, after it)"]
    (package / "train" / "loop" / "step.py").write_text("")
    (package / "train" / "run" / "go.py").write_text("from gridgnn.train.loop.step import f\n")
    assert contract.breaches() == []  # a later room builds on an earlier one
    assert contract.room_of("gridgnn.train.checkpoint.store") == ("gridgnn.train", 1)
    assert contract.room_of("gridgnn.train") is None and contract.room_of("gridgnn.nn.gcn") is None
