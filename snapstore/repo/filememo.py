"""Values decoded from store objects, remembered per process while each keeps its version.

A backend replaces objects whole, never in place, so an object whose version is unchanged
holds the bytes it held before; a bridge that opens a new ``SnapStore`` for every checkpoint
then skips reading and decoding them again. Only derived, re-creatable data goes here (caches,
pack indexes): a value is never trusted beyond the object it came from.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from snapstore.backend.seam import Backend, Handle, Kind

Value = TypeVar("Value")
Key = tuple[str, Handle]
"""(the backend's own key, the object): unique across the backends of a process."""


def backend_key(backend: Backend) -> str:
    """A string naming a backend (its marker object, as the backend describes it)."""
    return backend.describe(Handle(Kind.MARKER, ""))


class FileMemo(Generic[Value]):
    """Decoded values by object; with ``limit``, the oldest are dropped beyond that many.
    Threads may share one (changes are locked; two may still decode the same object)."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = limit
        self._values: dict[Key, tuple[Hashable, Value]] = {}
        self._lock = threading.Lock()
        if hasattr(os, "register_at_fork"):  # a child must not inherit a lock held mid-fork
            os.register_at_fork(after_in_child=self._new_lock)

    def _new_lock(self) -> None:
        self._lock = threading.Lock()

    def read(
        self,
        backend: Backend,
        handle: Handle,
        decode: Callable[[bytes], Value],
        *,
        max_bytes: int,
    ) -> Value:
        """``decode`` of the object's bytes, reusing the remembered value while the object
        keeps its version; OSError if it cannot be read, is not an object or is over
        ``max_bytes`` (checked before reading)."""
        key = (backend_key(backend), handle)
        known = self._values.get(key)
        if known is not None and known[0] == backend.stat(handle).version:
            return known[1]
        data, info = backend.read(handle, max_bytes=max_bytes)
        value = decode(data)
        self._store(key, info.version, value)
        return value

    def known(self, backend: Backend, handle: Handle, version: Hashable) -> Value | None:
        """The value remembered for the object at ``version`` (its current one, which the
        caller has just read), or None if it was not remembered at that version."""
        known = self._values.get((backend_key(backend), handle))
        return known[1] if known is not None and known[0] == version else None

    def remember(
        self, backend: Backend, handle: Handle, value: Value, *, version: Hashable | None = None
    ) -> None:
        """Remember ``value`` as what the object just written decodes to; ``version``, the
        object's version read right after the write (when others may replace it since),
        else it is read now."""
        key = (backend_key(backend), handle)
        if version is None:
            try:
                version = backend.stat(handle).version
            except OSError:
                with self._lock:
                    self._values.pop(key, None)
                return
        self._store(key, version, value)

    def forget(self, keep: Callable[[Key], bool]) -> None:
        """Drop every remembered value whose key ``keep`` rejects."""
        with self._lock:
            for key in [k for k in self._values if not keep(k)]:
                del self._values[key]

    def _store(self, key: Key, version: Hashable, value: Value) -> None:
        with self._lock:
            self._values.pop(key, None)
            if self.limit is not None and len(self._values) >= self.limit:
                del self._values[next(iter(self._values))]
            self._values[key] = (version, value)
