"""The dependency rules of docs/architecture.md, read from the imports of every module.

Every ``import`` and ``from ... import`` under ``snapstore/`` counts: at module level, inside
functions (an import deferred for start-up time is still a dependency) and under
``TYPE_CHECKING`` (a type a module names is a concept it depends on). Failures name each
offending import with its file and line, and say where it sits.

Cyclomatic complexity (at most 15 per function) is ruff's C901, run by ``ruff check``;
only its configuration is checked here.
"""

from __future__ import annotations

import ast
import itertools
import tomllib
from collections import defaultdict
from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass
from pathlib import Path

import pytest

import snapstore

PACKAGE_DIR = Path(snapstore.__file__).resolve().parent
REPOSITORY = PACKAGE_DIR.parent
MAX_MODULE_LINES = 400

OVERSIZED_MODULES_BEING_SPLIT: frozenset[str] = frozenset()
"""Modules over the limit whose split is under way (none now); each entry goes with its
split."""

LAYERS: tuple[tuple[str, frozenset[str]], ...] = (
    (
        "base",
        frozenset(
            {
                "snapstore.errors",
                "snapstore.models",
                "snapstore.logs",
                "snapstore.cyclic_gc",
                "snapstore.patch",
            }
        ),
    ),
    ("format", frozenset({"snapstore.format"})),
    ("fs", frozenset({"snapstore.fs"})),
    ("backend", frozenset({"snapstore.backend"})),
    ("repo", frozenset({"snapstore.repo"})),
    ("worktree, maintenance", frozenset({"snapstore.worktree", "snapstore.maintenance"})),
    ("restore", frozenset({"snapstore.restore"})),
    ("compare", frozenset({"snapstore.compare"})),
    ("facade methods", frozenset({"snapstore.facade"})),
    ("facade", frozenset({"snapstore.store"})),
    ("public API, internals", frozenset({"snapstore", "snapstore.internals"})),
    ("checkpoints", frozenset({"snapstore.checkpoint"})),
    ("front-end vocabulary", frozenset({"snapstore.frontend"})),
    ("front ends", frozenset({"snapstore.service", "snapstore.ui"})),
    ("command line", frozenset({"snapstore.cli"})),
    ("python -m snapstore", frozenset({"snapstore.__main__"})),
)
"""docs/architecture.md's layers, bottom first: a unit imports only units of layers below
its own (never one beside it). A unit is a package directly under ``snapstore/`` or a module
at its top."""

SEAM_LEVEL_BACKEND = frozenset(
    {
        "snapstore.backend.seam",
        "snapstore.backend.layout",
        "snapstore.backend.packlog",
        "snapstore.backend.secret",
    }
)
"""What the repository side may import of ``backend/``: the interface, what marks and lays
out a store root, the pack log the interface hands out, and what opens an encrypted store
(a password or a key file: a value, no I/O, no cipher)."""

OPENING = "snapstore.backend.opening"
OPENERS = frozenset({"snapstore.facade.base", "snapstore.service.context"})
"""What opens a store by its root: the facade, and the server's context (as the facade)."""
KEY_METHODS = "snapstore.facade.keys"
KEY_FACES = frozenset({"snapstore.backend.encrypted", "snapstore.backend.keyring"})
"""The encrypting layer and its keys, which only the facade's key methods reach (to manage an
open encrypted store's passwords)."""
CONCRETE_BACKENDS = ("snapstore.backend.local", "snapstore.backend.memory", "snapstore.backend.s3")


@dataclass(frozen=True)
class Import:
    """One import of a snapstore module by another."""

    importer: str
    imported: str
    path: str
    line: int
    where: str
    """``module level``, ``in <function>``, or ``TYPE_CHECKING``."""

    def __str__(self) -> str:
        return f"{self.importer} -> {self.imported} ({self.path}:{self.line}, {self.where})"


def _module_paths() -> dict[str, Path]:
    modules = {}
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        parts = list(path.relative_to(REPOSITORY).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


MODULES = _module_paths()


def _known(name: str) -> str | None:
    """The module ``name`` is, or the innermost module it lies in (None outside snapstore)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


class _ImportReader(ast.NodeVisitor):
    def __init__(self, module: str, path: Path) -> None:
        self.module = module
        self.path = str(path.relative_to(REPOSITORY))
        self.package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        self.scopes: list[str] = []
        self.found: list[Import] = []

    def _where(self) -> str:
        return self.scopes[-1] if self.scopes else "module level"

    def _add(self, imported: str | None, node: ast.stmt) -> None:
        if imported is not None and imported != self.module:
            self.found.append(Import(self.module, imported, self.path, node.lineno, self._where()))

    def _scoped(self, label: str, node: ast.AST) -> None:
        self.scopes.append(label)
        self.generic_visit(node)
        self.scopes.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._scoped(f"in {node.name}()", node)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._scoped(f"in {node.name}()", node)

    def visit_If(self, node: ast.If) -> None:
        if not _is_type_checking(node.test):
            self.generic_visit(node)
            return
        self.scopes.append("TYPE_CHECKING")
        for child in node.body:
            self.visit(child)
        self.scopes.pop()
        for child in node.orelse:
            self.visit(child)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(_known(alias.name), node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            base = self.package.split(".")[: len(self.package.split(".")) - node.level + 1]
            source = ".".join([*base, *([node.module] if node.module else [])])
        else:
            source = node.module or ""
        for alias in node.names:
            submodule = f"{source}.{alias.name}"
            self._add(submodule if submodule in MODULES else _known(source), node)


def _read_imports() -> list[Import]:
    found = []
    for module, path in MODULES.items():
        reader = _ImportReader(module, path)
        reader.visit(ast.parse(path.read_text(encoding="utf-8"), str(path)))
        found.extend(reader.found)
    return list(dict.fromkeys(found))


IMPORTS = _read_imports()


def unit_of(module: str) -> str:
    """The package directly under ``snapstore/`` holding ``module``, or the top-level module."""
    parts = module.split(".")
    if len(parts) > 1 and (PACKAGE_DIR / parts[1]).is_dir():
        return ".".join(parts[:2])
    return module


def _graph(edges: Iterable[tuple[str, str]]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for source, target in edges:
        if source != target:
            graph[source].add(target)
    return graph


def find_cycles(graph: Mapping[str, Set[str]]) -> list[list[str]]:
    """One cycle through each strongly connected group of ``graph`` that has one (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in sorted(graph.get(node, ())):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(group)

    nodes = sorted(set(graph) | {n for targets in graph.values() for n in targets})
    for node in nodes:
        if node not in index:
            visit(node)
    return [_cycle_in(graph, set(group)) for group in groups]


def _cycle_in(graph: Mapping[str, Set[str]], group: set[str]) -> list[str]:
    """A path from the group's first member back to itself, within the group (BFS)."""
    start = min(group)
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for successor in sorted(graph.get(node, set()) & group):
                if successor == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if successor not in came_from:
                    came_from[successor] = node
                    following.append(successor)
        frontier = following
    raise AssertionError(f"no cycle in {sorted(group)}")


def _imports_along(cycle: list[str], unit: bool = False) -> list[str]:
    """The imports that make each step of ``cycle``."""
    lines = []
    for source, target in itertools.pairwise(cycle):
        for found in IMPORTS:
            ends = (unit_of(found.importer), unit_of(found.imported)) if unit else None
            if (ends or (found.importer, found.imported)) == (source, target):
                lines.append(f"  {found}")
                break
    return lines


def _report(cycles: list[list[str]], *, unit: bool = False) -> str:
    return "\n".join(
        " -> ".join(cycle) + "\n" + "\n".join(_imports_along(cycle, unit)) for cycle in cycles
    )


# ---------------------------------------------------------------- the reader itself


def test_the_reader_sees_every_kind_of_import() -> None:
    """Module-level, deferred and TYPE_CHECKING imports, relative ones and submodules named
    in a ``from`` import are all read (else every rule below could pass on nothing)."""
    tree = ast.parse(
        "from typing import TYPE_CHECKING\n"
        "import snapstore.format.names\n"
        "from . import journal\n"
        "from ..repo.repository import Repository\n"
        "if TYPE_CHECKING:\n"
        "    from snapstore.cli import exitcodes\n"
        "def late():\n"
        "    from snapstore.store import SnapStore\n"
    )
    reader = _ImportReader("snapstore.restore.job", PACKAGE_DIR / "restore" / "job.py")
    reader.visit(tree)
    assert {(found.imported, found.where) for found in reader.found} == {
        ("snapstore.format.names", "module level"),
        ("snapstore.restore.journal", "module level"),
        ("snapstore.repo.repository", "module level"),
        ("snapstore.cli.exitcodes", "TYPE_CHECKING"),
        ("snapstore.store", "in late()"),
    }
    assert len(IMPORTS) > 500 and {"snapstore.store", "snapstore.restore.targets"} <= set(MODULES)


def test_a_cycle_is_found_and_shown_as_a_path() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert find_cycles(graph) == [["a", "b", "c", "a"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []


# ---------------------------------------------------------------- cycles


def test_no_cycle_among_packages() -> None:
    graph = _graph((unit_of(found.importer), unit_of(found.imported)) for found in IMPORTS)
    cycles = find_cycles(graph)
    assert not cycles, "import cycles among packages:\n" + _report(cycles, unit=True)


def test_no_cycle_among_the_modules_of_a_package() -> None:
    graph = _graph(
        (found.importer, found.imported)
        for found in IMPORTS
        if unit_of(found.importer) == unit_of(found.imported)
    )
    cycles = find_cycles(graph)
    assert not cycles, "import cycles inside a package:\n" + _report(cycles)


# ---------------------------------------------------------------- layers


def _layer_of(unit: str) -> int:
    for number, (_, members) in enumerate(LAYERS):
        if unit in members:
            return number
    raise AssertionError(f"{unit} is in no layer of docs/architecture.md")


def test_every_package_and_top_level_module_has_its_layer() -> None:
    units = {unit_of(module) for module in MODULES}
    placed = set().union(*(members for _, members in LAYERS))
    assert units == placed


def test_each_layer_imports_only_the_layers_below_it() -> None:
    wrong = [
        f"  {found}: {LAYERS[_layer_of(unit_of(found.importer))][0]} imports "
        f"{LAYERS[_layer_of(unit_of(found.imported))][0]}"
        for found in IMPORTS
        if unit_of(found.importer) != unit_of(found.imported)
        and _layer_of(unit_of(found.importer)) <= _layer_of(unit_of(found.imported))
    ]
    assert not wrong, "imports against the layers:\n" + "\n".join(wrong)


def _imports_of(unit: str) -> list[Import]:
    return [found for found in IMPORTS if unit_of(found.importer) == unit]


@pytest.mark.parametrize(
    ("unit", "may_import"),
    [
        ("snapstore.format", {"snapstore.errors", "snapstore.models"}),
        ("snapstore.fs", {"snapstore.format", "snapstore.errors", "snapstore.models"}),
    ],
)
def test_format_and_fs_import_nothing_above_them(unit: str, may_import: set[str]) -> None:
    wrong = [
        str(found)
        for found in _imports_of(unit)
        if unit_of(found.imported) not in {unit, *may_import}
    ]
    assert not wrong, "\n".join(wrong)


def test_above_the_backends_only_the_seam_is_imported() -> None:
    """``repo`` and everything built on it see a backend through ``backend.seam`` (and
    ``layout`` and ``packlog``, which the seam's users share); only the facade and the
    server open a store (``backend.opening``), and nothing imports a concrete backend."""
    wrong = []
    for found in IMPORTS:
        if unit_of(found.imported) != "snapstore.backend":
            continue
        if unit_of(found.importer) == "snapstore.backend":
            continue
        if found.imported in SEAM_LEVEL_BACKEND:
            continue
        if found.imported == OPENING and found.importer in OPENERS:
            continue
        if found.imported in KEY_FACES and found.importer == KEY_METHODS:
            continue
        wrong.append(str(found))
    assert not wrong, "\n".join(wrong)


def test_only_opening_picks_a_concrete_backend() -> None:
    """Inside ``backend/``, the seam-level modules import no concrete backend; outside it,
    nothing does (the S3 backend keeps its host-local state through a local backend: a
    composition inside the package, not a choice of backend)."""
    wrong = [
        str(found)
        for found in IMPORTS
        if found.imported.startswith(CONCRETE_BACKENDS)
        and (unit_of(found.importer) != "snapstore.backend" or found.importer in SEAM_LEVEL_BACKEND)
    ]
    assert not wrong, "\n".join(wrong)
    pickers = {
        found.importer
        for found in IMPORTS
        if found.imported.startswith(CONCRETE_BACKENDS)
        and not found.importer.startswith(CONCRETE_BACKENDS)
    }
    assert pickers == {OPENING}


@pytest.mark.parametrize("unit", ["snapstore.service", "snapstore.ui", "snapstore.checkpoint"])
def test_front_ends_never_import_the_command_line(unit: str) -> None:
    wrong = [
        str(found) for found in _imports_of(unit) if unit_of(found.imported) == "snapstore.cli"
    ]
    assert not wrong, "\n".join(wrong)


def test_the_web_ui_uses_the_public_api_only() -> None:
    public = {
        "snapstore",
        "snapstore.store",
        "snapstore.errors",
        "snapstore.models",
        "snapstore.patch",
        "snapstore.frontend",
        "snapstore.ui",
    }
    wrong = [
        str(found) for found in _imports_of("snapstore.ui") if unit_of(found.imported) not in public
    ]
    assert not wrong, "\n".join(wrong)


def test_only_the_guard_takes_the_locks_of_target_directories() -> None:
    """Creates, restores and undos reach a target directory through ``restore.targets``."""
    users = {
        found.importer
        for found in IMPORTS
        if found.imported == "snapstore.restore.targetlocks" and found.where != "TYPE_CHECKING"
    }
    assert "snapstore.restore.targets" in users
    assert users <= {
        "snapstore.restore.targets",
        "snapstore.restore.recovery",
        "snapstore.internals",
    }


# ---------------------------------------------------------------- sizes


def test_no_module_is_over_400_lines() -> None:
    sizes = {
        str(path.relative_to(REPOSITORY)): len(path.read_text(encoding="utf-8").splitlines())
        for path in MODULES.values()
    }
    over = {path: lines for path, lines in sizes.items() if lines > MAX_MODULE_LINES}
    assert set(over) <= OVERSIZED_MODULES_BEING_SPLIT, (
        f"modules over {MAX_MODULE_LINES} lines: {over}"
    )
    assert set(over) >= OVERSIZED_MODULES_BEING_SPLIT, "split: drop it from the list"


def test_ruff_keeps_each_function_at_complexity_15_or_less() -> None:
    config = tomllib.loads((REPOSITORY / "pyproject.toml").read_text(encoding="utf-8"))
    lint = config["tool"]["ruff"]["lint"]
    assert "C901" in lint["select"]
    assert lint["mccabe"]["max-complexity"] == 15
