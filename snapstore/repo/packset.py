"""The packs of a store as this process sees them: which digests each pack holds, and reads.

Indexes are loaded lazily and kept in memory (packs are immutable); ``refresh`` lists them
again, so a caller that refreshes right after taking the gc lock sees every pack another
process published and none that gc deleted (gc deletes only under the exclusive gc lock).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass

from snapstore.errors import CorruptPackError, MissingBlobError
from snapstore.format.packfile import PackIndex, is_pack_id
from snapstore.repo.backend import Backend, Handle, Kind
from snapstore.repo.packs import PackSizeError, forget_indexes, read_index


@dataclass(frozen=True)
class Location:
    """Where one blob's bytes lie: a range of a pack file."""

    pack_id: str
    offset: int
    size: int


class PackSet:
    """The packs of one store root."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self._lock = threading.Lock()
        self._indexes: dict[str, PackIndex] = {}
        self._where: dict[bytes, PackIndex] = {}
        self._broken: dict[str, str] = {}
        self._damaged: dict[bytes, str] = {}
        self._loaded = False

    def _listed(self) -> tuple[set[str], set[str]]:
        """(ids with an index, ids with a pack) now."""
        indexed = {name for name in self.backend.names(Kind.INDEX) if is_pack_id(name)}
        packed = {name for name in self.backend.names(Kind.PACK) if is_pack_id(name)}
        return indexed, packed

    def refresh(self) -> None:
        """Re-list ``packs/``: load indexes that appeared, forget packs that went away.

        Listed under the lock: a pack another thread publishes and registers meanwhile is
        then either in the listing or registered after it, never dropped by it."""
        with self._lock:
            indexed, packed = self._listed()
            forget_indexes(self.backend, indexed)
            for gone in set(self._indexes) - indexed:
                del self._indexes[gone]
            self._broken = {}
            self._damaged = {}
            for pack_id in sorted(indexed):
                if pack_id in self._indexes:
                    continue
                try:
                    self._indexes[pack_id] = read_index(self.backend, pack_id)
                except FileNotFoundError:
                    continue
                except PackSizeError as error:
                    self._broken[pack_id] = str(error)
                    self._damaged.update(dict.fromkeys(error.index.entries, str(error)))
                except (CorruptPackError, OSError) as error:
                    self._broken[pack_id] = str(error)
            for pack_id in indexed & (set(self._indexes) - packed):
                del self._indexes[pack_id]
                self._broken[pack_id] = f"pack {pack_id} is missing (its index is there)"
            self._rebuild()
            self._loaded = True

    def _rebuild(self) -> None:
        where: dict[bytes, PackIndex] = {}
        for index in self._indexes.values():
            where.update(dict.fromkeys(index.entries, index))
        self._where = where

    def register(self, index: PackIndex) -> None:
        """Count on a pack this process just published (no need to list the packs again)."""
        with self._lock:
            self._indexes[index.pack_id] = index
            self._where.update(dict.fromkeys(index.entries, index))

    def _ensure_loaded(self) -> None:
        if not self._loaded:
            self.refresh()

    def locate(self, digest: bytes) -> Location | None:
        """Where a digest's bytes lie, if some pack holds it."""
        self._ensure_loaded()
        index = self._where.get(digest)
        if index is None:
            return None
        offset, size = index.entries[digest]
        return Location(index.pack_id, offset, size)

    def damage(self, digest: bytes) -> str | None:
        """Why the blob cannot be read from the pack that was meant to hold it, if its pack
        is damaged (its index intact, the pack file not the size it records)."""
        self._ensure_loaded()
        return self._damaged.get(digest)

    def by_digest(self) -> dict[bytes, PackIndex]:
        """The index holding each packed digest (a snapshot of the current view; read only)."""
        self._ensure_loaded()
        return self._where

    def packed_size(self, digest: bytes) -> int | None:
        """The size of a packed blob, or None if no pack holds it (cheaper than locate)."""
        self._ensure_loaded()
        index = self._where.get(digest)
        return None if index is None else index.entries[digest][1]

    def indexes(self) -> list[PackIndex]:
        """Every readable pack's index."""
        self._ensure_loaded()
        with self._lock:
            return list(self._indexes.values())

    def broken(self) -> dict[str, str]:
        """Packs whose index cannot be used, and why (their blobs count as missing)."""
        self._ensure_loaded()
        return dict(self._broken)

    def iter_digests(self) -> Iterator[bytes]:
        """Every digest held by some pack."""
        self._ensure_loaded()
        yield from list(self._where)

    def pack_path(self, pack_id: str) -> str:
        """Where a pack lives, for people."""
        return self.backend.describe(Handle(Kind.PACK, pack_id))

    def orphans(self) -> list[str]:
        """Packs with no index (a writer died between publishing the two): garbage."""
        indexed, packed = self._listed()
        return sorted(packed - indexed)

    def read_unverified(self, location: Location) -> bytes:
        """The bytes at ``location``; CorruptPackError if the pack is shorter than its index
        says, MissingBlobError if the pack is gone."""
        try:
            data = self.backend.read_range(
                Handle(Kind.PACK, location.pack_id), location.offset, location.size
            )
        except FileNotFoundError:
            raise MissingBlobError(f"pack {location.pack_id} is missing from the store") from None
        if len(data) != location.size:
            raise CorruptPackError(f"pack {location.pack_id} is truncated")
        return data

    def check_sizes(self) -> list[str]:
        """Packs that are not the size their index records (truncated or overwritten)."""
        problems = []
        for index in self.indexes():
            try:
                size = self.backend.stat(Handle(Kind.PACK, index.pack_id)).size
            except FileNotFoundError:
                problems.append(f"pack {index.pack_id} is missing")
                continue
            if size != index.pack_size:
                problems.append(
                    f"pack {index.pack_id} is {size} bytes; its index says {index.pack_size}"
                )
        return problems

    def delete(self, pack_id: str) -> None:
        """Remove a pack: its index first, durably (so no index ever names a missing pack),
        then the pack. Called under the exclusive gc lock only."""
        with self._lock:
            self._indexes.pop(pack_id, None)
            self._rebuild()
        with contextlib.suppress(FileNotFoundError):
            self.backend.delete(Handle(Kind.INDEX, pack_id))
        with contextlib.suppress(FileNotFoundError):
            self.backend.delete(Handle(Kind.PACK, pack_id), durable=False)

    def size_of(self, pack_id: str) -> int:
        """A pack's size (0 if it is gone)."""
        try:
            return self.backend.stat(Handle(Kind.PACK, pack_id)).size
        except FileNotFoundError:
            return 0

    def delete_orphan(self, pack_id: str) -> int:
        """Remove a pack that no index names; returns its size."""
        handle = Handle(Kind.PACK, pack_id)
        try:
            size = self.backend.stat(handle).size
            self.backend.delete(handle, durable=False)
        except FileNotFoundError:
            return 0
        return size
