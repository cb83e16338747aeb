"""A per-test scratch directory on tmpfs where there is one: the crash and fault suites make
thousands of small trees, and directory creation on tmpfs is ~25x cheaper than on ext4.

``SNAPSTORE_SCRATCH=disk`` keeps everything under pytest's ``tmp_path``;
``SNAPSTORE_SCRATCH=/some/dir`` puts the scratch directories there.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers.trees import remove_tree

TMPFS = "/dev/shm"


def scratch_base() -> str | None:
    """Where scratch directories go, or None for pytest's ``tmp_path``."""
    choice = os.environ.get("SNAPSTORE_SCRATCH", "")
    if choice == "disk":
        return None
    if choice:
        return choice
    if os.path.isdir(TMPFS) and os.access(TMPFS, os.W_OK):
        return TMPFS
    return None


@pytest.fixture
def scratch(tmp_path: Path) -> Iterator[Path]:
    """A fresh, private directory for one test, removed afterwards."""
    base = scratch_base()
    if base is None:
        yield tmp_path
        return
    path = Path(tempfile.mkdtemp(prefix="snapstore-test-", dir=base))
    try:
        yield path
    finally:
        remove_tree(path)
