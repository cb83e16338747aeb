"""The packs of a store as this process sees them: which digests each pack holds, and reads.

Indexes are loaded lazily and kept (packs are immutable). ``refresh``, right after taking the
gc lock, follows the pack log (``packlog``, a local store) from where it stopped: it loads the
packs published since and drops those deleted (gc logs a deletion before it unlinks the index,
a fold just after); a new log, or a backend without one, means listing ``packs/``. A reader
that misses a blob lists once more. ``BlockCache`` keeps the last decompressed blocks.
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from snapstore.backend.packlog import LogPosition, deleted_ids, published_ids
from snapstore.backend.seam import Backend, Handle, Kind
from snapstore.errors import CorruptPackError, MissingBlobError
from snapstore.format.codec import CODEC_NONE, decompress
from snapstore.format.packfile import BLOCK_HEAD, Block, PackIndex, is_pack_id
from snapstore.repo.packs import PackSizeError, forget_indexes, read_index

BLOCK_CACHE_BYTES = 16 << 20


@dataclass(frozen=True)
class Location:
    """Where one blob's bytes lie: ``size`` bytes at ``offset`` in the raw bytes of block
    number ``number`` (``block``) of a pack."""

    pack_id: str
    number: int
    block: Block
    offset: int
    size: int


class BlockCache:
    """The raw bytes of recently decompressed blocks, up to a byte budget (oldest dropped)."""

    def __init__(self, budget: int = BLOCK_CACHE_BYTES) -> None:
        self.budget = budget
        self._blocks: OrderedDict[tuple[str, int], bytes] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: tuple[str, int]) -> bytes | None:
        with self._lock:
            found = self._blocks.get(key)
            if found is not None:
                self._blocks.move_to_end(key)
            return found

    def put(self, key: tuple[str, int], data: bytes) -> None:
        with self._lock:
            if key in self._blocks or len(data) > self.budget:
                return
            self._blocks[key] = data
            self._bytes += len(data)
            while self._bytes > self.budget:
                _, dropped = self._blocks.popitem(last=False)
                self._bytes -= len(dropped)

    def forget(self, keys: Iterable[tuple[str, int]]) -> None:
        """Drop these blocks (of deleted packs), at a cost that grows with them, not the cache."""
        with self._lock:
            for key in keys:
                dropped = self._blocks.pop(key, None)
                self._bytes -= 0 if dropped is None else len(dropped)


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
        self._log = backend.pack_log()
        self._position: LogPosition | None = None
        self._listed_since_refresh = False
        self._settled: set[str] = set()
        self._where_partial = False
        """``_where`` may lack a digest another pack holds (``_drop``): a listing rebuilds it."""
        self.follow_log = True
        """Whether a refresh may follow the pack log: False while the store's marker names a
        format before 3, whose writers (an older version) delete packs without starting a
        new log, so only a listing tells which packs are gone."""
        self.cache = BlockCache()

    def _listed(self) -> tuple[set[str], set[str]]:
        """(ids with an index, ids with a pack) now."""
        indexed = {name for name in self.backend.names(Kind.INDEX) if is_pack_id(name)}
        packed = {name for name in self.backend.names(Kind.PACK) if is_pack_id(name)}
        return indexed, packed

    def refresh(self, *, full: bool = False) -> None:
        """Bring the view up to date (see the module docstring); ``full``: list ``packs/``
        whatever the log says (gc and verify, which judge every pack)."""
        with self._lock:
            self._listed_since_refresh = False
            if self._log is not None and self.follow_log and self._loaded and not full:
                lines, position = self._log.read_lines(self._position)
                if lines is not None:
                    self._position = position
                    gone = set(deleted_ids(lines))
                    self._load_new([i for i in published_ids(lines) if i not in gone])
                    self._drop(gone)
                    return
            self._list_all()

    @property
    def has_log(self) -> bool:
        """Whether the backend keeps a pack log (a local store)."""
        return self._log is not None

    def relist_once(self) -> bool:
        """List ``packs/`` again if that was not done since the last refresh (a reader that
        misses a blob); True if it did."""
        with self._lock:
            if self._listed_since_refresh or self._log is None:
                return False
            self._list_all()
            return True

    def _load_new(self, ids: list[str]) -> None:
        """Load the indexes of packs the log names that this view lacks."""
        added = []
        for pack_id in dict.fromkeys(ids):
            if not is_pack_id(pack_id) or pack_id in self._indexes:
                continue
            index = self._load(pack_id)
            if index is not None:
                self._indexes[pack_id] = index
                added.append(index)
        for index in added:
            self._where.update(dict.fromkeys(index.entries, index))

    def _drop(self, pack_ids: set[str]) -> None:
        """Stop counting on deleted packs (a digest another pack also holds may leave the
        map: rare, see ``_rebuild``; a create stores it again, a read lists)."""
        for pack_id in pack_ids:
            self._broken.pop(pack_id, None)
        gone = [self._indexes.pop(pack_id) for pack_id in pack_ids if pack_id in self._indexes]
        for index in gone:
            for digest in index.entries:
                if self._where.get(digest) is index:
                    del self._where[digest]
                    self._where_partial = True
        self.cache.forget((i.pack_id, n) for i in gone for n in range(len(i.blocks)))

    def _load(self, pack_id: str) -> PackIndex | None:
        """A pack's index, or None if it cannot be used (then noted as broken, unless gone)."""
        try:
            return read_index(self.backend, pack_id)
        except FileNotFoundError:
            return None
        except PackSizeError as error:
            self._broken[pack_id] = str(error)
            self._damaged.update(dict.fromkeys(error.index.entries, str(error)))
        except (CorruptPackError, OSError) as error:
            self._broken[pack_id] = str(error)
        return None

    def _log_position(self) -> LogPosition | None:
        """Where the pack log ends now (starting one if there is none and this process may)."""
        if self._log is None:
            return None
        _, position = self._log.read(None)
        if position is None:
            with contextlib.suppress(OSError):
                self._log.restart()
                _, position = self._log.read(None)
        return position

    def _list_all(self) -> None:
        """List ``packs/``: load indexes that appeared, forget packs that went away."""
        self._position = self._log_position()
        self._listed_since_refresh = True
        indexed, packed = self._listed()
        forget_indexes(self.backend, indexed)
        before = set(self._indexes)
        for gone in before - indexed:
            del self._indexes[gone]
        self._broken = {}
        self._damaged = {}
        for pack_id in sorted(indexed):
            if pack_id not in self._indexes:
                index = self._load(pack_id)
                if index is not None:
                    self._indexes[pack_id] = index
        for pack_id in indexed & (set(self._indexes) - packed):
            del self._indexes[pack_id]
            self._broken[pack_id] = f"pack {pack_id} is missing (its index is there)"
        if set(self._indexes) != before or not self._loaded or self._where_partial:
            self._rebuild()
            self._where_partial = False
        self._loaded = True

    def _rebuild(self) -> None:
        """The map from digest to pack; of two packs holding a digest, the larger (a fold's
        merged pack, a pack gc rewrote) rather than the one about to go."""
        where: dict[bytes, PackIndex] = {}
        for index in sorted(self._indexes.values(), key=lambda index: index.pack_size):
            where.update(dict.fromkeys(index.entries, index))
        self._where = where

    def register(self, index: PackIndex) -> None:
        """Count on a pack this process just published (no need to list the packs again),
        and tell other processes through the pack log."""
        with self._lock:
            self._indexes[index.pack_id] = index
            self._where.update(dict.fromkeys(index.entries, index))
            self._settled.add(index.pack_id)
        if self._log is not None:
            self._log.add(index.pack_id)

    def settled(self, pack_id: str) -> bool:
        """Whether this process knows the pack's and its index's names to be durable (it
        published it, or flushed ``packs/`` since): a writer counting on it need not flush."""
        return pack_id in self._settled

    def settle(self, pack_ids: set[str]) -> None:
        """Note that the names of these packs were just made durable (see ``settled``)."""
        with self._lock:
            self._settled |= pack_ids

    def announce_deletions(self) -> None:
        """Start a new pack log, followed by this process (the exclusive gc lock held, this
        view refreshed under it): every other process lists the packs at its next refresh."""
        with self._lock:
            if self._log is not None:
                self._log.restart()
                _, self._position = self._log.read(None)

    def _record_deletions(self, pack_ids: list[str], *, follow_restart: bool = True) -> None:
        """Log a deletion, or start a new log (followed if ``follow_restart``); raises if not."""
        with self._lock:
            if self._log is None or self._log.record_deletions(pack_ids):
                return
            if follow_restart:
                _, self._position = self._log.read(None)

    def _ensure_loaded(self) -> None:
        if not self._loaded:
            self.refresh()

    def locate(self, digest: bytes) -> Location | None:
        """Where a digest's bytes lie, if some pack holds it."""
        self._ensure_loaded()
        index = self._where.get(digest)
        if index is None:
            return None
        number, offset, size = index.entries[digest]
        return Location(index.pack_id, number, index.blocks[number], offset, size)

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
        return None if index is None else index.entries[digest][2]

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
        """The blob's bytes at ``location`` (its block decompressed, or found in the cache);
        CorruptPackError if the pack is shorter than its index says or its block is damaged,
        MissingBlobError if the pack is gone."""
        block = location.block
        if block.codec == CODEC_NONE:
            return self._read(location.pack_id, block.offset + location.offset, location.size)
        key = (location.pack_id, location.number)
        raw = self.cache.get(key)
        if raw is None:
            raw = self._block(location.pack_id, location.number, block)
            self.cache.put(key, raw)
        return raw[location.offset : location.offset + location.size]

    def _block(self, pack_id: str, number: int, block: Block) -> bytes:
        """The raw bytes of a compressed block, its head checked against the index."""
        where = f"block {number} of pack {pack_id}"
        data = self._read(pack_id, block.offset - BLOCK_HEAD.size, BLOCK_HEAD.size + block.stored)
        head = BLOCK_HEAD.unpack_from(data)
        if head != (block.codec, block.kind, block.stored, block.raw):
            raise CorruptPackError(f"{where}: its head does not match the pack's index")
        return decompress(block.codec, data[BLOCK_HEAD.size :], block.raw, where)

    def _read(self, pack_id: str, offset: int, length: int) -> bytes:
        try:
            data = self.backend.read_range(Handle(Kind.PACK, pack_id), offset, length)
        except FileNotFoundError:
            raise MissingBlobError(f"pack {pack_id} is missing from the store") from None
        if len(data) != length:
            raise CorruptPackError(f"pack {pack_id} is truncated")
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

    def unindex(self, pack_ids: list[str], *, held_by: list[PackIndex] | None = None) -> None:
        """Take packs out of the store (view refreshed under the gc lock): log, drop from this
        view, unlink the indexes. gc (lock exclusive) logs first; a fold (lock shared) points
        this view at ``held_by`` and logs last (why: ``maintenance.fold``)."""
        if held_by is None:
            self._record_deletions(pack_ids)
        with self._lock:
            for index in held_by or ():
                self._where.update(dict.fromkeys(index.entries, index))
            self._drop(set(pack_ids))
        for pack_id in pack_ids:
            with contextlib.suppress(FileNotFoundError):
                self.backend.delete(Handle(Kind.INDEX, pack_id), durable=False)
        if held_by is not None:
            self._record_deletions(pack_ids, follow_restart=False)

    def remove_unindexed(self, pack_ids: list[str]) -> None:
        """Delete packs whose indexes ``unindex`` unlinked: one flush of ``packs/``
        first (no index may outlive its pack in a power cut), then the packs."""
        self.backend.note_existing(Handle(Kind.INDEX, pack_ids[0]))
        self.backend.flush()
        for pack_id in pack_ids:
            with contextlib.suppress(FileNotFoundError):
                self.backend.delete(Handle(Kind.PACK, pack_id), durable=False)

    def size_of(self, pack_id: str) -> int:
        """A pack's size (0 if it is gone)."""
        try:
            return self.backend.stat(Handle(Kind.PACK, pack_id)).size
        except FileNotFoundError:
            return 0

    def settle_listing(self, pack_id: str) -> None:
        """Make the names of packs and indexes durable as they are listed now, before an
        orphan pack is deleted: a pack is an orphan because its index was unlinked, and that
        unlink must not be lost while the pack's is kept (an index naming a missing pack)."""
        self.backend.note_existing(Handle(Kind.PACK, pack_id))
        self.backend.flush()

    def delete_orphan(self, pack_id: str) -> int:
        """Remove a pack that no index names; returns its size."""
        self._record_deletions([pack_id])
        handle = Handle(Kind.PACK, pack_id)
        try:
            size = self.backend.stat(handle).size
            self.backend.delete(handle, durable=False)
        except FileNotFoundError:
            return 0
        return size
