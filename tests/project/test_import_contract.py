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
    assert contract.layer_of("gridgnn.train.run") > contract.layer_of("gridgnn.nn.gcn")


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
