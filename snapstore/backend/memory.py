"""A backend in memory, for tests: the same contract as the local one, no filesystem.

Objects live in a dict for the life of the backend; locks are in-process reader-writer locks
with the same timeouts. Several ``SnapStore`` objects (and threads) may share one backend, as
processes share a directory.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import threading
import time
from collections import Counter
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass

from snapstore.backend.names import check_name
from snapstore.backend.seam import Handle, Kind, ObjectInfo, Properties, Version
from snapstore.backend.wholeobjects import WritesWhole
from snapstore.errors import ConcurrentWriteError, LockTimeout, StoreNotFoundError
from snapstore.fs.reading import UnfitFileError


@dataclass(frozen=True)
class _Object:
    data: bytes
    version: int
    written_ns: int


class _Holders:
    """Who holds one named lock: shared holders, or one exclusive holder."""

    def __init__(self) -> None:
        self.condition = threading.Condition()
        self.readers = 0
        self.writer = False


class _MemoryLock:
    """A reader-writer lock with a timeout; every lock of one name shares its ``_Holders``
    (each with the label its caller gave, for errors)."""

    def __init__(self, name: str, timeout: float, holders: _Holders) -> None:
        self.name = name
        self.timeout = timeout
        self._holders = holders

    def _acquire(self, exclusive: bool, timeout: float | None, wait: bool = True) -> bool:
        limit = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        held = self._holders
        with held.condition:
            while held.writer or (exclusive and held.readers):
                remaining = deadline - time.monotonic()
                if not wait:
                    return False
                if remaining <= 0:
                    raise LockTimeout(self.name, limit)
                held.condition.wait(remaining)
            if exclusive:
                held.writer = True
            else:
                held.readers += 1
            return True

    def _release(self, exclusive: bool) -> None:
        held = self._holders
        with held.condition:
            if exclusive:
                held.writer = False
            else:
                held.readers -= 1
            held.condition.notify_all()

    @contextlib.contextmanager
    def shared(self, timeout: float | None = None) -> Iterator[None]:
        self._acquire(False, timeout)
        try:
            yield
        finally:
            self._release(False)

    @contextlib.contextmanager
    def exclusive(self, timeout: float | None = None) -> Iterator[None]:
        self._acquire(True, timeout)
        try:
            yield
        finally:
            self._release(True)

    @contextlib.contextmanager
    def exclusive_if_free(self) -> Iterator[bool]:
        got = self._acquire(True, 0, wait=False)
        try:
            yield got
        finally:
            if got:
                self._release(True)


class _StagedBytes:
    """An object staged in memory (see ``StagedObject``)."""

    def __init__(self, backend: MemoryBackend, kind: Kind) -> None:
        self._backend = backend
        self._kind = kind
        self._parts: list[bytes] = []
        self.size = 0

    def write(self, data: bytes | memoryview) -> None:
        self._parts.append(bytes(data))
        self.size += len(data)

    def restart(self) -> None:
        self._parts = []
        self.size = 0

    def commit(self, name: str, *, name_durable: bool = False) -> None:
        self._backend.write(Handle(self._kind, name), b"".join(self._parts))
        self._parts = []

    def abort(self) -> None:
        self._parts = []


class MemoryBackend(WritesWhole):
    """A store held in memory (see the module docstring)."""

    def __init__(self, *, lock_timeout: float = 30.0) -> None:
        self.properties = Properties(durable=False, local_root=None)
        self.lock_timeout = lock_timeout
        self._objects: dict[Handle, _Object] = {}
        self._versions = itertools.count(1)
        self._mutex = threading.Lock()
        self._locks: dict[str, _Holders] = {}
        self._changes: Counter[tuple[Kind, str]] = Counter()
        self._created = False

    def open(self, *, create: bool) -> bool:
        """True; a backend never opened with ``create`` holds no store (StoreNotFoundError)."""
        if create:
            self._created = True
        elif not self._created:
            raise StoreNotFoundError(f"no store in {self.describe(Handle(Kind.MARKER, ''))}")
        return True

    def describe(self, handle: Handle) -> str:
        check_name(handle)
        return f"memory-{id(self):x}:{handle.kind.value}/{handle.name}"

    def _get(self, handle: Handle) -> _Object:
        check_name(handle)
        found = self._objects.get(handle)
        if found is None:
            raise FileNotFoundError(errno.ENOENT, "no such object", self.describe(handle))
        return found

    def stat(self, handle: Handle) -> ObjectInfo:
        found = self._get(handle)
        return ObjectInfo(len(found.data), found.version, found.written_ns)

    def read(self, handle: Handle, *, max_bytes: int) -> tuple[bytes, ObjectInfo]:
        found = self._get(handle)
        if len(found.data) > max_bytes:
            raise UnfitFileError(errno.EFBIG, f"{self.describe(handle)} is over {max_bytes}")
        return found.data, ObjectInfo(len(found.data), found.version, found.written_ns)

    def read_range(self, handle: Handle, offset: int, length: int) -> bytes:
        return self._get(handle).data[offset : offset + length]

    def read_head(self, handle: Handle, length: int) -> tuple[bytes, ObjectInfo]:
        found = self._get(handle)
        return found.data[:length], ObjectInfo(len(found.data), found.version, found.written_ns)

    def chunks(self, handle: Handle, chunk_bytes: int) -> Iterator[bytes]:
        data = self._get(handle).data
        for start in range(0, len(data), chunk_bytes):
            yield data[start : start + chunk_bytes]

    def stage(self, kind: Kind, size_hint: int = 0) -> _StagedBytes:
        return _StagedBytes(self, kind)

    def write(self, handle: Handle, data: bytes, *, durable: bool = True) -> None:
        check_name(handle)
        with self._mutex:
            self._objects[handle] = _Object(bytes(data), next(self._versions), time.time_ns())
            self._changed(handle)

    def _changed(self, handle: Handle) -> None:
        """Count a change of the objects sharing ``handle``'s first name component."""
        self._changes[(handle.kind, handle.name.partition("/")[0])] += 1

    def delete(
        self, handle: Handle, *, durable: bool = True, version: Version | None = None
    ) -> None:
        check_name(handle)
        with self._mutex:
            found = self._objects.get(handle)
            if found is None:
                raise FileNotFoundError(errno.ENOENT, "no such object", self.describe(handle))
            if version is not None and found.version != version:
                raise ConcurrentWriteError(
                    errno.ESTALE, "replaced since it was read; not deleted", self.describe(handle)
                )
            del self._objects[handle]
            self._changed(handle)

    def names(self, kind: Kind, prefix: str = "") -> list[str]:
        with self._mutex:
            handles = list(self._objects)
        return sorted(h.name for h in handles if h.kind is kind and h.name.startswith(prefix))

    def infos(self, kind: Kind, prefix: str = "") -> dict[str, ObjectInfo | None]:
        with self._mutex:
            found = [(h, o) for h, o in self._objects.items() if h.kind is kind]
        return {
            h.name: ObjectInfo(len(o.data), o.version, o.written_ns)
            for h, o in sorted(found, key=lambda item: item[0].name)
            if h.name.startswith(prefix)
        }

    def pack_log(self) -> None:
        """None: packs are listed at every refresh (a dict lookup)."""
        return None

    def listing_stamp(self, kind: Kind, prefix: str) -> Hashable | None:
        if not prefix.endswith("/") or "/" in prefix[:-1]:
            return None
        with self._mutex:
            return self._changes[(kind, prefix[:-1])]

    def listing_stamps(self, kind: Kind, prefix: str = "") -> dict[str, Hashable | None] | None:
        """For the manifests: each session's change count (settled: every change counts)."""
        group_prefix, slash, rest = prefix.partition("/")
        if kind is not Kind.MANIFEST or rest:
            return None
        with self._mutex:
            groups = {h.name.partition("/")[0] for h in self._objects if h.kind is kind}
            return {
                group: self._changes[(kind, group)]
                for group in sorted(groups)
                if (group == group_prefix if slash else group.startswith(group_prefix))
            }

    def note_existing(self, handle: Handle) -> None:
        return None

    def flush(self) -> None:
        return None

    def flush_deletions(self, kind: Kind, names: Sequence[str] | None = None) -> None:
        return None

    def lock(self, name: str, label: str | None = None) -> _MemoryLock:
        with self._mutex:
            holders = self._locks.setdefault(name, _Holders())
        return _MemoryLock(label or name, self.lock_timeout, holders)

    def tidy(self) -> None:
        return None

    def stale_temps(self) -> list[str]:
        return []

    def remove_stale_temps(self) -> int:
        return 0

    def now_ns(self) -> int:
        """This process's clock, which stamps the objects' write times."""
        return time.time_ns()

    def close(self) -> None:
        return None
