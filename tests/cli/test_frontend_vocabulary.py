"""The front ends share one vocabulary (``snapstore.frontend``) without importing each other:
the services, the web page and the resume checkpoints never import the command line, and the
vocabulary imports no front end. The exit codes scripts rely on keep their numbers and the
name docs/cli.md gives them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import snapstore
from snapstore.cli import exitcodes as cli_exitcodes
from snapstore.frontend import exitcodes

PACKAGE = Path(snapstore.__file__).parent
FRONT_ENDS = ("cli", "service", "ui")
"""The packages that show results to people or programs (``checkpoint`` is a library whose
error types the exit-code table names; it shows nothing itself)."""


def _imported(path: Path) -> set[str]:
    """Every snapstore module a source file imports (at the top, in functions, or for type
    checking alike), relative imports made absolute."""
    module_parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(module_parts[: len(module_parts) - node.level])
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return {name for name in found if name.split(".")[0] == "snapstore"}


def _reaches(name: str, package: str) -> bool:
    return name == f"snapstore.{package}" or name.startswith(f"snapstore.{package}.")


@pytest.mark.parametrize("front_end", ["service", "ui", "checkpoint", "frontend"])
def test_no_front_end_imports_the_command_line(front_end: str) -> None:
    offending = [
        f"{path.relative_to(PACKAGE)} imports {name}"
        for path in sorted((PACKAGE / front_end).rglob("*.py"))
        for name in sorted(_imported(path))
        if _reaches(name, "cli")
    ]
    assert offending == []


def test_the_shared_vocabulary_imports_no_front_end() -> None:
    offending = [
        f"{path.relative_to(PACKAGE)} imports {name}"
        for path in sorted((PACKAGE / "frontend").rglob("*.py"))
        for name in sorted(_imported(path))
        if any(_reaches(name, front_end) for front_end in FRONT_ENDS)
    ]
    assert offending == []


def test_the_documented_exit_code_names_are_the_shared_ones() -> None:
    assert cli_exitcodes.ExitCode is exitcodes.ExitCode
    assert cli_exitcodes.exit_code_for is exitcodes.exit_code_for
    assert {code.name: int(code) for code in exitcodes.ExitCode} == {
        "OK": 0,
        "ERROR": 1,
        "USAGE": 2,
        "PARTIAL": 3,
        "NO_STORE": 10,
        "LOCKED": 11,
        "PERMISSION": 12,
        "DAMAGED": 13,
        "NOT_FOUND": 14,
        "EXISTS": 15,
        "PASSWORD": 16,
    }
