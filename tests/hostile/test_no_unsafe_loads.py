"""No unrestricted deserialization anywhere in the package (issue 6): a static check of gridgnn's source for
loads that can run code, and a test that the check itself catches them."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
SAFE_PICKLE_MODULE = Path("gridgnn/data/readers/safe_pickle.py")


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _keyword_is(call: ast.Call, name: str, value: object) -> bool:
    return any(k.arg == name and isinstance(k.value, ast.Constant) and k.value.value is value for k in call.keywords)


def unsafe_loads(source: str, filename: str) -> list[str]:
    """Deserializing calls in ``source`` that can run code: ``torch.load`` without ``weights_only=True``,
    ``np.load`` without ``allow_pickle=False``, and pickle/marshal/shelve/dill/joblib loads outside the
    restricted unpickler's module."""
    found = []
    trusted = Path(filename).as_posix().endswith(SAFE_PICKLE_MODULE.as_posix())
    for node in ast.walk(ast.parse(source, filename)):
        where = f"{filename}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.ImportFrom) and node.module in ("pickle", "_pickle", "cPickle", "dill",
                                                                "cloudpickle", "marshal", "shelve", "joblib"):
            found.append(f"{where}: from {node.module} import ...")
        if isinstance(node, ast.ImportFrom) and node.module in ("torch", "numpy") and any(
                alias.name == "load" for alias in node.names):
            found.append(f"{where}: from {node.module} import load")
        if not isinstance(node, ast.Call):
            continue
        name = _dotted(node.func)
        if name in ("torch.load", "torch.serialization.load") and not _keyword_is(node, "weights_only", True):
            found.append(f"{where}: {name}( without weights_only=True")
        elif name in ("np.load", "numpy.load") and not _keyword_is(node, "allow_pickle", False):
            found.append(f"{where}: {name}( without allow_pickle=False")
        elif re.fullmatch(r"(c?[Pp]ickle|_pickle|dill|cloudpickle|joblib|marshal|shelve)\.(loads?|Unpickler|open)",
                          name) and not trusted:
            found.append(f"{where}: {name}( outside {SAFE_PICKLE_MODULE}")
    return found


def test_the_unsafe_load_checker_catches_unsafe_calls() -> None:
    snippet = (
        "import pickle, torch, numpy as np\n"
        "torch.load(path)\n"
        "torch.load(path, weights_only=False)\n"
        "torch.load(\n    path,\n    map_location='cpu',\n)\n"
        "np.load(path)\n"
        "np.load(path, allow_pickle=True)\n"
        "pickle.loads(data)\n"
        "pickle.Unpickler(file).load()\n"
        "from pickle import load\n"
        "torch.load(path, weights_only=True)\n"
        "np.load(path, allow_pickle=False)\n"
    )
    assert len(unsafe_loads(snippet, "gridgnn/x.py")) == 8
    assert unsafe_loads("import pickle\npickle.Unpickler\nclass U(pickle.Unpickler):\n    pass\n",
                        "gridgnn/data/readers/safe_pickle.py") == []


def test_package_source_has_no_unrestricted_loads() -> None:
    files = sorted((REPO_ROOT / "gridgnn").rglob("*.py"))
    assert files
    found = [hit for path in files
             for hit in unsafe_loads(path.read_text(encoding="utf-8"), str(path.relative_to(REPO_ROOT)))]
    assert found == [], "unrestricted deserialization:\n" + "\n".join(found)
