"""Objects a local store stages in ``tmp/``: written, flushed and renamed into place at
commit (``StagedFile``), or kept open once committed, to be appended to (``AppendableFile``:
an appendable pack). Every mutation goes through the backend's I/O seam."""

from __future__ import annotations

import contextlib
import os
import weakref
from typing import Protocol

from snapstore.backend.seam import Handle, Kind
from snapstore.fs.durable import create_temp, discard, ensure_dir
from snapstore.fs.seam import FileSystem, start_writeback

WRITEBACK_BYTES = 8 << 20


class StagingBackend(Protocol):
    """What a staged object needs of the local backend that made it."""

    fs: FileSystem
    durable: bool
    root: str
    tmp_dir: str

    def path(self, handle: Handle) -> str: ...

    def flush_dir(self, directory: str) -> None: ...

    @property
    def unflushed(self) -> set[str]: ...


class StagedFile:
    """An object staged in ``tmp/`` (see ``StagedObject``)."""

    def __init__(self, backend: StagingBackend, kind: Kind) -> None:
        self._backend = backend
        self._kind = kind
        self._fd, self._temp_path = create_temp(backend.fs, backend.tmp_dir)
        self._open = True
        self._unflushed = 0
        self.size = 0

    def write(self, data: bytes | memoryview) -> None:
        self._backend.fs.write(self._fd, data)
        self.size += len(data)
        self._unflushed += len(data)
        if self._backend.durable and self._unflushed >= WRITEBACK_BYTES:
            # Let the disk work while the rest is still being produced; the fsync then waits less.
            start_writeback(self._fd)
            self._unflushed = 0

    def restart(self) -> None:
        self._backend.fs.ftruncate(self._fd, 0)
        os.lseek(self._fd, 0, os.SEEK_SET)
        self.size = 0

    def commit(self, name: str, *, name_durable: bool = False) -> None:
        self._publish(name, name_durable=name_durable, keep_open=False)

    def _publish(self, name: str, *, name_durable: bool, keep_open: bool) -> str:
        """Flush, rename into place (closing the file unless ``keep_open``); the final path."""
        backend = self._backend
        try:
            backend.fs.fchmod(self._fd, 0o444)
            if backend.durable:
                backend.fs.fsync(self._fd)
            if not keep_open:
                self._close()
            final = backend.path(Handle(self._kind, name))
            directory = os.path.dirname(final)
            if not os.path.isdir(directory):
                ensure_dir(backend.fs, directory, stop_at=backend.root, durable=backend.durable)
            backend.fs.replace(self._temp_path, final)
        except BaseException:
            self.abort()
            raise
        if name_durable:
            backend.flush_dir(directory)
        else:
            backend.unflushed.add(directory)
        return final

    def _close(self) -> None:
        if self._open:
            self._open = False
            self._backend.fs.close(self._fd)

    def abort(self) -> None:
        with contextlib.suppress(OSError):
            self._close()
        discard(self._backend.fs, self._temp_path)


class AppendableFile(StagedFile):
    """An object staged in ``tmp/`` and kept open once committed, to append to (see
    ``AppendableObject``). Its name is durable when ``commit`` returns."""

    def __init__(self, backend: StagingBackend, kind: Kind) -> None:
        super().__init__(backend, kind)
        self._path: str | None = None
        # On the descriptor, not on self: a store dropped without ``close`` releases the
        # pack it appended to when it is collected, as a dropped ``open()`` file does.
        self._release = weakref.finalize(self, _close_quietly, self._fd)

    def _close(self) -> None:
        if self._open:
            self._release.detach()
        super()._close()

    def commit(self, name: str, *, name_durable: bool = True) -> None:
        self._path = self._publish(name, name_durable=True, keep_open=True)

    def append(self, data: bytes | memoryview) -> None:
        self._backend.fs.write(self._fd, data)
        self.size += len(data)

    def sync(self) -> None:
        if self._backend.durable:
            self._backend.fs.fsync(self._fd)

    def truncate(self, size: int) -> None:
        self._backend.fs.ftruncate(self._fd, size)
        os.lseek(self._fd, size, os.SEEK_SET)
        self.size = size

    def current(self) -> bool:
        if not self._open or self._path is None:
            return False
        try:
            mine = os.fstat(self._fd)
            there = os.stat(self._path)
        except OSError:
            return False
        return mine.st_nlink > 0 and (there.st_ino, there.st_dev) == (mine.st_ino, mine.st_dev)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._close()

    def abort(self) -> None:
        if self._path is None:
            super().abort()
        else:
            self.close()


def _close_quietly(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)
