"""Atomic, durable file creation: write a temp file, fsync it, rename it, fsync the directory."""

from __future__ import annotations

import contextlib
import os

from snapstore.fs.seam import FileSystem

TEMP_PREFIX = ".snapstore-tmp-"


def temp_name() -> str:
    """A fresh, unguessable temp file name (staging files and restore temps share the prefix)."""
    return TEMP_PREFIX + os.urandom(8).hex()


def discard(fs: FileSystem, path: str, *, dir_fd: int | None = None) -> None:
    """Remove a temp file on a failure path; a second error must not hide the first."""
    with contextlib.suppress(OSError):
        fs.unlink(path, dir_fd=dir_fd)


def create_temp(fs: FileSystem, tmp_dir: str) -> tuple[int, str]:
    """Create a new private temp file in ``tmp_dir``; returns its descriptor and path."""
    path = os.path.join(tmp_dir, temp_name())
    fd = fs.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    return fd, path


def write_atomic(
    fs: FileSystem, path: str, data: bytes, *, tmp_dir: str, durable: bool, mode: int = 0o644
) -> None:
    """Publish ``data`` at ``path`` so that a reader or a crash sees the old or the new file.

    The temp file is fsynced before the rename and the directory after it. After any failure
    the temp file is removed and never published (a failed fsync is not retried).
    """
    fd, tmp_path = create_temp(fs, tmp_dir)
    try:
        try:
            fs.write(fd, data)
            fs.fchmod(fd, mode)
            if durable:
                fs.fsync(fd)
        finally:
            fs.close(fd)
        fs.replace(tmp_path, path)
    except BaseException:
        discard(fs, tmp_path)
        raise
    if durable:
        fs.fsync_dir(os.path.dirname(path))


def ensure_dir(fs: FileSystem, path: str, *, stop_at: str, durable: bool) -> None:
    """Create ``path`` and missing parents below ``stop_at``, flushing each new entry's parent.
    A directory another writer made between the look and the ``mkdir`` has its parent flushed
    too: that writer may die before flushing it, and the caller counts on the entry."""
    if os.path.isdir(path):
        return
    parent = os.path.dirname(path)
    if parent != path and os.path.normpath(parent) != os.path.normpath(stop_at):
        ensure_dir(fs, parent, stop_at=stop_at, durable=durable)
    try:
        fs.mkdir(path, 0o755)
    except FileExistsError:
        if not os.path.isdir(path):
            raise
    if durable:
        fs.fsync_dir(parent)
