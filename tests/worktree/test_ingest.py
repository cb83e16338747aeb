"""Stable reads: the bytes stored are exactly the bytes hashed, for the version of the file
whose metadata the snapshot records, even when the file changes while it is read."""

from __future__ import annotations

import os
from pathlib import Path

import blake3
import pytest

from snapstore import SnapStore, SourceChangedError
from snapstore.internals import repository
from snapstore.repo import batch
from snapstore.worktree import ingest


@pytest.fixture
def store(tmp_path: Path) -> SnapStore:
    return SnapStore(tmp_path / "store", durable=False)


def test_a_file_changed_after_the_scan_is_read_again(store: SnapStore, tmp_path: Path) -> None:
    path = tmp_path / "f.txt"
    path.write_bytes(b"old contents")
    scanned = os.lstat(path)
    path.write_bytes(b"new, longer contents")
    blobs = batch.BlobBatch(repository(store).blobs)
    stored = ingest.ingest_file(blobs, str(path), scanned)
    blobs.finish()
    assert stored.digest == blake3.blake3(b"new, longer contents").digest()
    assert stored.size == len(b"new, longer contents")
    assert stored.stat.st_ctime_ns == os.lstat(path).st_ctime_ns
    assert repository(store).blobs.read(stored.digest) == b"new, longer contents"


def test_a_file_that_never_holds_still_is_refused(
    store: SnapStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "f.txt"
    path.write_bytes(b"contents")
    real_fstat = os.fstat
    ticks = iter(range(1, 1000))

    def moving_fstat(fd: int) -> os.stat_result:
        info = list(real_fstat(fd))
        info[6] += next(ticks)
        return os.stat_result(info)

    monkeypatch.setattr(ingest.os, "fstat", moving_fstat)
    with pytest.raises(SourceChangedError, match="kept changing"):
        ingest.ingest_file(batch.BlobBatch(repository(store).blobs), str(path), os.lstat(path))


def test_a_small_file_that_grows_large_while_read_streams_loose(
    store: SnapStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(batch, "PACKED_MAX_BYTES", 100)
    path = tmp_path / "f.bin"
    path.write_bytes(b"x" * 10)
    scanned = os.lstat(path)
    path.write_bytes(b"y" * 1000)
    blobs = batch.BlobBatch(repository(store).blobs)
    stored = ingest.ingest_file(blobs, str(path), scanned)
    blobs.finish()
    assert stored.size == 1000
    assert os.path.exists(repository(store).blobs.path(stored.digest))


def test_a_whole_file_is_read_after_short_reads_and_an_empty_one_not_at_all(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = tmp_path / "f.bin"
    path.write_bytes(bytes(range(256)) * 40)
    real_pread = os.pread
    calls: list[tuple[int, int]] = []

    def short_pread(fd: int, size: int, offset: int) -> bytes:
        calls.append((size, offset))
        return real_pread(fd, min(size, 1000), offset)

    monkeypatch.setattr(ingest.os, "pread", short_pread)
    fd = os.open(path, os.O_RDONLY)
    try:
        assert ingest._read_from_start(fd, 10240) == path.read_bytes()
        assert ingest._read_from_start(fd, 20000) == path.read_bytes()  # ends sooner
        assert calls[:2] == [(10240, 0), (9240, 1000)] and len(calls) == 11 + 12
        calls.clear()
        assert ingest._read_from_start(fd, 0) == b""
        assert calls == []
    finally:
        os.close(fd)
