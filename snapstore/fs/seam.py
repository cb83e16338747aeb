"""The seam every filesystem mutation goes through, so tests can record, fail or kill at it.

Reads go straight to :mod:`os`; only operations that change the disk pass through
:class:`FileSystem`. A test wraps it (see ``tests/``) to inject ``OSError``s, to kill the
process at the Nth call, or to log operations and replay the disk a power cut could leave.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from collections.abc import Callable, Sequence

OPERATIONS = (
    "open",
    "write",
    "fsync",
    "fchmod",
    "ftruncate",
    "replace",
    "unlink",
    "mkdir",
    "rmdir",
    "symlink",
    "link",
    "fsync_dir",
)


def flush(fd: int) -> None:
    """fsync, using ``F_FULLFSYNC`` on macOS where plain fsync stops at the drive's cache."""
    if sys.platform == "darwin":
        import fcntl

        fcntl.fcntl(fd, fcntl.F_FULLFSYNC)
    else:
        os.fsync(fd)


SYNCFS_FROM = (5, 17)
"""The first Linux whose ``syncfs`` reports every error an ``fsync`` would: 5.8 added the
errors of data writeback, but until 5.17 the filesystem's own sync (the journal commit, the
disk's cache flush) had its result dropped. Some stable kernels before it have the fix; the
version cannot tell which, so they flush file by file."""


def _syncfs_reports_errors(release: str | None = None) -> bool:
    """syncfs exists (Linux) and reports the errors of writeback and of the filesystem's
    own sync (``SYNCFS_FROM`` and later)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        major, minor = (int(part) for part in (release or os.uname().release).split(".")[:2])
    except ValueError:
        return False
    return (major, minor) >= SYNCFS_FROM


@functools.cache
def _libc_syncfs() -> Callable[[int], int]:
    """The C library's ``syncfs``, looked up once per process (ctypes is imported only
    where it is used)."""
    import ctypes

    function: Callable[[int], int] = ctypes.CDLL(None, use_errno=True).syncfs
    return function


def syncfs(fd: int) -> None:
    """Flush every dirty page and inode of the filesystem holding ``fd`` (Linux ``syncfs``)."""
    import ctypes

    if _libc_syncfs()(fd) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"syncfs failed: {os.strerror(error)}")


SYNCFS = _syncfs_reports_errors()


def start_writeback(fd: int) -> None:
    """Ask the kernel to start writing a file's dirty pages to disk now, without waiting, so
    a later fsync of a batch finds most of the work done. Only a hint: it changes nothing a
    reader or a power cut can see, so it bypasses the seam; a no-op where unsupported."""
    advise = getattr(os, "posix_fadvise", None)
    if advise is not None and sys.platform.startswith("linux"):
        with contextlib.suppress(OSError):
            advise(fd, 0, 0, os.POSIX_FADV_DONTNEED)


class FileSystem:
    """Thin wrappers over the mutating :mod:`os` calls snapstore makes."""

    def open(self, path: str, flags: int, mode: int = 0o666, *, dir_fd: int | None = None) -> int:
        """Open a file for writing (creation is a mutation)."""
        return os.open(path, flags | os.O_CLOEXEC, mode, dir_fd=dir_fd)

    def write(self, fd: int, data: bytes | memoryview) -> None:
        """Write all of ``data`` (loops over short writes)."""
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]

    def fsync(self, fd: int) -> None:
        """Flush a file's (or an open directory's) data to stable storage."""
        flush(fd)

    @property
    def flushes_whole_filesystems(self) -> bool:
        """True when this seam can flush a filesystem at once: ``sync_filesystems`` of one
        descriptor makes everything written on that filesystem durable (file data, modes,
        directory entries), where the filesystem's own sync flushes as ``fsync`` does (see
        ``snapstore.fs.mounts.SYNCFS_FILESYSTEMS``, which the caller checks). That is
        ``syncfs`` on Linux 5.17 and later (see ``SYNCFS_FROM``); elsewhere, and for a seam
        that overrides ``fsync`` (tests that record, fail or kill at calls), False: every
        file and directory gets an ``fsync`` of its own."""
        return SYNCFS and type(self).fsync is FileSystem.fsync

    def fsync_files(self, fds: Sequence[int]) -> None:
        """Flush every file (or directory) in ``fds``, one ``fsync`` each."""
        for fd in fds:
            self.fsync(fd)

    def sync_filesystems(self, fds: Sequence[int]) -> None:
        """Flush everything written on the filesystem of each descriptor in ``fds`` (one
        ``syncfs`` each: give one descriptor per filesystem). Only where
        ``flushes_whole_filesystems``: elsewhere this raises ValueError rather than flush
        less than its caller counts on. An error of the flush (EIO, ENOSPC...) is raised as
        an OSError."""
        if not self.flushes_whole_filesystems:
            raise ValueError("this seam cannot flush a whole filesystem; fsync each file")
        for fd in fds:
            syncfs(fd)

    def close(self, fd: int) -> None:
        """Close a descriptor."""
        os.close(fd)

    def fchmod(self, fd: int, mode: int) -> None:
        """Set the mode bits of an open file."""
        os.fchmod(fd, mode)

    def ftruncate(self, fd: int, length: int) -> None:
        """Cut or extend an open file to ``length`` bytes."""
        os.ftruncate(fd, length)

    def replace(
        self, src: str, dst: str, *, src_dir_fd: int | None = None, dst_dir_fd: int | None = None
    ) -> None:
        """Atomically rename ``src`` onto ``dst``."""
        os.replace(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)

    def unlink(self, path: str, *, dir_fd: int | None = None) -> None:
        """Remove a file or symlink."""
        os.unlink(path, dir_fd=dir_fd)

    def mkdir(self, path: str, mode: int = 0o777, *, dir_fd: int | None = None) -> None:
        """Create one directory."""
        os.mkdir(path, mode, dir_fd=dir_fd)

    def rmdir(self, path: str, *, dir_fd: int | None = None) -> None:
        """Remove one empty directory."""
        os.rmdir(path, dir_fd=dir_fd)

    def symlink(self, target: str, path: str, *, dir_fd: int | None = None) -> None:
        """Create a symbolic link at ``path`` pointing to ``target``."""
        os.symlink(target, path, dir_fd=dir_fd)

    def link(
        self, src: str, dst: str, *, src_dir_fd: int | None = None, dst_dir_fd: int | None = None
    ) -> None:
        """Make ``dst`` a new name of the file ``src`` (a hard link; a symlink at ``src`` is
        linked itself, never followed)."""
        os.link(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd, follow_symlinks=False)

    def fsync_dir(self, path: str, *, dir_fd: int | None = None) -> None:
        """Flush a directory's entries, so renames and creations in it survive power loss."""
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=dir_fd)
        try:
            flush(fd)
        finally:
            os.close(fd)


LOCAL = FileSystem()
