"""A snapshot holds one whole version of each file, or fails that file; it never blocks on a
special file put where a regular one was."""

from __future__ import annotations

import mmap
import os
import types
from pathlib import Path

import pytest
from helpers.alarm import no_hang
from helpers.trees import write_tree

import snapstore.worktree.ingest as ingest
import snapstore.worktree.statcache as statcache
from snapstore import SnapStore
from snapstore.errors import UnreadablePathError


@pytest.fixture
def one_second_timestamps(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ingest see file times rounded down to the second, as on filesystems with 1-second
    timestamps: a rewrite within the same second then leaves the stat exactly as it was."""
    real_fstat = os.fstat

    def coarse(fd: int) -> object:
        info = real_fstat(fd)
        second = 1_000_000_000
        return types.SimpleNamespace(
            st_mode=info.st_mode,
            st_ino=info.st_ino,
            st_dev=info.st_dev,
            st_size=info.st_size,
            st_mtime_ns=info.st_mtime_ns // second * second,
            st_ctime_ns=info.st_ctime_ns // second * second,
        )

    monkeypatch.setattr(ingest.os, "fstat", coarse)


@pytest.mark.parametrize("size", [2 << 20, 20 << 20], ids=["small", "large"])
def test_a_file_rewritten_in_place_while_read_is_never_stored_torn(
    store: SnapStore,
    tmp_path: Path,
    one_second_timestamps: None,
    monkeypatch: pytest.MonkeyPatch,
    size: int,
) -> None:
    """Another process rewrites the file, whole, in one write, exactly while the snapshot
    has read half of it: the read sees half the old bytes and half the new, the stat (to the
    second) shows nothing. The snapshot must hold the old or the new version, never the mix."""
    project = tmp_path / "proj"
    path = project / "data.bin"
    write_tree(project, {"data.bin": b"A" * size})
    real_read, real_pread = os.read, os.pread
    rewrites: list[int] = []

    def rewrite_once() -> None:
        if not rewrites:
            rewrites.append(1)
            fd = os.open(path, os.O_WRONLY)
            try:
                os.pwrite(fd, b"B" * size, 0)
            finally:
                os.close(fd)

    def half_then_rewrite_read(fd: int, length: int) -> bytes:
        data = real_read(fd, min(length, size // 2))
        rewrite_once()
        return data

    def half_then_rewrite_pread(fd: int, length: int, offset: int) -> bytes:
        data = real_pread(fd, min(length, size // 2), offset)
        rewrite_once()
        return data

    monkeypatch.setattr(ingest.os, "read", half_then_rewrite_read)
    monkeypatch.setattr(ingest.os, "pread", half_then_rewrite_pread)
    store.create("s", "n", ["data.bin"], base_dir=project)
    monkeypatch.undo()
    assert rewrites, "the rewrite never happened mid-read"
    assert store.read("s", "n", "data.bin") in (b"A" * size, b"B" * size)


def test_a_file_swapped_for_a_fifo_before_it_is_read_never_blocks(
    store: SnapStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "proj"
    write_tree(project, {"a.txt": "a", "b.txt": "b"})
    real = ingest.open_source

    def swap_then_read(path: str, dir_fd: int | None = None) -> int:
        if path.endswith("b.txt"):
            os.unlink(path)
            os.mkfifo(path)
        return real(path, dir_fd)

    monkeypatch.setattr(ingest, "open_source", swap_then_read)
    with no_hang(), pytest.raises(UnreadablePathError, match="no longer a regular file"):
        store.create("s", "n", ["."], base_dir=project)
    os.unlink(project / "b.txt")
    write_tree(project, {"b.txt": "b"})
    with no_hang():
        info = store.create("s", "n", ["."], base_dir=project, skip_unreadable=True)
    assert [skipped.path for skipped in info.skipped] == ["b.txt"]


def test_rehash_sees_a_write_through_mmap_that_left_the_stat_alone(
    store: SnapStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write to an already-dirty page of a shared mapping does not change the file's stat,
    so a cached digest can be stale (the documented limit); ``rehash=True`` reads every file."""
    monkeypatch.setattr(statcache, "RACY_NS", 0)
    project = tmp_path / "proj"
    write_tree(project, {"mapped.bin": bytes(4096)})
    with open(project / "mapped.bin", "r+b") as file, mmap.mmap(file.fileno(), 4096) as mapped:
        mapped[0:5] = b"first"
        store.create("s", "one", ["mapped.bin"], base_dir=project)
        mapped[0:5] = b"later"
        info = store.create("s", "two", ["mapped.bin"], base_dir=project, rehash=True)
    assert store.read("s", info.name, "mapped.bin")[:5] == b"later"
