"""The new blobs of one ``create``: small ones gathered into size-capped packs, large ones and
batches too small to pay for a pack stored loose; then one flush before the commit.

Like git's unpack limit, a pack is only written once ``PACK_MIN_BLOBS`` new small blobs (or
``PACK_MIN_BYTES`` of them) have arrived; until then they wait in memory, and ``finish``
stores a short tail as loose blobs. A pack is one sequential write and one fsync however many
blobs it holds, so blobs up to ``PACKED_MAX_BYTES`` go into packs; only larger ones stream
into loose blobs of their own.
"""

from __future__ import annotations

from snapstore.format.packfile import PackIndex
from snapstore.repo.backend import Handle, Kind
from snapstore.repo.blobs import Blobs
from snapstore.repo.packs import PackWriter

PACK_MIN_BLOBS = 32
PACK_MIN_BYTES = 8 << 20
PACKED_MAX_BYTES = 16 << 20
PACK_MAX_BYTES = 256 << 20


def is_small(size: int) -> bool:
    """True for a blob that belongs in a pack (small enough that a file of its own is the
    main cost of storing it)."""
    return size < PACKED_MAX_BYTES


class BlobBatch:
    """Collects one writer's new blobs; ``finish`` makes them (and every existing blob the
    writer counts on) durable. Use under the shared gc lock, from one thread."""

    def __init__(self, storage: Blobs) -> None:
        self.storage = storage
        self.published: list[PackIndex] = []
        self._pending: list[tuple[bytes, bytes]] = []
        self._pending_bytes = 0
        self._added: set[bytes] = set()
        self._writer: PackWriter | None = None
        self._counts_on_packs = False
        self._shards: dict[str, frozenset[str]] = {}
        self._packed = storage.packs.by_digest()

    def claim(self, digest: bytes, size: int) -> bool:
        """True if the blob is already stored with this size (in a pack this process saw
        when the batch began, or one it published since). The writer then counts on it, so
        ``finish`` flushes the directory that names it (its writer may have died before
        doing so)."""
        if digest in self._added:
            return True
        index = self._packed.get(digest)
        if index is not None and index.entries[digest][1] == size:
            if not self._counts_on_packs:
                self._counts_on_packs = True
                self.storage.backend.note_existing(Handle(Kind.PACK, index.pack_id))
            return True
        if self._maybe_loose(digest) and self.storage.loose.has(digest, expected_size=size):
            self.storage.loose.reuse(digest)
            return True
        return False

    def _maybe_loose(self, digest: bytes) -> bool:
        """Whether a loose blob may hold it: one listing per two-digit prefix per batch
        instead of a stat per blob (a blob another writer adds meanwhile is merely stored
        twice)."""
        hex_digest = digest.hex()
        names = self._shards.get(hex_digest[:2])
        if names is None:
            names = frozenset(self.storage.backend.names(Kind.BLOB, hex_digest[:2]))
            self._shards[hex_digest[:2]] = names
        return hex_digest in names

    def add(self, digest: bytes, data: bytes) -> None:
        """Store a small blob already hashed to ``digest`` (unless it is stored already)."""
        if self.claim(digest, len(data)):
            return
        self._added.add(digest)
        if self._writer is None:
            self._pending.append((digest, data))
            self._pending_bytes += len(data)
            if len(self._pending) < PACK_MIN_BLOBS and self._pending_bytes < PACK_MIN_BYTES:
                return
            self._writer = self._new_pack()
            for pending_digest, pending_data in self._pending:
                self._writer.add(pending_digest, pending_data)
            self._pending.clear()
            self._pending_bytes = 0
        else:
            self._writer.add(digest, data)
        if self._writer.size >= PACK_MAX_BYTES:
            self._publish()

    def _new_pack(self) -> PackWriter:
        return PackWriter(self.storage.backend)

    def _publish(self) -> None:
        assert self._writer is not None
        writer, self._writer = self._writer, None
        index = writer.publish()
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
        self._pending_bytes = 0
        self.storage.sync()

    def abort(self) -> None:
        """Drop the unpublished pack and the waiting blobs (published packs are gc's)."""
        if self._writer is not None:
            self._writer.abort()
            self._writer = None
        self._pending.clear()
        self._pending_bytes = 0
