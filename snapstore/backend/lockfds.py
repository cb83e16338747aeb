"""Lock files kept open between acquisitions: a long-lived process locks the same few files
(the gc lock, its intent, a session's lock, the locks of a base directory and its ancestors)
at every create, and opening each again costs more than the lock itself.

An idle descriptor is one no holder uses: it is unlocked, and it is handed to one acquisition
at a time, so two holders in one process never share an open file (flock locks belong to the
open file, and two holders sharing one would not exclude each other). Each descriptor keeps
the identity of the file it was opened on, so an acquisition that finds the path now naming
another file (someone removed or replaced the lock file) drops it and opens the path again.

Idle descriptors belong to the process that opened them: a forked child closes the ones it
inherited (an idle descriptor shared with the parent would share its locks), at the fork
and, should a fork bypass Python's hooks, at its first acquisition. At most
``MAX_IDLE`` are kept per backend, the least recently used closed first; ``close`` (a store's
``close``, or its collection) closes them all.
"""

from __future__ import annotations

import contextlib
import os
import threading
import weakref
from collections import OrderedDict

from snapstore.fs.stamps import FileId

MAX_IDLE = 64
"""Idle lock descriptors one backend keeps open at most."""


class IdleLockFiles:
    """The idle descriptors of one backend's lock files, by path (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: OrderedDict[str, list[tuple[int, FileId]]] = OrderedDict()
        self._count = 0
        self._pid = os.getpid()
        _ALL.add(self)
        weakref.finalize(self, _close_entries, self._idle)

    def take(self, path: str, pid: int) -> tuple[int, FileId] | None:
        """An idle descriptor of ``path`` with the identity of its file, now this caller's
        alone; None if there is none. ``pid``: the caller's process id."""
        with self._lock:
            if pid != self._pid:
                self._drop_inherited(pid)
            found = self._idle.get(path)
            if not found:
                return None
            self._count -= 1
            entry = found.pop()
            if not found:
                del self._idle[path]
            return entry

    def give(self, path: str, fd: int, identity: FileId, pid: int) -> None:
        """Keep the unlocked descriptor ``fd`` of ``path`` for the next acquisition (or close
        it, if this process did not open it or too many are kept)."""
        with self._lock:
            if pid != self._pid:
                self._drop_inherited(pid)
                os.close(fd)
                return
            self._idle.setdefault(path, []).append((fd, identity))
            self._idle.move_to_end(path)
            self._count += 1
            while self._count > MAX_IDLE:
                oldest = next(iter(self._idle))
                entries = self._idle[oldest]
                os.close(entries.pop(0)[0])
                self._count -= 1
                if not entries:
                    del self._idle[oldest]

    def close(self) -> None:
        """Close every idle descriptor (held ones are closed by their holders' release)."""
        with self._lock:
            _close_entries(self._idle)
            self._count = 0

    def _drop_inherited(self, pid: int) -> None:
        """In a forked child: close the descriptors inherited from the parent (under the
        lock)."""
        _close_entries(self._idle)
        self._count = 0
        self._pid = pid

    def after_fork_in_child(self) -> None:
        """Run in a forked child, where only the forking thread lives: the lock may have been
        held by another thread of the parent, so it is made again rather than taken."""
        self._lock = threading.Lock()
        self._drop_inherited(os.getpid())


def _close_entries(idle: OrderedDict[str, list[tuple[int, FileId]]]) -> None:
    """Close every descriptor of ``idle`` (also when its pool is collected: then no thread
    can use it any more, so no lock is needed)."""
    while idle:
        for fd, _ in idle.popitem()[1]:
            with contextlib.suppress(OSError):
                os.close(fd)


_ALL: weakref.WeakSet[IdleLockFiles] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for pool in list(_ALL):
        pool.after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
