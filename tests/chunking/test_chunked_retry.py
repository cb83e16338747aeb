"""A file that changes while it is read is read again, and each attempt picks the way to store
it (chunked map, or one blob) from the size that attempt saw, never from the first one."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import blake3
import pytest

from snapstore import SnapStore
from snapstore.format.extents import CHUNKED_FROM_BYTES
from snapstore.worktree import ingest

MIB = 1 << 20


def changing_once(monkeypatch: pytest.MonkeyPatch, name: str, path: Path, new: bytes) -> None:
    """Make ``ingest.<name>`` rewrite ``path`` with ``new`` right after its first call."""
    real: Callable[..., Any] = getattr(ingest, name)
    calls = []

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        result = real(*args, **kwargs)
        if not calls:
            calls.append(1)
            path.write_bytes(new)
        return result

    monkeypatch.setattr(ingest, name, wrapped)


def test_a_large_file_that_shrinks_while_read_is_stored_as_one_blob(
    store: SnapStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = tmp_path / "project"
    base.mkdir()
    path = base / "data.bin"
    path.write_bytes(random.Random(1).randbytes(2 * MIB))
    small = b"now small\n" * 1000
    changing_once(monkeypatch, "_extent_map", path, small)
    store.create("s", "v1", ["."], base_dir=base)

    entry = store.get("s", "v1").entry("data.bin")
    assert entry is not None and entry.size == len(small)
    assert not entry.extents and entry.digest == blake3.blake3(small).digest()
    assert store.read("s", "v1", "data.bin") == small


def test_a_small_file_that_grows_large_while_read_is_chunked(
    store: SnapStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = tmp_path / "project"
    base.mkdir()
    path = base / "data.bin"
    path.write_bytes(b"small at first\n" * 100)
    large = random.Random(2).randbytes(CHUNKED_FROM_BYTES + 12345)
    changing_once(monkeypatch, "_read_from_start", path, large)
    store.create("s", "v1", ["."], base_dir=base)

    entry = store.get("s", "v1").entry("data.bin")
    assert entry is not None and entry.size == len(large) and entry.extents
    assert store.read("s", "v1", "data.bin") == large
