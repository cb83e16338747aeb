"""Fixtures for the command-line tests: a private store and a small project per test."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from clitools import SAMPLE_FILES, Cli, read_tree


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    """The command line, with a fresh store under ``tmp_path``."""
    return Cli(tmp_path)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A small project directory to snapshot."""
    base = tmp_path / "project"
    for relative, content in SAMPLE_FILES.items():
        path = base / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    return base


@pytest.fixture
def tree() -> Callable[[Path], dict[str, bytes]]:
    """``tree(base)``: every regular file under ``base`` with its bytes."""
    return read_tree
