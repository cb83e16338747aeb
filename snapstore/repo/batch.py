"""The new blobs of one ``create``: small ones gathered into size-capped packs, large ones
stored loose; then one flush of what the create wrote, before the commit.

A pack is one sequential write and one flush however many blobs it holds, so every blob up to
``PACKED_MAX_BYTES`` goes into a pack, even a create's single new one: a store never grows a
forest of small loose files, each with a directory to flush. Only larger blobs stream into
loose blobs of their own. gc keeps the number of packs logarithmic (``maintenance.packgc``).
"""

from __future__ import annotations

from snapstore.backend.seam import Handle, Kind
from snapstore.errors import CorruptBlobError, CorruptManifestError, MissingBlobError
from snapstore.format.codec import WRITE_LEVEL
from snapstore.format.manifest import EntryRow
from snapstore.format.packfile import KIND_DATA, PackIndex
from snapstore.repo.blobs import Blobs
from snapstore.repo.contents import load_map
from snapstore.repo.loose import BlobWriter
from snapstore.repo.packs import PackWriter, SegmentSink

PACKED_MAX_BYTES = 16 << 20
PACK_MAX_BYTES = 256 << 20
DIRECT_LOOSE_CHECKS = 8
"""Blobs of a batch looked for among the loose blobs by a stat each, before listings."""


def is_small(size: int) -> bool:
    """True for a blob that belongs in a pack (small enough that a file of its own is the
    main cost of storing it)."""
    return size < PACKED_MAX_BYTES


class PackSeries:
    """Blobs appended to a series of new packs of at most ``PACK_MAX_BYTES`` each. A full pack
    is published at once and registered, so this process reads its blobs from it right away;
    ``finish`` publishes the last one. ``level``: the zstd level of the packs' blocks;
    ``inline``: compress in the caller's thread (``PackWriter``). Used from one thread."""

    def __init__(
        self,
        storage: Blobs,
        *,
        level: int = WRITE_LEVEL,
        inline: bool = False,
        segments: SegmentSink | None = None,
    ) -> None:
        self.storage = storage
        self.level = level
        self.inline = inline
        self.segments = segments
        """Where a small series goes, as one segment of an appendable pack (``PackWriter``);
        None: packs with index files of their own (gc and folding write those)."""
        self.published: list[PackIndex] = []
        self.bytes_written = 0
        """The bytes of the packs published and the segments appended."""
        self._writer: PackWriter | None = None

    def __contains__(self, digest: bytes) -> bool:
        """Whether the open, unpublished pack holds ``digest``."""
        return self._writer is not None and digest in self._writer

    def add(self, digest: bytes, data: bytes | memoryview, kind: int = KIND_DATA) -> None:
        """Append one blob already hashed to ``digest`` (file contents or a tree: ``kind``)."""
        writer = self._writer
        if writer is None:
            writer = self._writer = PackWriter(
                self.storage.backend, level=self.level, inline=self.inline, segments=self.segments
            )
        writer.add(digest, data, kind)
        if writer.size >= PACK_MAX_BYTES:
            self._publish()

    def _publish(self) -> None:
        assert self._writer is not None
        writer, self._writer = self._writer, None
        index = writer.publish()
        if writer.appended:
            self.bytes_written += writer.appended
        else:
            self.storage.packs.register(index)
            self.bytes_written += index.pack_size
        self.published.append(index)

    def add_alone(self, digest: bytes, data: bytes, kind: int = KIND_DATA) -> None:
        """Append one blob in a block of its own: reading it never decompresses its
        neighbours (an extent map, read again by every create that reuses its file)."""
        if self._writer is not None:
            self._writer.close_block()
        self.add(digest, data, kind)
        if self._writer is not None:
            self._writer.close_block()

    def finish(self) -> None:
        """Publish the open pack, if any."""
        if self._writer is not None:
            self._publish()

    def abort(self) -> None:
        """Drop the unpublished pack (published packs are gc's)."""
        if self._writer is not None:
            self._writer.abort()
            self._writer = None


class BlobBatch:
    """Collects one writer's new blobs; ``finish`` makes them (and every existing blob the
    writer counts on) durable. Use under the shared gc lock, from one thread."""

    def __init__(self, storage: Blobs) -> None:
        self.storage = storage
        self.packs = PackSeries(storage, segments=storage.open_pack)
        self._added: set[bytes] = set()
        self._counts_on_packs: dict[str, int] = {}
        """Packs of other writers the batch counts on (``finish`` flushes their names), and
        how far their bytes are known flushed."""
        self._shards: dict[int, frozenset[str]] = {}
        """The loose blobs' names listed so far, by the first byte of their digests."""
        self._direct_checks = 0
        self._packed = storage.packs.by_digest_possibly_stale()
        """The dedupe's view: a miss there, a blob another process stored in a segment this
        process has not loaded, stores it again (a duplicate, never a loss)."""
        self._loose_bytes = 0
        self.counted: list[EntryRow] = []
        """The extent maps and pieces of the files with holes the batch stored or claimed,
        as rows naming each by digest and size (what the commit checks is stored, besides
        the file rows)."""

    def claim(self, digest: bytes, size: int) -> bool:
        """True if the blob is already stored with this size (in a pack this process had
        loaded when the batch began, or one it published since: a blob only in a segment
        another process appended that this process has not loaded is stored again,
        ``PackSet.by_digest_possibly_stale``). The writer then counts on it, so
        ``finish`` flushes the directory that names it (its writer may have died before
        doing so). A blob in a segment of another writer's appendable pack that this process
        does not know that writer flushed (``PackSet.flushed``: it read the segment from a
        listing, with no log line for it) is not claimed: that writer may have been killed
        before its flush, or seen it fail, and after a failed flush no later flush can make
        those bytes durable. The blob is stored again."""
        if digest in self._added:
            return True
        index = self._packed.get(digest)
        if index is not None and index.size_of(digest) == size:
            packs = self.storage.packs
            if not packs.settled(index, digest):
                if not packs.flushed(index, digest):
                    return False
                if index.pack_id not in self._counts_on_packs:
                    self._counts_on_packs[index.pack_id] = packs.flushed_end(index)
                    self.storage.backend.note_existing(Handle(Kind.PACK, index.pack_id))
            return True
        if self._maybe_loose(digest) and self.storage.loose.has(digest, expected_size=size):
            self.storage.loose.reuse(digest)
            return True
        return False

    def _maybe_loose(self, digest: bytes) -> bool:
        """Whether a loose blob may hold it. The first ``DIRECT_LOOSE_CHECKS`` blobs of a
        batch are looked up by a stat each (``LooseBlobs.has``): a small create checks two
        or three, and a stat costs less than a listing. After them, one listing per
        two-digit prefix per batch instead of a stat per blob (a blob another writer adds
        meanwhile is merely stored twice)."""
        if self._direct_checks < DIRECT_LOOSE_CHECKS:
            self._direct_checks += 1
            return True
        names = self._shards.get(digest[0])
        if names is None:
            names = frozenset(self.storage.backend.names(Kind.BLOB, f"{digest[0]:02x}"))
            self._shards[digest[0]] = names
        return bool(names) and digest.hex() in names

    def add(
        self, digest: bytes, data: bytes, kind: int = KIND_DATA, *, alone: bool = False
    ) -> None:
        """Store a blob (file contents, or a tree object: ``kind``) already hashed to
        ``digest``, unless it is stored already: in a pack if small (``alone``: in a block of
        its own), else loose (a tree of a directory with hundreds of thousands of entries can
        be that large)."""
        if self.claim(digest, len(data)):
            return
        self._added.add(digest)
        if is_small(len(data)):
            if alone:
                self.packs.add_alone(digest, data, kind)
            else:
                self.packs.add(digest, data, kind)
            return
        writer = self.storage.writer(len(data))
        try:
            writer.write(data)
        except BaseException:
            writer.abort()
            raise
        if self.commit_loose(writer) != digest:
            raise ValueError(f"blob {digest.hex()} does not hash to its name")

    def commit_loose(self, writer: BlobWriter) -> bytes:
        """Commit a loose blob staged through ``writer`` (``BlobWriter.commit``), counting its
        bytes in ``stored_bytes`` if it was not stored already; returns its digest."""
        size = writer.size
        digest = writer.commit()
        if writer.published:
            self._loose_bytes += size
        return digest

    @property
    def stored_bytes(self) -> int:
        """The bytes this batch added to the store: the packs it published and the loose
        blobs it wrote (not those it found stored, nor the packs' indexes). Complete after
        ``finish``."""
        return self._loose_bytes + self.packs.bytes_written

    def claim_extents(self, digest: bytes, file_size: int) -> bool:
        """True if the extent map ``digest`` of a file of ``file_size`` bytes, and every
        piece it names, are stored (as ``claim``); a map that cannot be read or fits no such
        file is not claimed (the file is read again)."""
        try:
            extents = load_map(self.storage, digest, file_size)
            map_size = self.storage.size(digest)
        except (CorruptManifestError, CorruptBlobError, MissingBlobError):
            return False
        if not self.claim(digest, map_size) or not all(
            self.claim(extent.digest, extent.length) for extent in extents
        ):
            return False
        self.counted.append(("", "file", 0, map_size, 0, digest, None))
        self.counted.extend(("", "file", 0, e.length, 0, e.digest, None) for e in extents)
        return True

    def add_counted(self, digest: bytes, data: bytes, *, alone: bool = False) -> None:
        """Store a piece or an extent map (as ``add``; an extent map ``alone`` in its
        block, so that a create that reuses its file reads it cheaply) and count it among
        what the commit checks."""
        self.counted.append(("", "file", 0, len(data), 0, digest, None))
        self.add(digest, data, alone=alone)

    def finish(self) -> None:
        """Publish the open pack and make durable the names of everything the batch wrote or
        counts on. After this, a manifest may reference them."""
        self.packs.finish()
        self.storage.sync()
        self.storage.packs.settle(self._counts_on_packs)

    def abort(self) -> None:
        """Drop the unpublished pack (published packs are gc's)."""
        self.packs.abort()
