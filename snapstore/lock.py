"""Cross-process kernel locks on files under ``<root>/locks``, with timeouts.

Each acquisition opens its own descriptor, so flock-style locks also exclude threads of one
process from each other. Lock files are never unlinked. A forked child drops inherited
handles without unlocking, so it never releases a lock its parent holds.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Iterator
from typing import IO

from snapstore.errors import LockTimeout

logger = logging.getLogger(__name__)
_POLL_START = 0.001
_POLL_MAX = 0.05


class _Handle:
    """One open lock file; knows whether it was inherited across fork."""

    def __init__(self, file: IO[bytes]) -> None:
        self.file = file
        self.pid = os.getpid()

    def release(self) -> None:
        """Unlock and close; in a forked child only close, leaving the parent's lock alone."""
        try:
            if self.pid == os.getpid():
                import portalocker

                portalocker.unlock(self.file)
        finally:
            self.file.close()


class FileLock:
    """A named kernel lock at ``path``: exclusive or shared, with a timeout."""

    def __init__(self, path: str, name: str, timeout: float) -> None:
        self.path = path
        self.name = name
        self.timeout = timeout

    def _open(self) -> IO[bytes]:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        return os.fdopen(fd, "r+b")

    def _acquire(self, exclusive: bool, timeout: float | None) -> _Handle:
        import portalocker  # deferred: its import costs ~40 ms, paid only by lock users

        mode = portalocker.LockFlags.EXCLUSIVE if exclusive else portalocker.LockFlags.SHARED
        kind = "exclusive" if exclusive else "shared"
        limit = self.timeout if timeout is None else timeout
        started = time.monotonic()
        deadline = started + limit
        delay = _POLL_START
        waited = False
        file = self._open()
        try:
            while True:
                try:
                    portalocker.lock(file, mode | portalocker.LockFlags.NON_BLOCKING)
                    break
                except portalocker.exceptions.LockException:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        logger.debug("gave up on lock %r (%s) after %gs", self.name, kind, limit)
                        raise LockTimeout(self.name, limit) from None
                    if not waited:
                        waited = True
                        logger.debug(
                            "waiting for lock %r (%s): another process holds it; giving up "
                            "after %gs",
                            self.name,
                            kind,
                            limit,
                        )
                    time.sleep(min(delay, remaining))
                    delay = min(delay * 2, _POLL_MAX)
        except BaseException:
            file.close()
            raise
        if waited:
            elapsed = time.monotonic() - started
            logger.debug("took lock %r (%s) after %.3fs", self.name, kind, elapsed)
        return _Handle(file)

    @contextlib.contextmanager
    def exclusive(self, timeout: float | None = None) -> Iterator[None]:
        """Hold the lock alone (no other holder, shared or exclusive)."""
        handle = self._acquire(True, timeout)
        try:
            yield
        finally:
            handle.release()

    @contextlib.contextmanager
    def shared(self, timeout: float | None = None) -> Iterator[None]:
        """Hold the lock together with other shared holders, excluding exclusive ones."""
        handle = self._acquire(False, timeout)
        try:
            yield
        finally:
            handle.release()


NETWORK_FILESYSTEMS = frozenset(
    {"nfs", "nfs4", "cifs", "smb", "smb2", "smb3", "smbfs", "9p", "afs", "ncpfs", "sshfs"}
)


def filesystem_type(path: str) -> str | None:
    """The type of the filesystem holding ``path`` from /proc/mounts (Linux), else None."""
    try:
        with open("/proc/mounts", encoding="utf-8", errors="replace") as mounts:
            lines = mounts.read().splitlines()
    except OSError:
        return None
    real = os.path.realpath(path)
    best, best_type = "", None
    for line in lines:
        fields = line.split()
        if len(fields) < 3:
            continue
        mount_point = fields[1].replace("\\040", " ")
        inside = real == mount_point or real.startswith(mount_point.rstrip("/") + "/")
        if inside and len(mount_point) >= len(best):
            best, best_type = mount_point, fields[2]
    return best_type


def is_untrusted_lock_filesystem(fs_type: str | None) -> bool:
    """True for network and FUSE filesystems, whose advisory locks may not exclude anyone."""
    if fs_type is None:
        return False
    return fs_type in NETWORK_FILESYSTEMS or fs_type.startswith("fuse")
