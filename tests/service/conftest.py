"""Fixtures for the service tests: a store root and a small project per test."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.trees import write_tree

PROJECT_FILES = {
    "README.md": "# sample\n",
    "src/app.py": "print('hello')\n",
    "src/util.py": "def add(a, b):\n    return a + b\n",
    "data/blob.bin": bytes(range(256)) * 16,
}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    base = tmp_path / "project"
    write_tree(base, PROJECT_FILES)
    return base


@pytest.fixture
def git_project(tmp_path: Path) -> Path:
    """A git work tree whose .gitignore ignores ``a.log``; ``a.txt`` and the .gitignore are
    what a checkpoint records by default."""
    base = tmp_path / "repo"
    write_tree(
        base,
        {".git/HEAD": "ref: main\n", ".gitignore": "*.log\n", "a.log": "log", "a.txt": "a"},
    )
    return base
