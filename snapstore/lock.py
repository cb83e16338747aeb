"""Cross-process kernel locks on files under ``<root>/locks``, with timeouts.

Each acquisition opens its own descriptor, so flock-style locks also exclude threads of one
process from each other. Lock files are never unlinked. A forked child drops inherited
handles without unlocking, so it never releases a lock its parent holds.

A process that may only read the store opens the lock file read-only: a shared lock works on
such a descriptor (flock ignores the open mode), so a read-only reader still keeps gc away
from what it reads. It never takes an exclusive lock (every operation that does writes):
that raises ReadOnlyStoreError. If the lock file is missing and cannot be created, a shared
hold reads without any lock (see docs/concurrency.md, "Read-only use").
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import time
from collections.abc import Iterator
from typing import IO

from snapstore.errors import LockTimeout, ReadOnlyStoreError

logger = logging.getLogger(__name__)
_POLL_START = 0.001
_POLL_MAX = 0.05
_READ_ONLY_ERRNOS = frozenset({errno.EACCES, errno.EPERM, errno.EROFS})


class _Handle:
    """One open lock file (None: held without a lock); knows whether it was inherited across
    fork."""

    def __init__(self, file: IO[bytes] | None) -> None:
        self.file = file
        self.pid = os.getpid()

    def release(self) -> None:
        """Unlock and close; in a forked child only close, leaving the parent's lock alone."""
        if self.file is None:
            return
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

    def _open(self) -> tuple[IO[bytes] | None, bool]:
        """The lock file, opened for writing (created if missing) if this process may, else
        read-only (None if it is missing too); and whether it is writable."""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            return os.fdopen(fd, "r+b"), True
        except OSError as error:
            if error.errno not in _READ_ONLY_ERRNOS:
                raise
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return None, False
        return os.fdopen(fd, "rb"), False

    def _acquire(self, exclusive: bool, timeout: float | None) -> _Handle:
        import portalocker  # deferred: its import costs ~40 ms, paid only by lock users

        file, writable = self._open()
        if exclusive and not writable:
            if file is not None:
                file.close()
            raise ReadOnlyStoreError(
                f"the store is read-only for this process ({self.path} is not writable), "
                f"and this operation would change it (it needs the {self.name!r} lock "
                "exclusively)"
            )
        if file is None:
            logger.warning(
                "reading without the %r lock: %s is missing and this process cannot create "
                "it, so a gc running meanwhile may remove what is being read",
                self.name,
                self.path,
            )
            return _Handle(None)
        mode = portalocker.LockFlags.EXCLUSIVE if exclusive else portalocker.LockFlags.SHARED
        kind = "exclusive" if exclusive else "shared"
        limit = self.timeout if timeout is None else timeout
        started = time.monotonic()
        deadline = started + limit
        delay = _POLL_START
        waited = False
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
