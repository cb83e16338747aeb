"""Batched flushes: a filesystem is flushed with one syncfs on Linux, while a seam that
overrides fsync (the crash suites' recorders) still sees one fsync per file, so the
power-loss model stays exact (the order of a restore's flushes:
test_restore_flush_order.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers.trees import read_tree, write_tree

from snapstore import SnapStore
from snapstore.fs import seam as fsio


class CountingFsync(fsio.FileSystem):
    def __init__(self) -> None:
        self.fsyncs = 0

    def fsync(self, fd: int) -> None:
        self.fsyncs += 1
        super().fsync(fd)


def _files(tmp_path: Path, count: int) -> list[int]:
    fds = []
    for index in range(count):
        fd = os.open(tmp_path / f"f{index}", os.O_WRONLY | os.O_CREAT, 0o600)
        os.write(fd, b"data")
        fds.append(fd)
    return fds


def test_a_seam_overriding_fsync_sees_every_file(tmp_path: Path) -> None:
    fds = _files(tmp_path, 5)
    seam = CountingFsync()
    seam.fsync_files(fds)
    assert seam.fsyncs == 5
    for fd in fds:
        os.close(fd)


def test_the_stock_seam_flushes_a_filesystem_with_one_syncfs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    monkeypatch.setattr(fsio, "SYNCFS", True)
    monkeypatch.setattr(fsio, "syncfs", calls.append)
    monkeypatch.setattr(fsio, "flush", lambda fd: pytest.fail("per-file fsync"))
    seam = fsio.FileSystem()
    assert seam.flushes_whole_filesystems
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    seam.sync_filesystems([fd])
    os.close(fd)
    assert calls == [fd]


@pytest.mark.parametrize("with_syncfs", [True, False])
def test_fsync_files_fsyncs_every_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, with_syncfs: bool
) -> None:
    flushed: list[int] = []
    monkeypatch.setattr(fsio, "SYNCFS", with_syncfs)
    monkeypatch.setattr(fsio, "flush", flushed.append)
    fds = _files(tmp_path, 3)
    fsio.FileSystem().fsync_files(fds)
    assert flushed == fds
    for fd in fds:
        os.close(fd)


def test_a_large_restore_is_flushed_in_batches_before_its_renames(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = tmp_path / "p"
    write_tree(base, {f"d{i % 4}/f{i:03d}": f"content {i}" for i in range(150)})
    seam = CountingFsync()
    store = SnapStore(tmp_path / "store", fs=seam)
    store.create("s", "n", ["."], base_dir=base)
    seam.fsyncs = 0
    store.restore("s", "n", tmp_path / "out")
    assert read_tree(tmp_path / "out") == read_tree(base)
    assert seam.fsyncs >= 150
