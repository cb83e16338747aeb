"""Fixtures for the command-line tests: a private store and a small project per test."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.cli import SAMPLE_FILES, Cli
from helpers.trees import read_files, write_tree


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    """The command line, with a fresh store under ``tmp_path``."""
    return Cli(tmp_path)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A small project directory to snapshot."""
    base = tmp_path / "project"
    write_tree(base, SAMPLE_FILES)
    return base


@pytest.fixture
def tree() -> Callable[[Path], dict[str, bytes]]:
    """``tree(base)``: every regular file under ``base`` with its bytes."""
    return read_files
