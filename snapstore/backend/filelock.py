"""The local backend's cross-process kernel locks on files under ``<root>/locks``, with timeouts.

Each holder locks its own descriptor (never one another holder of the process uses), so
flock-style locks also exclude threads of one process from each other. A backend keeps the
descriptors of its lock files open between acquisitions (``lockfds``): locking a kept one
costs a flock and a stat, where opening it again cost ten system calls. Lock files are never
unlinked by snapstore; if someone else unlinks or replaces one, a process that locked the
old file (a kept descriptor, or one opened just before) while the path already named a new
one notices and locks the new one. The store's two main locks are also taken on a
directory that cannot vanish while the store exists (a ``guard``), so a lock file removed
while held does not let a second holder in. A forked child drops inherited handles without
unlocking, so it never releases a lock its parent holds, and closes the kept descriptors it
inherited, so it never shares one with its parent.

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
from typing import NamedTuple

from snapstore.backend.lockfds import IdleLockFiles
from snapstore.errors import LockTimeout, ReadOnlyStoreError
from snapstore.fs.mounts import NETWORK_FILESYSTEMS
from snapstore.fs.seam import LOCAL, FileSystem
from snapstore.fs.stamps import FileId, file_id
from snapstore.logs import get_logger

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no directory guards
    fcntl = None  # type: ignore[assignment]

logger = get_logger(__name__)

_POLL_MIN = 0.0005
_POLL_MAX = 0.05
_POLL_SHARE = 20
_GUARD_UNSUPPORTED = {errno.EBADF, errno.EINVAL, errno.ENOLCK, errno.EOPNOTSUPP}
_READ_ONLY_ERRNOS = frozenset({errno.EACCES, errno.EPERM, errno.EROFS})
_HELD_ERRNOS = frozenset({errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES})
"""What a non-blocking lock reports when another holder has it (EACCES where a system's
flock is built on fcntl record locks)."""


class _Handle:
    """One held lock: the lock file's descriptor (None: held without a lock) and, if any,
    the guard directory's descriptor. Knows whether it was inherited across fork; gives a
    descriptor opened for writing back to the idle ones of its lock (``idle``) on release."""

    def __init__(
        self,
        fd: int | None,
        guard_fd: int | None,
        *,
        pid: int,
        path: str = "",
        identity: FileId | None = None,
        idle: IdleLockFiles | None = None,
    ) -> None:
        self.fd = fd
        self.guard_fd = guard_fd
        self.pid = pid
        self.path = path
        self.identity = identity
        self.idle = idle

    def release(self) -> None:
        """Unlock and close (or keep idle); in a forked child only close, leaving the
        parent's lock alone."""
        fd, self.fd = self.fd, None
        try:
            if fd is not None and self.pid == os.getpid():
                _unlock(fd)
                if self.idle is not None and self.identity is not None:
                    self.idle.give(self.path, fd, self.identity, self.pid)
                    fd = None
        finally:
            if fd is not None:
                os.close(fd)
            if self.guard_fd is not None:
                os.close(self.guard_fd)  # closing releases the guard's flock (never in a child)
                self.guard_fd = None


def _still_named(path: str, identity: FileId) -> bool:
    """True while ``path`` still names the file ``identity`` describes."""
    try:
        named = os.stat(path)
    except FileNotFoundError:
        return False
    return file_id(named) == identity


def _lock_fd(fd: int, exclusive: bool, path: str) -> bool:
    """flock ``fd`` (the lock file at ``path``) without blocking; False if another holder
    has it. Any other failure (no locks on this filesystem, no lock records left, a bad
    descriptor) raises at once as an OSError naming ``path``: waiting would only end in a
    LockTimeout blaming a holder there is not. portalocker, whose import alone costs a
    command-line run 15-20 ms, is used only where there is no ``fcntl`` (it locks with the
    same ``flock`` elsewhere)."""
    if fcntl is None:  # pragma: no cover - Windows
        import portalocker

        flags = portalocker.LockFlags.EXCLUSIVE if exclusive else portalocker.LockFlags.SHARED
        try:
            with os.fdopen(fd, "rb", closefd=False) as file:
                portalocker.lock(file, flags | portalocker.LockFlags.NON_BLOCKING)
        except portalocker.exceptions.LockException:
            return False
        return True
    mode = (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB
    try:
        fcntl.flock(fd, mode)
    except OSError as error:
        if error.errno in _HELD_ERRNOS:
            return False
        raise OSError(
            error.errno, f"cannot lock the lock file ({error.strerror or error})", path
        ) from error
    return True


def _unlock(fd: int) -> None:
    """Release the flock of ``fd``."""
    if fcntl is None:  # pragma: no cover - Windows
        import portalocker

        with os.fdopen(fd, "rb", closefd=False) as file:
            portalocker.unlock(file)
        return
    fcntl.flock(fd, fcntl.LOCK_UN)


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


class _Opened(NamedTuple):
    """A lock file's descriptor (None: missing, and this process cannot create it), the
    identity of the file it is open on, and the error that said this process may not
    write it (None: open for writing)."""

    fd: int | None
    identity: FileId | None
    refused: OSError | None


class FileLock:
    """A named kernel lock at ``path``: exclusive or shared, with a timeout.

    ``guard``: a directory locked in the same mode together with the file (see the module
    docstring). ``fs``: the I/O seam, through which a missing lock file (and its directory)
    is created. ``idle``: where descriptors are kept open between acquisitions (None: each
    acquisition opens the file and closes it after).
    """

    def __init__(
        self,
        path: str,
        name: str,
        timeout: float,
        *,
        guard: str | None = None,
        fs: FileSystem = LOCAL,
        idle: IdleLockFiles | None = None,
    ) -> None:
        self.path = path
        self.name = name
        self.timeout = timeout
        self.guard = guard
        self.fs = fs
        self.idle = idle

    def _open(self, pid: int) -> _Opened:
        """An idle descriptor of the lock file, else the file opened for writing (created
        through the seam if missing) if this process may; else read-only (no descriptor if
        it is missing too), with the error that said this process may not write it."""
        if self.idle is not None:
            kept = self.idle.take(self.path, pid)
            if kept is not None:
                return _Opened(kept[0], kept[1], None)
        try:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CLOEXEC)
            except FileNotFoundError:
                fd = self._create()
            return _Opened(fd, _identity(fd), None)
        except OSError as error:
            if error.errno not in _READ_ONLY_ERRNOS:
                raise
            refused = error
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return _Opened(None, None, refused)
        return _Opened(fd, _identity(fd), refused)

    def _create(self) -> int:
        """Create the missing lock file (and its directory, ``locks/sessions`` say, if that
        is missing too)."""
        flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC
        try:
            return self.fs.open(self.path, flags, 0o644)
        except FileNotFoundError:
            with contextlib.suppress(FileExistsError):
                self.fs.mkdir(os.path.dirname(self.path), 0o755)
            return self.fs.open(self.path, flags, 0o644)

    def _open_guard(self) -> int | None:
        if self.guard is None or fcntl is None:
            return None
        return os.open(self.guard, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)

    def _try_once(self, exclusive: bool) -> _Handle | None:
        """Take the lock if it is free now; None if another holder has it."""
        pid = os.getpid()
        guard_fd = self._open_guard()
        fd = None
        try:
            if guard_fd is not None and not _try_guard(guard_fd, exclusive):
                os.close(guard_fd)
                return None
            while True:
                fd, identity, refused = self._open(pid)
                if exclusive and refused is not None:
                    raise ReadOnlyStoreError(
                        f"the store is read-only for this process ({self.path} is not "
                        f"writable), and this operation would change it (it needs the "
                        f"{self.name!r} lock exclusively)"
                    ) from refused
                if fd is None or identity is None:
                    logger.warning(
                        "reading without the %r lock: %s is missing and this process cannot "
                        "create it, so a gc running meanwhile may remove what is being read",
                        self.name,
                        self.path,
                    )
                    return _Handle(None, guard_fd, pid=pid)
                idle = self.idle if refused is None else None
                if not _lock_fd(fd, exclusive, self.path):
                    if idle is not None:
                        idle.give(self.path, fd, identity, pid)
                    else:
                        os.close(fd)
                    fd = None
                    if guard_fd is not None:
                        os.close(guard_fd)
                    return None
                if _still_named(self.path, identity):
                    return _Handle(
                        fd, guard_fd, pid=pid, path=self.path, identity=identity, idle=idle
                    )
                logger.debug(
                    "lock file %s was replaced while being locked; locking again", self.path
                )
                os.close(fd)
                fd = None
        except BaseException:
            if fd is not None:
                os.close(fd)
            if guard_fd is not None:
                os.close(guard_fd)
            raise

    def _acquire(self, exclusive: bool, timeout: float | None) -> _Handle:
        limit = self.timeout if timeout is None else timeout
        started = time.monotonic()
        deadline = started + limit  # a non-number fails here, lock free or not (NaN: at open)
        handle = self._try_once(exclusive)
        if handle is not None:  # the common case: free at once, nothing to log
            return handle
        kind = "exclusive" if exclusive else "shared"
        waited = False
        while True:
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
            time.sleep(min(poll_delay(time.monotonic() - started), remaining))
            handle = self._try_once(exclusive)

    def exclusive(self, timeout: float | None = None) -> contextlib.AbstractContextManager[None]:
        """Hold the lock alone (no other holder, shared or exclusive)."""
        return _Holding(self, True, timeout)

    def shared(self, timeout: float | None = None) -> contextlib.AbstractContextManager[None]:
        """Hold the lock together with other shared holders, excluding exclusive ones."""
        return _Holding(self, False, timeout)

    @contextlib.contextmanager
    def exclusive_if_free(self) -> Iterator[bool]:
        """Hold the lock alone if nobody holds it now (yields True), else yield False at once."""
        handle = self._try_once(True)
        try:
            yield handle is not None
        finally:
            if handle is not None:
                handle.release()


class _Holding(contextlib.AbstractContextManager[None]):
    """A hold of a lock as a context manager (a plain class: a lock is taken several times
    per create, and a generator-based one costs more than the flock)."""

    __slots__ = ("_exclusive", "_handle", "_lock", "_timeout")

    def __init__(self, lock: FileLock, exclusive: bool, timeout: float | None) -> None:
        self._lock = lock
        self._exclusive = exclusive
        self._timeout = timeout
        self._handle: _Handle | None = None

    def __enter__(self) -> None:
        self._handle = self._lock._acquire(self._exclusive, self._timeout)

    def __exit__(self, *exc_info: object) -> None:
        handle, self._handle = self._handle, None
        if handle is not None:
            handle.release()


def poll_delay(waited: float) -> float:
    """The pause before the next try of a lock already waited for ``waited`` seconds: a
    twentieth of that, at least half a millisecond and at most 50 ms. A waiter so takes a
    lock at most 5% (or half a millisecond) after its holder lets it go: a create waiting
    behind a short exclusive hold (a fold's deletions) loses little more than the hold,
    where sleeps doubling from 1 ms could lose as much again. A long wait still costs only
    20 tries a second."""
    return min(_POLL_MAX, max(_POLL_MIN, waited / _POLL_SHARE))


def _identity(fd: int) -> FileId:
    """The identity of the file open as ``fd`` (closing it if that cannot be read)."""
    try:
        return file_id(os.fstat(fd))
    except BaseException:
        os.close(fd)
        raise


def is_untrusted_lock_filesystem(fs_type: str | None) -> bool:
    """True for network and FUSE filesystems, whose advisory locks may not exclude anyone."""
    if fs_type is None:
        return False
    return fs_type in NETWORK_FILESYSTEMS or fs_type.startswith("fuse")
