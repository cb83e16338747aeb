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
