"""The new blobs of one ``create``: small ones gathered into size-capped packs, large ones and
batches too small to pay for a pack stored loose; then one flush before the commit.

Like git's unpack limit, a pack is only written once ``PACK_MIN_BLOBS`` new small blobs have
arrived; until then they wait in memory, and ``finish`` stores a short tail as loose blobs.
"""

from __future__ import annotations

from snapstore.packs import PackIndex, PackWriter
from snapstore.storage import BlobStorage

PACK_MIN_BLOBS = 32
PACKED_MAX_BYTES = 1 << 20
PACK_MAX_BYTES = 256 << 20


def is_small(size: int) -> bool:
    """True for a blob that belongs in a pack (small enough that a file of its own is the
    main cost of storing it)."""
    return size < PACKED_MAX_BYTES


class BlobBatch:
    """Collects one writer's new blobs; ``finish`` makes them (and every existing blob the
    writer counts on) durable. Use under the shared gc lock, from one thread."""

    def __init__(self, storage: BlobStorage) -> None:
        self.storage = storage
        self.published: list[PackIndex] = []
        self._pending: list[tuple[bytes, bytes]] = []
        self._added: set[bytes] = set()
        self._writer: PackWriter | None = None
        self._flush_packs_dir = False

    def claim(self, digest: bytes, size: int) -> bool:
        """True if the blob is already stored with this size. The writer then counts on it,
        so ``finish`` flushes the directory that names it (its writer may have died before
        doing so)."""
        if digest in self._added:
            return True
        if self.storage.packs.packed_size(digest) == size:
            self._flush_packs_dir = True
            return True
        if self.storage.loose.has(digest, expected_size=size):
            self.storage.loose.reuse(digest)
            return True
        return False

    def add(self, digest: bytes, data: bytes) -> None:
        """Store a small blob already hashed to ``digest`` (unless it is stored already)."""
        if self.claim(digest, len(data)):
            return
        self._added.add(digest)
        if self._writer is None:
            self._pending.append((digest, data))
            if len(self._pending) < PACK_MIN_BLOBS:
                return
            self._writer = self._new_pack()
            for pending_digest, pending_data in self._pending:
                self._writer.add(pending_digest, pending_data)
            self._pending.clear()
        else:
            self._writer.add(digest, data)
        if self._writer.size >= PACK_MAX_BYTES:
            self._publish()

    def _new_pack(self) -> PackWriter:
        storage = self.storage
        return PackWriter(
            storage.fs, storage.tmp_dir, storage.packs.packs_dir, durable=storage.durable
        )

    def _publish(self) -> None:
        assert self._writer is not None
        writer, self._writer = self._writer, None
        index = writer.publish()
        self._flush_packs_dir = False
        self.storage.packs.register(index)
        self.published.append(index)

    def finish(self) -> None:
        """Publish the open pack, store the short tail loose, and flush every directory the
        batch's blobs are named in. After this, a manifest may reference them."""
        if self._writer is not None:
            self._publish()
        while self._pending:
            digest, data = self._pending[0]
            stored = self.storage.loose.put_bytes(data)
            assert stored == digest
            self._pending.pop(0)
        if self._flush_packs_dir and self.storage.durable:
            self.storage.fs.fsync_dir(self.storage.packs.packs_dir)
        self.storage.sync()

    def abort(self) -> None:
        """Drop the unpublished pack and the waiting blobs (published packs are gc's)."""
        if self._writer is not None:
            self._writer.abort()
            self._writer = None
        self._pending.clear()
