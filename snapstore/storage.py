"""Where blob bytes live, behind one interface: loose files under ``blobs/`` or ranges of packs
under ``packs/``. Manifests name digests only, so which of the two holds a blob is invisible
to them; readers look in the packs (an in-memory lookup) first, then for a loose file."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator

from snapstore.blobs import BlobWriter, LooseBlobStore, new_hasher
from snapstore.errors import CorruptBlobError, MissingBlobError
from snapstore.fsio import FileSystem
from snapstore.manifest import EntryRow
from snapstore.packset import PackSet


class BlobStorage:
    """The store's blobs: loose and packed, found by digest in either."""

    def __init__(self, root: str, tmp_dir: str, fs: FileSystem, *, durable: bool) -> None:
        self.loose = LooseBlobStore(os.path.join(root, "blobs"), tmp_dir, fs, durable=durable)
        self.packs = PackSet(os.path.join(root, "packs"), fs, durable=durable)
        self.tmp_dir = tmp_dir
        self.fs = fs
        self.durable = durable

    @property
    def blobs_dir(self) -> str:
        return self.loose.blobs_dir

    def refresh(self) -> None:
        """See the packs on disk now; call right after taking the gc lock."""
        self.packs.refresh()

    def path(self, digest: bytes) -> str:
        """Where the blob's loose file would live."""
        return self.loose.path(digest)

    def has(self, digest: bytes, expected_size: int | None = None) -> bool:
        """True if some pack or a loose file holds the blob (with the expected size)."""
        size = self.packs.packed_size(digest)
        if size is not None and expected_size in (None, size):
            return True
        return self.loose.has(digest, expected_size)

    def first_missing(self, file_rows: Iterable[EntryRow]) -> EntryRow | None:
        """The first file row whose blob is not stored (with the row's size, if loose).

        A packed blob's size was checked when the writer claimed it, against the same
        immutable indexes, so only its presence is looked up here."""
        packed = self.packs.by_digest()
        for row in file_rows:
            digest = row[5]
            assert digest is not None
            if digest not in packed and not self.loose.has(digest, row[3]):
                return row
        return None

    def writer(self, size_hint: int = 0) -> BlobWriter:
        """Stage one blob as a loose file (large blobs, and single puts)."""
        return self.loose.writer(size_hint)

    def put_bytes(self, data: bytes) -> bytes:
        """Store ``data`` as a loose blob and return its digest."""
        return self.loose.put_bytes(data)

    def chunks(self, digest: bytes) -> Iterator[bytes]:
        """Yield the blob's bytes; a mismatch with the digest raises CorruptBlobError."""
        location = self.packs.locate(digest)
        if location is None:
            yield from self.loose.chunks(digest)
            return
        data = self.packs.read_unverified(location)
        hasher = new_hasher(len(data))
        hasher.update(data)
        if hasher.digest() != digest:
            raise CorruptBlobError(
                f"blob {digest.hex()} is corrupt: its bytes in pack {location.pack_id} hash "
                "differently"
            )
        yield data

    def read(self, digest: bytes) -> bytes:
        """The blob's bytes, verified against its digest."""
        return b"".join(self.chunks(digest))

    def verify(self, digest: bytes) -> None:
        """Re-hash a blob; raises MissingBlobError or CorruptBlobError."""
        for _ in self.chunks(digest):
            pass

    def size(self, digest: bytes) -> int:
        """The blob's size in bytes."""
        location = self.packs.locate(digest)
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

    def delete(self, digest: bytes) -> int:
        """Remove a loose blob; packed copies go when gc rewrites their pack."""
        try:
            return self.loose.delete(digest)
        except FileNotFoundError:
            if self.packs.locate(digest) is None:
                raise MissingBlobError(f"blob {digest.hex()} is missing from the store") from None
            return 0

    def sync(self) -> None:
        """Flush the directories loose blobs were published into since the last sync."""
        self.loose.sync()
