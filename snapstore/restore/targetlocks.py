"""The locks of directories outside the store (restore targets, create bases), keyed by
their real paths: the backend's named locks ``targets/<key>``. Only the guard of target
directories (``snapstore.restore.targets``) takes them."""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from collections import OrderedDict
from collections.abc import Iterator

from snapstore.backend.seam import Backend, Lock
from snapstore.errors import LockTimeout

MAX_CHAINS = 256
"""Directories whose locks a guard keeps made (a lock object is its name and its file)."""


class TargetLocks:
    """Locks on directories outside the store, keyed by their real path: a restore holds its
    target exclusively (and every ancestor shared); a create holds its base directory and
    every ancestor shared. So a create of a directory waits for a restore into it or into any
    directory that contains it, and restores into one target (or into a target and a
    directory inside it) run one at a time. They are the backend's locks ``targets/<key>``."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self._chains: OrderedDict[str, tuple[tuple[Lock, ...], Lock]] = OrderedDict()
        self._chains_lock = threading.Lock()

    def lock(self, real_dir: str) -> Lock:
        """The lock of one directory (given by its real path)."""
        return self.lock_of_key(target_key(real_dir), f"target {real_dir}")

    def _chain(self, real_dir: str) -> tuple[tuple[Lock, ...], Lock]:
        """The locks of the ancestors of ``real_dir`` (outermost first) and its own: made
        once per directory and kept (``MAX_CHAINS``, least recently used dropped), since a
        bridge locks the same directory at every create."""
        with self._chains_lock:
            found = self._chains.get(real_dir)
            if found is not None:
                self._chains.move_to_end(real_dir)
                return found
        found = (tuple(self.lock(a) for a in _ancestors(real_dir)), self.lock(real_dir))
        with self._chains_lock:
            self._chains[real_dir] = found
            while len(self._chains) > MAX_CHAINS:
                self._chains.popitem(last=False)
        return found

    def lock_of_key(self, key: str, label: str = "target") -> Lock:
        """The lock of the directory whose ``target_key`` is ``key``."""
        return self.backend.lock(f"targets/{key}", label)

    @contextlib.contextmanager
    def _hold(self, real_dir: str, exclusive: bool) -> Iterator[None]:
        ancestors, lock = self._chain(real_dir)
        with contextlib.ExitStack() as stack:
            for ancestor in ancestors:
                stack.enter_context(ancestor.shared())
            stack.enter_context(lock.exclusive() if exclusive else lock.shared())
            yield

    def restoring(self, real_target: str) -> contextlib.AbstractContextManager[None]:
        """Held by a restore into ``real_target`` (waits up to the timeout)."""
        return self._hold(real_target, True)

    @contextlib.contextmanager
    def restoring_if_free(self, real_target: str) -> Iterator[bool]:
        """Hold what ``restoring`` holds if none of it is held against that now (yields
        True), else yield False at once: no restore or create of the target, of a directory
        holding it, or of one inside it is running."""
        with contextlib.ExitStack() as stack:
            ancestors, lock = self._chain(real_target)
            try:
                for ancestor in ancestors:
                    stack.enter_context(ancestor.shared(timeout=0))
            except LockTimeout:
                stack.close()
                yield False
                return
            yield stack.enter_context(lock.exclusive_if_free())

    def snapshotting(self, real_base: str) -> contextlib.AbstractContextManager[None]:
        """Held by a create of ``real_base`` (waits up to the timeout)."""
        return self._hold(real_base, False)


@functools.lru_cache(maxsize=1024)
def target_key(real_dir: str) -> str:
    """The key of a directory outside the store (by its real path): names its lock file and
    the journal of a restore into it. Remembered: a bridge asks for the same few at every
    create."""
    import blake3

    return blake3.blake3(os.fsencode(real_dir)).hexdigest(length=16)


def _ancestors(real_dir: str) -> list[str]:
    """The proper ancestors of an absolute path, outermost first (``/`` included)."""
    found = []
    parent = os.path.dirname(real_dir)
    while parent != real_dir:
        found.append(parent)
        real_dir, parent = parent, os.path.dirname(parent)
    return found[::-1]
