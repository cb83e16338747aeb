"""Reading blobs out of packs, checking packs against their indexes, where packs are, and
deleting them once out of the view: the part of ``PackSet`` that needs only the backend,
the indexes and the cache of decompressed blocks."""

from __future__ import annotations

import contextlib
from typing import NamedTuple

from snapstore.backend.packlog import LogPosition, PackLog
from snapstore.backend.seam import Backend, Handle, Kind
from snapstore.errors import CorruptPackError, MissingBlobError
from snapstore.format.codec import CODEC_NONE, decompress
from snapstore.format.indextable import EntryTable
from snapstore.format.packfile import BLOCK_HEAD, Block, PackIndex, is_pack_id
from snapstore.repo import segmented
from snapstore.repo.blockcache import BlockCache


class Location(NamedTuple):
    """Where one blob's bytes lie: ``size`` bytes at ``offset`` in the raw bytes of block
    number ``number`` (``block``) of a pack."""

    pack_id: str
    number: int
    block: Block
    offset: int
    size: int


class PackReads:
    """Reads of the packs of ``backend`` (``PackSet`` is one)."""

    backend: Backend
    cache: BlockCache

    def indexes(self) -> list[PackIndex]:
        raise NotImplementedError

    def _record_deletions(self, pack_ids: list[str]) -> None:
        raise NotImplementedError

    def locate_all(self, digest: bytes) -> list[Location]:
        """Every place a pack of this view holds the digest (a pass over the packs: for a
        reader whose first copy did not read)."""
        found = []
        for index in self.indexes():
            entry = index.entries.get(digest)
            if entry is not None:
                number, offset, size = entry
                found.append(Location(index.pack_id, number, index.blocks[number], offset, size))
        return found

    def _listed(self) -> tuple[set[str], set[str]]:
        """(ids with an index, ids with a pack) now."""
        indexed = {name for name in self.backend.names(Kind.INDEX) if is_pack_id(name)}
        packed = {name for name in self.backend.names(Kind.PACK) if is_pack_id(name)}
        return indexed, packed

    def orphans(self) -> list[str]:
        """Packs with no index that are not appendable packs (a writer died between
        publishing the two): garbage."""
        indexed, packed = self._listed()
        return sorted(
            pack_id
            for pack_id in packed - indexed
            if not segmented.is_appendable(self.backend, pack_id)
        )

    def grown(self, index: PackIndex) -> bool:
        """Whether segments were appended to the appendable pack of ``index`` since it was
        read: gc and folding keep such a pack (its new blobs are in no other)."""
        return bool(index.segments) and segmented.grown(self.backend, index)

    def remove_unindexed(self, pack_ids: list[str]) -> None:
        """Delete packs whose indexes ``unindex`` unlinked: one flush of ``packs/``
        first (no index may outlive its pack in a power cut), then the packs."""
        self.backend.note_existing(Handle(Kind.INDEX, pack_ids[0]))
        self.backend.flush()
        for pack_id in pack_ids:
            if segmented.is_appendable(self.backend, pack_id):
                continue  # never without the lock: a writer may be appending to it
            with contextlib.suppress(FileNotFoundError):
                self.backend.delete(Handle(Kind.PACK, pack_id), durable=False)

    def delete_orphan(self, pack_id: str) -> int:
        """Remove a pack that no index names, unless it is an appendable pack; returns its
        size."""
        if segmented.is_appendable(self.backend, pack_id):
            return 0
        self._record_deletions([pack_id])
        handle = Handle(Kind.PACK, pack_id)
        try:
            size = self.backend.stat(handle).size
            self.backend.delete(handle, durable=False)
        except FileNotFoundError:
            return 0
        return size

    def pack_path(self, pack_id: str) -> str:
        """Where a pack lives, for people."""
        return self.backend.describe(Handle(Kind.PACK, pack_id))

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
            if size != index.pack_size and not (index.segments and size > index.pack_size):
                problems.append(
                    f"pack {index.pack_id} is {size} bytes; its index says {index.pack_size}"
                )
        return problems

    def _take_out(self, index: PackIndex) -> None:
        """Unlink a pack's index, or an appendable pack itself (it has no index), as the
        caller read it (not as this view holds it now): under the exclusive gc lock, so no
        writer appends to it meanwhile, and the writer that kept it open starts another."""
        self.cache.forget((index.pack_id, number) for number in range(len(index.blocks)))
        kind = Kind.PACK if index.segments else Kind.INDEX
        with contextlib.suppress(FileNotFoundError):
            self.backend.delete(Handle(kind, index.pack_id), durable=False)


def split_readable(
    indexes: list[PackIndex],
) -> tuple[list[PackIndex], dict[str, tuple[PackIndex, str]]]:
    """(the indexes whose entries all keep the rules, each read whole if it was only looked
    up so far; the others by pack id, with why not)."""
    readable: list[PackIndex] = []
    unreadable: dict[str, tuple[PackIndex, str]] = {}
    for index in indexes:
        try:
            if isinstance(index.entries, EntryTable):
                index.entries.whole()
        except CorruptPackError as error:
            unreadable[index.pack_id] = (index, str(error))
            continue
        readable.append(index)
    return readable, unreadable


def log_end(log: PackLog | None) -> LogPosition | None:
    """Where the pack log ends now (starting one if there is none and this process may)."""
    if log is None:
        return None
    _, position = log.read(None)
    if position is None:
        with contextlib.suppress(OSError):
            log.restart()
            _, position = log.read(None)
    return position
