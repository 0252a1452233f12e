"""gridgnn's import contract (docs/architecture.md §4): one-way layers, no import cycles, pure index math stays pure.

Run by ``.ci/run`` and by ``tests/project/test_import_contract.py``; prints every breach (``file:line``) and exits 1,
or prints one line and exits 0. Imports inside functions count too: a lazy import is still a dependency.
Inside the packages of `NO_TYPE_CHECKING_CYCLES` (spmm/) an ``if TYPE_CHECKING:`` import counts for cycles as
well: a module that names another's class in its annotations while that one imports it back is a circle, even
when one side of it only runs under a type checker.

Layers, top to bottom; a module may import from its own layer and the layers above it (lower numbers):

    0  config, errors, files, safe_files, limits, c_output, gridgnn.__version__
    1  partition, cost/, grid.shape, grid.placement, grid.comm_records, sparse.layout, sparse.cut, sparse.cover,
       sparse.adjacency, run_spec   (pure index math, the cost model, the records it shares with the
       collectives and the frozen run spec: no torch.distributed)
    2  grid/, peer_errors          the process grid and its counted collectives
    3  sparse/                     local kernels and block containers
    4  spmm/, data/                one module per algorithm; graphs, readers, shards
    5  nn/, parallel/              models as single-device math; the grid's layout for them
    6  train/, plan/, launch/,     the training loop, the planner, the local launcher, the pictures of a
       report/                     finished run
    7  cli/, api                   entry points
    8  gridgnn (package root), __main__

Within layer 6, ``train/`` has four rooms in order (`ROOMS`): ``loop/``, ``checkpoint/``, ``outputs/``, ``run/``;
a module of one room imports only from its own room and those before it.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "gridgnn"

LAYERS = {
    "gridgnn.config": 0, "gridgnn.errors": 0, "gridgnn.files": 0, "gridgnn.limits": 0, "gridgnn.c_output": 0,
    "gridgnn.safe_files": 0,
    "gridgnn.partition": 1, "gridgnn.cost": 1, "gridgnn.grid.shape": 1, "gridgnn.grid.placement": 1,
    "gridgnn.grid.comm_records": 1,
    "gridgnn.sparse.layout": 1, "gridgnn.sparse.cut": 1, "gridgnn.sparse.adjacency": 1,
    "gridgnn.sparse.cover": 1, "gridgnn.data.bijection": 1,
    "gridgnn.run_spec": 1,
    "gridgnn.grid": 2, "gridgnn.peer_errors": 2,
    "gridgnn.sparse": 3,
    "gridgnn.spmm": 4, "gridgnn.data": 4,
    "gridgnn.nn": 5, "gridgnn.parallel": 5,
    "gridgnn.train": 6, "gridgnn.plan": 6, "gridgnn.launch": 6, "gridgnn.report": 6, "gridgnn.prepare": 6,
    "gridgnn.cli": 7, "gridgnn.api": 7,
    "gridgnn.__main__": 8, "gridgnn": 8,
}
"""Module or package -> layer; a module takes the layer of its longest listed prefix."""

ROOMS = {"gridgnn.train": ("loop", "checkpoint", "outputs", "run")}
"""Package -> its subpackages in order: a module of one imports only from its own and those before it."""

PURE = 1
"""Modules of this layer must not import torch.distributed (they run without a process group)."""

NO_TYPE_CHECKING_CYCLES = ("gridgnn.spmm",)
"""Packages where an import between two of their modules under ``if TYPE_CHECKING:`` counts for cycles."""


def layer_of(module: str) -> int:
    """The layer of ``module`` (``gridgnn.x.y``): that of its longest prefix in `LAYERS`."""
    name = module
    while name not in LAYERS:
        name = name.rsplit(".", 1)[0]
    return LAYERS[name]


def room_of(module: str) -> tuple[str, int] | None:
    """(package, index in its `ROOMS`) of the room ``module`` lies in; None outside every room."""
    for package, rooms in ROOMS.items():
        head = module.removeprefix(package + ".").split(".")[0] if module.startswith(package + ".") else None
        if head in rooms:
            return package, rooms.index(head)
    return None


def module_files() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name)."""
    modules = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules[name] = path
    return modules


def imports_of(path: Path, modules: dict[str, Path], *, type_checking: bool = False) -> list[tuple[str, int]]:
    """(imported module, line) for every import in ``path``, at any depth; ``TYPE_CHECKING`` blocks excepted,
    or only those with ``type_checking``. ``from gridgnn.x import name`` counts as ``gridgnn.x.name`` when
    that is a module."""
    found = []
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = _walk_type_checking(tree) if type_checking else _walk_outside_type_checking(tree)
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                found.append((full if full in modules else node.module, node.lineno))
        elif isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
    return found


def _is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _walk_outside_type_checking(tree: ast.AST):
    for node in ast.iter_child_nodes(tree):
        if _is_type_checking(node):
            continue
        yield node
        yield from _walk_outside_type_checking(node)


def _walk_type_checking(tree: ast.AST):
    """Every node inside an ``if TYPE_CHECKING:`` body (its ``else`` branch runs, so it is left out)."""
    for node in ast.walk(tree):
        if _is_type_checking(node):
            for child in node.body:
                yield from ast.walk(child)


def breaches() -> list[str]:
    """Every breach of the contract, one line each (empty when it holds)."""
    modules = module_files()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    found = []
    for name, path in modules.items():
        where = path.relative_to(PACKAGE.parent)
        for target, line in imports_of(path, modules):
            if target.startswith("torch.distributed") and layer_of(name) == PURE:
                found.append(f"{where}:{line}: pure module {name} imports {target}")
            if not target.startswith("gridgnn") or target == "gridgnn" and name != "gridgnn":
                continue  # `from gridgnn import __version__` is layer 0
            if layer_of(target) > layer_of(name):
                found.append(f"{where}:{line}: {name} (layer {layer_of(name)}) imports {target} "
                             f"(layer {layer_of(target)})")
            mine, theirs = room_of(name), room_of(target)
            if mine and theirs and mine[0] == theirs[0] and theirs[1] > mine[1]:
                rooms = ROOMS[mine[0]]
                found.append(f"{where}:{line}: {name} (room {rooms[mine[1]]}/) imports {target} "
                             f"(room {rooms[theirs[1]]}/, after it)")
            if target in modules and target != name and not name.startswith(target + "."):
                graph[name].add(target)
        for target, _ in imports_of(path, modules, type_checking=True):
            if target in modules and target != name and _same_strict_package(name, target):
                graph[name].add(target)
    return found + [f"import cycle: {' -> '.join(cycle)}" for cycle in _cycles(graph)]


def _same_strict_package(a: str, b: str) -> bool:
    """Whether modules ``a`` and ``b`` both lie in one package of `NO_TYPE_CHECKING_CYCLES`."""
    return any(a.startswith(p + ".") and b.startswith(p + ".") for p in NO_TYPE_CHECKING_CYCLES)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component of more than one module (a package importing its own
    submodules is not a cycle: packages are left out as importers of their children above)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node: str) -> None:  # Tarjan's algorithm
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component) + [sorted(component)[0]])

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph) + 100))
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def main() -> int:
    found = breaches()
    for line in found:
        print(line)
    if found:
        print(f"import contract: {len(found)} breach(es); see scripts/import_contract.py for the layers")
        return 1
    print(f"import contract: {len(module_files())} modules, layers, rooms and no cycles hold")
    return 0


if __name__ == "__main__":
    sys.exit(main())
