"""Writing packs and reading their indexes, through the backend.

A pack is staged, flushed and published first, its name flushed, and only then is its index
written (atomically, durably): an index never names a pack a crash could lose. Creating one
object per blob costs far more than hashing it; a pack turns thousands of small blobs into two
objects and two flushes. The bytes: ``snapstore.format.packfile``.
"""

from __future__ import annotations

from snapstore.errors import CorruptPackError
from snapstore.format.packfile import (
    CHECKSUM_BYTES,
    INDEX_ENTRY,
    INDEX_HEAD,
    MAX_INDEX_ENTRIES,
    PACK_MAGIC,
    RECORD_HEAD,
    PackIndex,
    decode_index,
    encode_index,
    new_pack_id,
)
from snapstore.fs.reading import UnfitFileError
from snapstore.repo.backend import Backend, Handle, Kind
from snapstore.repo.filememo import FileMemo, backend_key

WRITE_BUFFER_BYTES = 1 << 20
MAX_REMEMBERED_INDEXES = 1024

_DECODED: FileMemo[PackIndex] = FileMemo(limit=MAX_REMEMBERED_INDEXES)
"""Indexes decoded in this process: indexes are immutable, so a new ``SnapStore`` of the same
root need not decode them again. ``forget_indexes`` drops those of packs that went away; the
limit bounds what roots no longer used can leave behind."""


class PackSizeError(CorruptPackError):
    """A pack is not the size its (intact) index records: truncated or overwritten. ``index``
    still says which blobs the pack was meant to hold."""

    def __init__(self, index: PackIndex, actual_size: int) -> None:
        super().__init__(
            f"pack {index.pack_id} is {actual_size} bytes; its index says {index.pack_size}"
        )
        self.index = index


def read_index(backend: Backend, pack_id: str) -> PackIndex:
    """Read and decode a pack's index and check it against the pack's size; OSError if the
    index cannot be read, CorruptPackError if it or its pack is damaged.

    Nothing is allocated for an index larger than its pack could need (each blob takes at
    least a record header in the pack), so a hostile or sparse index costs no memory."""
    try:
        pack_size = backend.stat(Handle(Kind.PACK, pack_id)).size
    except FileNotFoundError:
        raise CorruptPackError(f"pack {pack_id} is missing (its index is there)") from None
    most = min(MAX_INDEX_ENTRIES, pack_size // RECORD_HEAD.size)
    limit = INDEX_HEAD.size + most * INDEX_ENTRY.size + CHECKSUM_BYTES
    try:
        index = _DECODED.read(
            backend,
            Handle(Kind.INDEX, pack_id),
            lambda data: decode_index(pack_id, data),
            max_bytes=limit,
        )
    except UnfitFileError as error:
        raise CorruptPackError(
            f"pack index {pack_id} is corrupt: {error.strerror or error}"
        ) from None
    if index.pack_size != pack_size:
        raise PackSizeError(index, pack_size)
    return index


def forget_indexes(backend: Backend, keep: set[str]) -> None:
    """Forget the decoded indexes of ``backend`` whose pack id is not in ``keep``."""
    mine = backend_key(backend)

    def kept(key: tuple[str, Handle]) -> bool:
        owner, handle = key
        return owner != mine or handle.kind is not Kind.INDEX or handle.name in keep

    _DECODED.forget(kept)


class PackWriter:
    """Streams blobs into a new staged pack; ``publish`` puts it and its index in place.

    ``abort`` (or any failure) drops the staged pack; nothing is ever visible before its
    bytes are flushed.
    """

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.pack_id = new_pack_id()
        self.entries: dict[bytes, tuple[int, int]] = {}
        self.size = len(PACK_MAGIC)
        self._buffer: list[bytes | memoryview] = [PACK_MAGIC]
        self._buffered = len(PACK_MAGIC)
        self._staged = backend.stage(Kind.PACK)

    def __contains__(self, digest: bytes) -> bool:
        return digest in self.entries

    def add(self, digest: bytes, data: bytes | memoryview) -> None:
        """Append one blob (already hashed to ``digest``); a repeated digest is skipped."""
        if digest in self.entries:
            return
        self._buffer.append(RECORD_HEAD.pack(digest, len(data)))
        self._buffered += RECORD_HEAD.size
        self.entries[digest] = (self.size + RECORD_HEAD.size, len(data))
        self.size += RECORD_HEAD.size + len(data)
        if len(data) >= WRITE_BUFFER_BYTES:
            self._flush()
            self._staged.write(data)
        else:
            self._buffer.append(data)
            self._buffered += len(data)
            if self._buffered >= WRITE_BUFFER_BYTES:
                self._flush()

    def _flush(self) -> None:
        if self._buffer:
            self._staged.write(b"".join(self._buffer))
            self._buffer = []
            self._buffered = 0

    def publish(self) -> PackIndex:
        """Publish the pack with its name flushed, then write its index; returns the index.
        On failure nothing of the pack is published except, possibly, the pack alone (an
        unindexed pack is garbage for gc)."""
        try:
            self._flush()
        except BaseException:
            self.abort()
            raise
        self._staged.commit(self.pack_id, name_durable=True)
        index = PackIndex(self.pack_id, self.size, dict(self.entries))
        handle = Handle(Kind.INDEX, self.pack_id)
        self.backend.write(handle, encode_index(self.entries, self.size))
        _DECODED.remember(self.backend, handle, index)
        return index

    def abort(self) -> None:
        """Drop the unpublished pack."""
        self._staged.abort()
