"""Values decoded from files, remembered per process while each file keeps its identity.

snapstore replaces its files by rename, never rewrites them in place, so a file whose inode,
size, mtime, ctime and device are unchanged holds the bytes it held before; a bridge that
opens a new ``SnapStore`` for every checkpoint then skips reading and decoding them again.
Only derived, re-creatable data goes here (caches, pack indexes): a value is never trusted
beyond the file it came from.
"""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from snapstore.fs.reading import UnfitFileError, open_regular, read_all

Identity = tuple[int, int, int, int, int]
Value = TypeVar("Value")


def identity_of(info: os.stat_result) -> Identity:
    """The stat fields that change whenever a file is replaced or modified."""
    return (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_dev)


class FileMemo(Generic[Value]):
    """Decoded values by path; with ``limit``, the oldest are dropped beyond that many.
    Threads may share one (changes are locked; two may still decode the same file)."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = limit
        self._values: dict[str, tuple[Identity, Value]] = {}
        self._lock = threading.Lock()
        if hasattr(os, "register_at_fork"):  # a child must not inherit a lock held mid-fork
            os.register_at_fork(after_in_child=self._new_lock)

    def _new_lock(self) -> None:
        self._lock = threading.Lock()

    def read(self, path: str, decode: Callable[[bytes], Value], *, max_bytes: int) -> Value:
        """``decode`` of the file's bytes, reusing the remembered value if the open file
        still has its identity; OSError if it cannot be read, is not a regular file or is
        over ``max_bytes`` (checked before reading)."""
        fd = open_regular(path)
        try:
            info = os.fstat(fd)
            identity = identity_of(info)
            known = self._values.get(path)
            if known is not None and known[0] == identity:
                return known[1]
            if info.st_size > max_bytes:
                raise UnfitFileError(
                    errno.EFBIG, f"{path} is {info.st_size} bytes, over the {max_bytes} allowed"
                )
            data = read_all(fd, info.st_size)
        finally:
            os.close(fd)
        value = decode(data)
        self._store(path, identity, value)
        return value

    def remember(self, path: str, value: Value) -> None:
        """Remember ``value`` as what the file just written at ``path`` decodes to."""
        try:
            identity = identity_of(os.stat(path))
        except OSError:
            self._values.pop(path, None)
            return
        self._store(path, identity, value)

    def forget(self, keep: Callable[[str], bool]) -> None:
        """Drop every remembered path for which ``keep`` is false."""
        with self._lock:
            for path in [p for p in self._values if not keep(p)]:
                del self._values[path]

    def _store(self, path: str, identity: Identity, value: Value) -> None:
        with self._lock:
            self._values.pop(path, None)
            if self.limit is not None and len(self._values) >= self.limit:
                del self._values[next(iter(self._values))]
            self._values[path] = (identity, value)
