"""The ``packs/`` directory as this process sees it: which digests each pack holds, and reads.

Indexes are loaded lazily and kept in memory (packs are immutable); ``refresh`` re-lists the
directory, so a caller that refreshes right after taking the gc lock sees every pack another
process published and none that gc deleted (gc deletes only under the exclusive gc lock).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass

from snapstore.errors import CorruptPackError, MissingBlobError
from snapstore.fs.seam import FileSystem
from snapstore.repo.packs import (
    INDEX_SUFFIX,
    PACK_SUFFIX,
    PackIndex,
    PackSizeError,
    forget_indexes,
    is_pack_id,
    read_index,
    remember_index,
)

MAX_OPEN_PACKS = 16


@dataclass(frozen=True)
class Location:
    """Where one blob's bytes lie: a range of a pack file."""

    pack_id: str
    offset: int
    size: int


class PackSet:
    """The packs of one store root."""

    def __init__(self, packs_dir: str, fs: FileSystem, *, durable: bool) -> None:
        self.packs_dir = packs_dir
        self.fs = fs
        self.durable = durable
        self._lock = threading.Lock()
        self._indexes: dict[str, PackIndex] = {}
        self._where: dict[bytes, PackIndex] = {}
        self._broken: dict[str, str] = {}
        self._damaged: dict[bytes, str] = {}
        self._fds: OrderedDict[str, int] = OrderedDict()
        self._loaded = False

    def _listed(self) -> tuple[set[str], set[str]]:
        """(ids with an index, ids with a pack file) in ``packs/`` now."""
        indexed: set[str] = set()
        packed: set[str] = set()
        try:
            names = os.listdir(self.packs_dir)
        except FileNotFoundError:
            return indexed, packed
        for name in names:
            stem, suffix = os.path.splitext(name)
            if is_pack_id(stem):
                if suffix == INDEX_SUFFIX:
                    indexed.add(stem)
                elif suffix == PACK_SUFFIX:
                    packed.add(stem)
        return indexed, packed

    def refresh(self) -> None:
        """Re-list ``packs/``: load indexes that appeared, forget packs that went away.

        Listed under the lock: a pack another thread publishes and registers meanwhile is
        then either in the listing or registered after it, never dropped by it."""
        with self._lock:
            indexed, packed = self._listed()
            forget_indexes(self.packs_dir, indexed)
            for gone in set(self._indexes) - indexed:
                del self._indexes[gone]
                self._close_fd(gone)
            self._broken = {}
            self._damaged = {}
            for pack_id in sorted(indexed):
                if pack_id in self._indexes:
                    continue
                try:
                    self._indexes[pack_id] = read_index(self.packs_dir, pack_id)
                except FileNotFoundError:
                    continue
                except PackSizeError as error:
                    self._broken[pack_id] = str(error)
                    self._damaged.update(dict.fromkeys(error.index.entries, str(error)))
                except (CorruptPackError, OSError) as error:
                    self._broken[pack_id] = str(error)
            for pack_id in indexed & (set(self._indexes) - packed):
                del self._indexes[pack_id]
                self._broken[pack_id] = (
                    f"pack {pack_id}{PACK_SUFFIX} is missing (its index is there)"
                )
            self._rebuild()
            self._loaded = True

    def _rebuild(self) -> None:
        where: dict[bytes, PackIndex] = {}
        for index in self._indexes.values():
            where.update(dict.fromkeys(index.entries, index))
        self._where = where

    def register(self, index: PackIndex) -> None:
        """Count on a pack this process just published (no need to re-list the directory)."""
        remember_index(self.packs_dir, index)
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
        """Where a pack file lives."""
        return os.path.join(self.packs_dir, pack_id + PACK_SUFFIX)

    def orphans(self) -> list[str]:
        """Pack files with no index (a writer died between the two renames): garbage."""
        indexed, packed = self._listed()
        return [os.path.join(self.packs_dir, p + PACK_SUFFIX) for p in sorted(packed - indexed)]

    def _fd(self, pack_id: str) -> int:
        fd = self._fds.get(pack_id)
        if fd is not None:
            self._fds.move_to_end(pack_id)
            return fd
        path = os.path.join(self.packs_dir, pack_id + PACK_SUFFIX)
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        self._fds[pack_id] = fd
        while len(self._fds) > MAX_OPEN_PACKS:
            _, oldest = self._fds.popitem(last=False)
            os.close(oldest)
        return fd

    def _close_fd(self, pack_id: str) -> None:
        fd = self._fds.pop(pack_id, None)
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    def read_unverified(self, location: Location) -> bytes:
        """The bytes at ``location``; CorruptPackError if the pack is shorter than its index
        says, MissingBlobError if the pack file is gone."""
        with self._lock:
            try:
                fd = self._fd(location.pack_id)
            except FileNotFoundError:
                raise MissingBlobError(
                    f"pack {location.pack_id}{PACK_SUFFIX} is missing from the store"
                ) from None
            data = os.pread(fd, location.size, location.offset)
        if len(data) != location.size:
            raise CorruptPackError(f"pack {location.pack_id}{PACK_SUFFIX} is truncated")
        return data

    def check_sizes(self) -> list[str]:
        """Packs whose file is not the size their index records (truncated or overwritten)."""
        problems = []
        for index in self.indexes():
            path = os.path.join(self.packs_dir, index.pack_id + PACK_SUFFIX)
            try:
                size = os.stat(path).st_size
            except FileNotFoundError:
                problems.append(f"pack {index.pack_id}{PACK_SUFFIX} is missing")
                continue
            if size != index.pack_size:
                problems.append(
                    f"pack {index.pack_id}{PACK_SUFFIX} is {size} bytes; its index says "
                    f"{index.pack_size}"
                )
        return problems

    def delete(self, pack_id: str) -> None:
        """Remove a pack: its index first (so no index ever names a missing pack), then the
        pack file. Called under the exclusive gc lock only."""
        with self._lock:
            self._close_fd(pack_id)
            self._indexes.pop(pack_id, None)
            self._rebuild()
        index_path = os.path.join(self.packs_dir, pack_id + INDEX_SUFFIX)
        with contextlib.suppress(FileNotFoundError):
            self.fs.unlink(index_path)
        if self.durable:
            self.fs.fsync_dir(self.packs_dir)
        with contextlib.suppress(FileNotFoundError):
            self.fs.unlink(os.path.join(self.packs_dir, pack_id + PACK_SUFFIX))

    def close(self) -> None:
        """Close every cached pack descriptor (a later read opens what it needs again)."""
        with self._lock:
            for pack_id in list(self._fds):
                self._close_fd(pack_id)
