"""Wrappers around snapstore's I/O seam that count, fail, kill at, or record filesystem calls.

Every mutating call snapstore makes goes through a :class:`snapstore.fs.seam.FileSystem`;
subclassing it lets a test act just before the Nth such call (``close`` is not counted: it
changes nothing on disk).
"""

from __future__ import annotations

import errno as errno_module
import os
import stat
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from snapstore.fs import seam as seam_module
from snapstore.fs.seam import OPERATIONS, FileSystem

KILLED_EXIT = 77
"""Exit status of a child killed by :class:`KillingFileSystem`."""


class FastFileSystem(FileSystem):
    """The real seam, except that fsync only checks its descriptor or directory: the suites
    never pull the plug for real (the power-loss replay models what a flush makes durable),
    and skipping the disk cache flush makes them several times faster."""

    def fsync(self, fd: int) -> None:
        os.fstat(fd)

    def fsync_dir(self, path: str, *, dir_fd: int | None = None) -> None:
        os.close(os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=dir_fd))


class HookedFileSystem(FastFileSystem):
    """Calls :meth:`before` ahead of every mutating call, numbering the calls from 1."""

    def __init__(self) -> None:
        self.calls = 0
        self.trace: list[str] = []

    def before(self, operation: str, fd: int | None = None, data: Any = None) -> None:
        """Count the call; subclasses fail or kill here."""
        self.calls += 1
        self.trace.append(operation)

    def open(self, path: str, flags: int, mode: int = 0o666, *, dir_fd: int | None = None) -> int:
        self.before("open")
        return super().open(path, flags, mode, dir_fd=dir_fd)

    def write(self, fd: int, data: bytes | memoryview) -> None:
        self.before("write", fd, data)
        super().write(fd, data)

    def fsync(self, fd: int) -> None:
        self.before("fsync", fd)
        super().fsync(fd)

    def fchmod(self, fd: int, mode: int) -> None:
        self.before("fchmod", fd)
        super().fchmod(fd, mode)

    def replace(
        self, src: str, dst: str, *, src_dir_fd: int | None = None, dst_dir_fd: int | None = None
    ) -> None:
        self.before("replace")
        super().replace(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)

    def ftruncate(self, fd: int, length: int) -> None:
        self.before("ftruncate", fd)
        super().ftruncate(fd, length)

    def unlink(self, path: str, *, dir_fd: int | None = None) -> None:
        self.before("unlink")
        super().unlink(path, dir_fd=dir_fd)

    def mkdir(self, path: str, mode: int = 0o777, *, dir_fd: int | None = None) -> None:
        self.before("mkdir")
        super().mkdir(path, mode, dir_fd=dir_fd)

    def rmdir(self, path: str, *, dir_fd: int | None = None) -> None:
        self.before("rmdir")
        super().rmdir(path, dir_fd=dir_fd)

    def symlink(self, target: str, path: str, *, dir_fd: int | None = None) -> None:
        self.before("symlink")
        super().symlink(target, path, dir_fd=dir_fd)

    def link(
        self, src: str, dst: str, *, src_dir_fd: int | None = None, dst_dir_fd: int | None = None
    ) -> None:
        self.before("link")
        super().link(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)

    def fsync_dir(self, path: str, *, dir_fd: int | None = None) -> None:
        self.before("fsync_dir")
        super().fsync_dir(path, dir_fd=dir_fd)


assert set(OPERATIONS) <= {name for name in vars(HookedFileSystem) if not name.startswith("_")}


class CountingFileSystem(HookedFileSystem):
    """Only counts: how many mutating calls an operation makes, and which."""


class KillingFileSystem(HookedFileSystem):
    """Ends the process with ``os._exit`` just before call ``kill_at`` (a crash, not an error).

    With ``torn``, a ``write`` chosen as the kill point first writes half its bytes, the way a
    process killed inside a large write leaves a short file.
    """

    def __init__(self, kill_at: int, *, torn: bool = False) -> None:
        super().__init__()
        self.kill_at = kill_at
        self.torn = torn

    def before(self, operation: str, fd: int | None = None, data: Any = None) -> None:
        super().before(operation, fd, data)
        if self.calls == self.kill_at:
            if self.torn and operation == "write" and fd is not None and data is not None:
                os.write(fd, bytes(data)[: len(data) // 2])
            os._exit(KILLED_EXIT)


class WholeFlushes:
    """Mixed into a hooked seam: keep the stock seam's flush by filesystem (``syncfs`` where
    the filesystem's sync flushes as ``fsync`` does), which a seam overriding ``fsync``
    otherwise gives up, so that that path is counted and killed too, with
    ``sync_filesystems`` one more call (a hooked ``fsync`` still skips the disk's flush)."""

    before: Any

    @property
    def flushes_whole_filesystems(self) -> bool:
        return seam_module.SYNCFS

    def sync_filesystems(self, fds: Collection[int]) -> None:
        self.before("sync_filesystems")
        for fd in fds:
            seam_module.syncfs(fd)


class WholeFlushCountingFileSystem(WholeFlushes, CountingFileSystem):
    """Counts, flushing by filesystem."""


class WholeFlushKillingFileSystem(WholeFlushes, KillingFileSystem):
    """Kills, flushing by filesystem."""


class InjectedFault(OSError):
    """The OSError a :class:`FailingFileSystem` raises (a subclass, so tests can spot it)."""


class FailingFileSystem(HookedFileSystem):
    """Raises ``OSError(errno)`` instead of performing call ``fail_at`` (or each of several
    calls); the other calls succeed. ``fired`` names the first failed operation."""

    def __init__(self, fail_at: int | Collection[int], errno: int = errno_module.EIO) -> None:
        super().__init__()
        self.fail_at = {fail_at} if isinstance(fail_at, int) else set(fail_at)
        self.errno = errno
        self.fired: str | None = None
        self.failures = 0

    def before(self, operation: str, fd: int | None = None, data: Any = None) -> None:
        super().before(operation, fd, data)
        if self.calls in self.fail_at:
            self.fired = self.fired or operation
            self.failures += 1
            raise InjectedFault(self.errno, f"injected {os.strerror(self.errno)} in {operation}")


class FailingOperation(HookedFileSystem):
    """Raises ``error`` instead of the ``nth`` call of one named operation (``nth=0``: never,
    only counts them in ``matched``); every other call succeeds."""

    def __init__(self, operation: str, error: OSError, nth: int = 1) -> None:
        super().__init__()
        self.operation = operation
        self.error = error
        self.nth = nth
        self.matched = 0

    def before(self, operation: str, fd: int | None = None, data: Any = None) -> None:
        super().before(operation, fd, data)
        if operation == self.operation:
            self.matched += 1
            if self.matched == self.nth:
                raise self.error


@dataclass
class Recording:
    """The operations a :class:`RecordingFileSystem` saw, in order, as plain tuples.

    Paths are absolute. Inodes are named by keys: the ``st_ino`` of inodes that existed
    before recording began, ``"n<k>"`` for inodes created while recording.
    """

    events: list[tuple[Any, ...]] = field(default_factory=list)
    inode_keys: dict[int, str] = field(default_factory=dict)
    created: int = 0


def _fd_path(fd: int) -> str:
    return os.readlink(f"/proc/self/fd/{fd}")


def _resolve(path: str, dir_fd: int | None) -> str:
    if dir_fd is None:
        return os.path.abspath(path)
    return os.path.join(_fd_path(dir_fd), path)


def _content(fd: int) -> bytes:
    reader = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        while chunk := os.read(reader, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(reader)


class RecordingFileSystem(FastFileSystem):
    """Performs every call and logs what it changed, for the power-loss replay.

    Events: ``("create", path, key)``, ``("mkdir", path, key)``, ``("symlink", path, target,
    key)``, ``("rename", src, dst, key)``, ``("link", src, dst, key)``, ``("unlink", path)``,
    ``("rmdir", path)``, ``("data", key, bytes, mode)`` (contents after a write or chmod),
    ``("fsync", key, bytes, mode)`` and ``("fsync_dir", path)`` (also for fsync on a directory
    descriptor).
    """

    def __init__(self) -> None:
        self.recording = Recording()

    def _key(self, ino: int) -> Any:
        return self.recording.inode_keys.get(ino, ino)

    def _new_key(self, ino: int) -> str:
        self.recording.created += 1
        key = f"n{self.recording.created}"
        self.recording.inode_keys[ino] = key
        return key

    def _log(self, *event: Any) -> None:
        self.recording.events.append(event)

    def open(self, path: str, flags: int, mode: int = 0o666, *, dir_fd: int | None = None) -> int:
        absolute = _resolve(path, dir_fd)
        existed = os.path.lexists(absolute)
        fd = super().open(path, flags, mode, dir_fd=dir_fd)
        info = os.fstat(fd)
        if not existed and flags & os.O_CREAT:
            self._log("create", absolute, self._new_key(info.st_ino))
        if flags & os.O_TRUNC or not existed:
            self._log("data", self._key(info.st_ino), b"", stat.S_IMODE(info.st_mode))
        return fd

    def _log_data(self, kind: str, fd: int) -> None:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            if kind == "fsync":
                self._log("fsync_dir", _fd_path(fd))
            return
        self._log(kind, self._key(info.st_ino), _content(fd), stat.S_IMODE(info.st_mode))

    def write(self, fd: int, data: bytes | memoryview) -> None:
        super().write(fd, data)
        self._log_data("data", fd)

    def fsync(self, fd: int) -> None:
        super().fsync(fd)
        self._log_data("fsync", fd)

    def fchmod(self, fd: int, mode: int) -> None:
        super().fchmod(fd, mode)
        self._log_data("data", fd)

    def replace(
        self, src: str, dst: str, *, src_dir_fd: int | None = None, dst_dir_fd: int | None = None
    ) -> None:
        source, destination = _resolve(src, src_dir_fd), _resolve(dst, dst_dir_fd)
        super().replace(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)
        key = self._key(os.lstat(destination).st_ino)
        self._log("rename", source, destination, key)

    def ftruncate(self, fd: int, length: int) -> None:
        super().ftruncate(fd, length)
        self._log_data("data", fd)

    def unlink(self, path: str, *, dir_fd: int | None = None) -> None:
        absolute = _resolve(path, dir_fd)
        super().unlink(path, dir_fd=dir_fd)
        self._log("unlink", absolute)

    def mkdir(self, path: str, mode: int = 0o777, *, dir_fd: int | None = None) -> None:
        absolute = _resolve(path, dir_fd)
        super().mkdir(path, mode, dir_fd=dir_fd)
        self._log("mkdir", absolute, self._new_key(os.lstat(absolute).st_ino))

    def rmdir(self, path: str, *, dir_fd: int | None = None) -> None:
        absolute = _resolve(path, dir_fd)
        super().rmdir(path, dir_fd=dir_fd)
        self._log("rmdir", absolute)

    def symlink(self, target: str, path: str, *, dir_fd: int | None = None) -> None:
        absolute = _resolve(path, dir_fd)
        super().symlink(target, path, dir_fd=dir_fd)
        self._log("symlink", absolute, target, self._new_key(os.lstat(absolute).st_ino))

    def link(
        self, src: str, dst: str, *, src_dir_fd: int | None = None, dst_dir_fd: int | None = None
    ) -> None:
        source, destination = _resolve(src, src_dir_fd), _resolve(dst, dst_dir_fd)
        super().link(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)
        self._log("link", source, destination, self._key(os.lstat(destination).st_ino))

    def fsync_dir(self, path: str, *, dir_fd: int | None = None) -> None:
        absolute = _resolve(path, dir_fd)
        super().fsync_dir(path, dir_fd=dir_fd)
        self._log("fsync_dir", os.path.normpath(absolute))
