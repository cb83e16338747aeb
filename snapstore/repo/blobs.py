"""Where blob bytes live, behind one interface: loose blobs or ranges of packs. Manifests name
digests only, so which of the two holds a blob is invisible to them; readers look in the packs
(an in-memory lookup) first, then for a loose blob."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from snapstore.backend.seam import Backend
from snapstore.errors import CorruptBlobError, CorruptPackError, MissingBlobError
from snapstore.format.codec import CODEC_NONE
from snapstore.format.hashing import CHUNK_BYTES, new_hasher
from snapstore.format.manifest import EntryRow
from snapstore.repo.loose import BlobWriter, LooseBlobs
from snapstore.repo.openpack import OpenPack
from snapstore.repo.packset import Location, PackSet

WHOLE_READ_BYTES = 64 << 20


class Blobs:
    """The store's blobs: loose and packed, found by digest in either."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.loose = LooseBlobs(backend)
        self.packs = PackSet(backend)
        self.open_pack = OpenPack(backend, self.packs)
        """The appendable pack this process's small creates append to (``openpack``)."""

    def refresh(self, *, full: bool = False) -> None:
        """See the packs stored now; call right after taking the gc lock (``full``: list them
        all, whatever the pack log says: see ``PackSet.refresh``)."""
        self.packs.refresh(full=full)

    def _location(self, digest: bytes) -> Location | None:
        """Where a packed blob lies; if no pack this process knows holds it and no loose copy
        exists, the packs are listed once more first (a pack log line may have been lost)."""
        location = self.packs.locate(digest)
        if location is None and not self.loose.has(digest) and self.packs.relist_once():
            location = self.packs.locate(digest)
        return location

    def path(self, digest: bytes) -> str:
        """Where the blob's loose copy would live, for people."""
        return self.loose.path(digest)

    def has(self, digest: bytes, expected_size: int | None = None) -> bool:
        """True if some pack or a loose file holds the blob (with the expected size)."""
        size = self.packs.packed_size(digest)
        if size is not None and expected_size in (None, size):
            return True
        if self.loose.has(digest, expected_size):
            return True
        if size is None and self.packs.relist_once():
            size = self.packs.packed_size(digest)
            return size is not None and expected_size in (None, size)
        return False

    def first_missing(
        self, file_rows: Iterable[EntryRow], *, relist: bool = False
    ) -> EntryRow | None:
        """The first file row whose blob is not stored (with the row's size, if loose).

        A packed blob's size was checked when the writer claimed it, against the same
        immutable indexes, so only its presence is looked up here. With ``relist`` (a
        commit's check of its claims), a miss lists the packs once more first: a fold of
        this process may have taken the claimed blob's pack out of this view meanwhile, its
        blobs held by the merged pack (see ``maintenance.fold``)."""
        packs = self.packs
        for row in file_rows:
            digest = row[5]
            assert digest is not None
            if packs.holds(digest) or self.loose.has(digest, row[3]):
                continue
            if not (relist and packs.relist_once()) or not packs.holds(digest):
                return row
        return None

    def durable_rows(self, file_rows: Iterable[EntryRow]) -> bool:
        """Whether no blob of ``file_rows`` is held only in a segment of an appendable pack
        not known flushed by its writer (``PackSet.flushed``): what a create may count on
        without storing it again (``BlobBatch.claim`` applies the same rule). The create's
        dedupe: what is pending need not be loaded (``by_digest_possibly_stale``), as the
        pack log announces only flushed segments; a copy it would have found there instead
        of an unflushed one only makes the answer False (the trees are stored again)."""
        packed = self.packs.by_digest_possibly_stale()
        for row in file_rows:
            digest = row[5]
            index = packed.get(digest) if digest is not None else None
            if index is not None and digest is not None and not self.packs.flushed(index, digest):
                return False
        return True

    def writer(self, size_hint: int = 0) -> BlobWriter:
        """Stage one blob as a loose file (large blobs, and single puts)."""
        return self.loose.writer(size_hint)

    def put_bytes(self, data: bytes) -> bytes:
        """Store ``data`` as a loose blob and return its digest."""
        return self.loose.put_bytes(data)

    def chunks(self, digest: bytes, size: int | None = None) -> Iterator[bytes]:
        """Yield the blob's bytes; a mismatch with the digest raises CorruptBlobError.

        ``size``, the size a manifest records, rules out a packed copy of another size (a
        damaged or hostile index: another pack's copy of that size is looked for, what is
        pending loaded first), and a packed copy that cannot be read falls back to a loose
        copy, if there is one."""
        location = self._location(digest)
        if location is not None and size not in (None, location.size):
            fits = (where for where in self.packs.locate_all(digest) if where.size == size)
            location = next(fits, None)
        if location is None:
            damage = self.packs.damage(digest)
            if damage is not None and not self.loose.has(digest, size):
                raise CorruptPackError(f"blob {digest.hex()} is in a damaged pack: {damage}")
            yield from self.loose.chunks(digest, size)
        elif location.size > WHOLE_READ_BYTES and location.block.codec == CODEC_NONE:
            yield from self._streamed(digest, location)
        else:
            try:
                data: bytes | None = self._packed(digest, location)
            except (CorruptBlobError, MissingBlobError):
                data = self._elsewhere(digest, location)
                if data is None and not self.loose.has(digest, location.size):
                    raise
            if data is None:
                yield from self.loose.chunks(digest)
                return
            yield data

    def _elsewhere(self, digest: bytes, failed: Location) -> bytes | None:
        """The blob's verified bytes from another pack holding it, if one reads (a blob
        stored again beside a copy in a segment that was never flushed, and that a power
        cut left as zeros); None if none does."""
        for location in self.packs.locate_all(digest):
            if location.pack_id == failed.pack_id or location.size != failed.size:
                continue
            try:
                return self._packed(digest, location)
            except (CorruptBlobError, MissingBlobError):
                continue
        return None

    def _packed(self, digest: bytes, location: Location) -> bytes:
        """A packed blob's bytes, verified."""
        data = self.packs.read_unverified(location)
        hasher = new_hasher(len(data))
        hasher.update(data)
        if hasher.digest() != digest:
            raise CorruptBlobError(
                f"blob {digest.hex()} is corrupt: its bytes in pack {location.pack_id} hash "
                "differently"
            )
        return data

    def _streamed(self, digest: bytes, location: Location) -> Iterator[bytes]:
        """A large packed blob in chunks (never whole in memory), verified at the end."""
        hasher = new_hasher(location.size)
        for start in range(0, location.size, CHUNK_BYTES):
            length = min(CHUNK_BYTES, location.size - start)
            chunk = self.packs.read_unverified(
                location._replace(offset=location.offset + start, size=length)
            )
            hasher.update(chunk)
            yield chunk
        if hasher.digest() != digest:
            raise CorruptBlobError(
                f"blob {digest.hex()} is corrupt: its bytes in pack {location.pack_id} hash "
                "differently"
            )

    def read(self, digest: bytes, size: int | None = None) -> bytes:
        """The blob's bytes, verified against its digest (see ``chunks`` for ``size``)."""
        return b"".join(self.chunks(digest, size))

    def verify(self, digest: bytes, size: int | None = None) -> None:
        """Re-hash a blob; raises MissingBlobError or CorruptBlobError."""
        for _ in self.chunks(digest, size):
            pass

    def size(self, digest: bytes) -> int:
        """The blob's size in bytes."""
        location = self._location(digest)
        if location is not None:
            return location.size
        return self.loose.size(digest)

    def iter_digests(self) -> Iterator[bytes]:
        """Every stored digest once, packed or loose."""
        packed = set(self.packs.iter_digests())
        yield from packed
        for digest in self.loose.iter_digests():
            if digest not in packed:
                yield digest

    def close(self) -> None:
        """Stop appending to this process's appendable pack (the next create starts one)."""
        self.open_pack.close()

    def sync(self) -> None:
        """Make the names of blobs published (or counted on) by this thread durable."""
        self.backend.flush()
