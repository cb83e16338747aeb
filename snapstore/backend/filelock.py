"""The local backend's cross-process kernel locks on files under ``<root>/locks``, with timeouts.

Each acquisition opens its own descriptor, so flock-style locks also exclude threads of one
process from each other. Lock files are never unlinked by snapstore; if someone else unlinks
one, a process that locked the old file while the path already named a new one notices and
locks again. The store's two main locks are also taken on a directory that cannot vanish
while the store exists (a ``guard``), so a lock file removed while held does not let a second
holder in. A forked child drops inherited handles without unlocking, so it never releases a
lock its parent holds.

A process that may only read the store opens the lock file read-only: a shared lock works on
such a descriptor (flock ignores the open mode), so a read-only reader still keeps gc away
from what it reads. It never takes an exclusive lock (every operation that does writes):
that raises ReadOnlyStoreError. If the lock file is missing and cannot be created, a shared
hold reads without any lock (see docs/concurrency.md, "Read-only use").
"""

from __future__ import annotations

import contextlib
import errno
import os
import time
from collections.abc import Iterator
from typing import IO

from snapstore.errors import LockTimeout, ReadOnlyStoreError
from snapstore.fs.mounts import NETWORK_FILESYSTEMS
from snapstore.fs.seam import LOCAL, FileSystem
from snapstore.fs.stamps import file_id
from snapstore.logs import get_logger

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no directory guards
    fcntl = None  # type: ignore[assignment]

logger = get_logger(__name__)

_POLL_START = 0.001
_POLL_MAX = 0.05
_GUARD_UNSUPPORTED = {errno.EBADF, errno.EINVAL, errno.ENOLCK, errno.EOPNOTSUPP}
_READ_ONLY_ERRNOS = frozenset({errno.EACCES, errno.EPERM, errno.EROFS})
_HELD_ERRNOS = frozenset({errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES})
"""What a non-blocking lock reports when another holder has it (EACCES where a system's
flock is built on fcntl record locks)."""


class _Handle:
    """One held lock: the open lock file (None: held without a lock) and, if any, the guard
    directory's descriptor. Knows whether it was inherited across fork."""

    def __init__(self, file: IO[bytes] | None, guard_fd: int | None) -> None:
        self.file = file
        self.guard_fd = guard_fd
        self.pid = os.getpid()

    def release(self) -> None:
        """Unlock and close; in a forked child only close, leaving the parent's lock alone."""
        try:
            if self.file is not None and self.pid == os.getpid():
                _unlock_file(self.file)
        finally:
            if self.file is not None:
                self.file.close()
            if self.guard_fd is not None:
                os.close(self.guard_fd)  # closing releases the guard's flock (never in a child)


def _same_file(fd: int, path: str) -> bool:
    """True while ``path`` still names the file open as ``fd``."""
    try:
        named = os.stat(path)
    except FileNotFoundError:
        return False
    return file_id(named) == file_id(os.fstat(fd))


def _lock_file(file: IO[bytes], exclusive: bool, path: str) -> bool:
    """flock ``file`` (the lock file at ``path``) without blocking; False if another holder
    has it. Any other failure (no locks on this filesystem, no lock records left, a bad
    descriptor) raises at once as an OSError naming ``path``: waiting would only end in a
    LockTimeout blaming a holder there is not. portalocker, whose import alone costs a
    command-line run 15-20 ms, is used only where there is no ``fcntl`` (it locks with the
    same ``flock`` elsewhere)."""
    if fcntl is None:  # pragma: no cover - Windows
        import portalocker

        flags = portalocker.LockFlags.EXCLUSIVE if exclusive else portalocker.LockFlags.SHARED
        try:
            portalocker.lock(file, flags | portalocker.LockFlags.NON_BLOCKING)
        except portalocker.exceptions.LockException:
            return False
        return True
    mode = (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB
    try:
        fcntl.flock(file.fileno(), mode)
    except OSError as error:
        if error.errno in _HELD_ERRNOS:
            return False
        raise OSError(
            error.errno, f"cannot lock the lock file ({error.strerror or error})", path
        ) from error
    return True


def _unlock_file(file: IO[bytes]) -> None:
    """Release the flock of ``file``."""
    if fcntl is None:  # pragma: no cover - Windows
        import portalocker

        portalocker.unlock(file)
        return
    fcntl.flock(file.fileno(), fcntl.LOCK_UN)


def _try_guard(guard_fd: int, exclusive: bool) -> bool:
    """flock the guard directory without blocking; True if taken (or guards unsupported)."""
    assert fcntl is not None
    mode = (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB
    try:
        fcntl.flock(guard_fd, mode)
    except BlockingIOError:
        return False
    except OSError as error:
        if error.errno in _GUARD_UNSUPPORTED:
            return True
        raise
    return True


class FileLock:
    """A named kernel lock at ``path``: exclusive or shared, with a timeout.

    ``guard``: a directory locked in the same mode together with the file (see the module
    docstring). ``fs``: the I/O seam, through which a missing lock file is created.
    """

    def __init__(
        self,
        path: str,
        name: str,
        timeout: float,
        *,
        guard: str | None = None,
        fs: FileSystem = LOCAL,
    ) -> None:
        self.path = path
        self.name = name
        self.timeout = timeout
        self.guard = guard
        self.fs = fs

    def _open(self) -> tuple[IO[bytes] | None, OSError | None]:
        """The lock file, opened for writing (created through the seam if missing) if this
        process may; else read-only (None if it is missing too), with the error that said
        this process may not write it."""
        try:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CLOEXEC)
            except FileNotFoundError:
                fd = self.fs.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            return os.fdopen(fd, "r+b"), None
        except OSError as error:
            if error.errno not in _READ_ONLY_ERRNOS:
                raise
            refused = error
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return None, refused
        return os.fdopen(fd, "rb"), refused

    def _open_guard(self) -> int | None:
        if self.guard is None or fcntl is None:
            return None
        return os.open(self.guard, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)

    def _try_once(self, exclusive: bool) -> _Handle | None:
        """Take the lock if it is free now; None if another holder has it."""
        guard_fd = self._open_guard()
        file = None
        try:
            if guard_fd is not None and not _try_guard(guard_fd, exclusive):
                os.close(guard_fd)
                return None
            while True:
                file, refused = self._open()
                if exclusive and refused is not None:
                    raise ReadOnlyStoreError(
                        f"the store is read-only for this process ({self.path} is not "
                        f"writable), and this operation would change it (it needs the "
                        f"{self.name!r} lock exclusively)"
                    ) from refused
                if file is None:
                    logger.warning(
                        "reading without the %r lock: %s is missing and this process cannot "
                        "create it, so a gc running meanwhile may remove what is being read",
                        self.name,
                        self.path,
                    )
                    return _Handle(None, guard_fd)
                if not _lock_file(file, exclusive, self.path):
                    file.close()
                    if guard_fd is not None:
                        os.close(guard_fd)
                    return None
                if _same_file(file.fileno(), self.path):
                    return _Handle(file, guard_fd)
                logger.debug(
                    "lock file %s was replaced while being locked; locking again", self.path
                )
                file.close()
        except BaseException:
            if file is not None:
                file.close()
            if guard_fd is not None:
                os.close(guard_fd)
            raise

    def _acquire(self, exclusive: bool, timeout: float | None) -> _Handle:
        kind = "exclusive" if exclusive else "shared"
        limit = self.timeout if timeout is None else timeout
        started = time.monotonic()
        deadline = started + limit
        delay = _POLL_START
        waited = False
        while True:
            handle = self._try_once(exclusive)
            if handle is not None:
                if waited:
                    elapsed = time.monotonic() - started
                    logger.debug("took lock %r (%s) after %.3fs", self.name, kind, elapsed)
                return handle
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                logger.debug("gave up on lock %r (%s) after %gs", self.name, kind, limit)
                raise LockTimeout(self.name, limit)
            if not waited:
                waited = True
                logger.debug(
                    "waiting for lock %r (%s): another process holds it; giving up after %gs",
                    self.name,
                    kind,
                    limit,
                )
            time.sleep(min(delay, remaining))
            delay = min(delay * 2, _POLL_MAX)

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

    @contextlib.contextmanager
    def exclusive_if_free(self) -> Iterator[bool]:
        """Hold the lock alone if nobody holds it now (yields True), else yield False at once."""
        handle = self._try_once(True)
        try:
            yield handle is not None
        finally:
            if handle is not None:
                handle.release()


def is_untrusted_lock_filesystem(fs_type: str | None) -> bool:
    """True for network and FUSE filesystems, whose advisory locks may not exclude anyone."""
    if fs_type is None:
        return False
    return fs_type in NETWORK_FILESYSTEMS or fs_type.startswith("fuse")
