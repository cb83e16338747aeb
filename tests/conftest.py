"""Shared fixtures: every test gets its own store root and sample project under tmp_path."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.trees import write_tree

from snapstore import SnapStore


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def store(root: Path) -> SnapStore:
    return SnapStore(root, lock_timeout=5.0)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    base = tmp_path / "project"
    write_tree(
        base,
        {
            "README.md": "# sample\n",
            "src/app.py": "print('hello')\n",
            "src/util.py": "def add(a, b):\n    return a + b\n",
            "data/blob.bin": bytes(range(256)) * 64,
        },
    )
    (base / "src" / "link.py").symlink_to("app.py")
    return base
