"""The local backend keeps the backend contract: durable, failures injected through the I/O
seam, temps and FIFOs planted as a killed writer or a hostile user leaves them."""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.seam import HookedFileSystem, InjectedFault

from snapstore.backend.local import LocalBackend
from snapstore.backend.seam import Backend, Handle, Kind
from snapstore.fs.durable import create_temp

from .contract import LOCK_TIMEOUT, BackendContract, Failing, MakeBackend


class SwitchedFileSystem(HookedFileSystem):
    """The I/O seam, failing every mutating call with EIO while ``failing`` is set."""

    failing = False

    def before(self, operation: str, fd: int | None = None, data: Any = None) -> None:
        super().before(operation, fd, data)
        if self.failing:
            raise InjectedFault(errno.EIO, f"injected EIO in {operation}")


class TestLocalBackend(BackendContract):
    @pytest.fixture
    def make_backend(self, tmp_path: Path) -> MakeBackend:
        def make(*, sharing: Backend | None = None) -> Backend:
            root = sharing.root if isinstance(sharing, LocalBackend) else tmp_path / "store"
            return LocalBackend(str(root), fs=SwitchedFileSystem(), lock_timeout=LOCK_TIMEOUT)

        return make

    @pytest.fixture
    def failing(self) -> Failing:
        @contextlib.contextmanager
        def fail(backend: Backend) -> Iterator[None]:
            assert isinstance(backend, LocalBackend)
            fs = backend.fs
            assert isinstance(fs, SwitchedFileSystem)
            fs.failing = True
            try:
                yield
            finally:
                fs.failing = False

        return fail

    @pytest.fixture
    def plant_stale_temp(self) -> Any:
        def plant(backend: Backend) -> None:
            assert isinstance(backend, LocalBackend)
            fd, _ = create_temp(backend.fs, backend.tmp_dir)
            os.write(fd, b"half an object")
            os.close(fd)

        return plant

    @pytest.fixture
    def plant_unfit(self) -> Any:
        def plant(backend: Backend, handle: Handle) -> None:
            assert isinstance(backend, LocalBackend)
            path = backend.path(handle)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            os.mkfifo(path)

        return plant


def test_the_durable_local_backend_flushes_each_write_and_its_directory(tmp_path: Path) -> None:
    """What ``properties.durable`` promises, seen at the I/O seam: a write is fsynced, renamed
    into place and its directory fsynced before it returns; a staged object's name at flush."""
    fs = SwitchedFileSystem()
    backend = LocalBackend(str(tmp_path / "store"), fs=fs)
    backend.open(create=True)
    assert backend.properties.durable
    fs.trace.clear()
    backend.write(Handle(Kind.JOURNAL, "0e" * 16), b"journal")
    assert fs.trace[-3:] == ["fsync", "replace", "fsync_dir"]
    staged = backend.stage(Kind.BLOB)
    staged.write(b"blob")
    fs.trace.clear()
    staged.commit("ab" * 32)
    assert fs.trace[:2] == ["fchmod", "fsync"] and fs.trace[-1] == "replace"  # name not yet
    fs.trace.clear()
    backend.flush()
    assert fs.trace == ["fsync_dir", "fsync_dir"]  # the shard's entry in blobs/, and the shard


def test_a_write_without_flush_makes_its_missing_directory_and_leaves_no_temp(
    tmp_path: Path,
) -> None:
    """A write that is not flushed (a session's head) looks for its directory only when the
    rename finds none: a removed ``cache/heads`` is made again, nothing is flushed, and the
    first attempt's temp file is gone; a directory replaced by a file still fails."""
    fs = SwitchedFileSystem()
    backend = LocalBackend(str(tmp_path / "store"), fs=fs)
    backend.open(create=True)
    handle = Handle(Kind.CACHE, "heads/s-1")
    backend.write(handle, b"head one", durable=False)
    heads = os.path.dirname(backend.path(handle))
    os.unlink(backend.path(handle))
    os.rmdir(heads)
    fs.trace.clear()
    backend.write(handle, b"head two", durable=False)
    assert backend.read(handle, max_bytes=100)[0] == b"head two"
    assert "fsync" not in fs.trace and "fsync_dir" not in fs.trace
    assert "mkdir" in fs.trace
    assert os.listdir(backend.tmp_dir) == []
    os.unlink(backend.path(handle))
    os.rmdir(heads)
    Path(heads).write_text("not a directory")
    with pytest.raises(OSError):
        backend.write(handle, b"head three", durable=False)
    assert os.listdir(backend.tmp_dir) == []
