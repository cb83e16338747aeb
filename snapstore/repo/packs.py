"""The pack format alone: many small blobs in one immutable file, found through an index.

A pack (``packs/<id>.pack``) is a magic followed by records ``digest | size | bytes``; its
index (``packs/<id>.idx``) lists every record's digest, offset and size, sorted by digest,
and ends with a checksum. Both are written in ``tmp/``, flushed and renamed into place through
the I/O seam: the pack first, the index after it, so an index never names a missing pack.
Creating one file per blob costs far more than hashing it; a pack turns thousands of small
blobs into two files and two fsyncs. Byte layout: docs/format.md, "Packs".
"""

from __future__ import annotations

import contextlib
import operator
import os
import struct
from dataclasses import dataclass

import blake3

from snapstore.errors import CorruptPackError
from snapstore.fs.durable import create_temp, discard, write_atomic
from snapstore.fs.reading import UnfitFileError
from snapstore.fs.seam import FileSystem, start_writeback
from snapstore.repo.filememo import FileMemo

PACK_MAGIC = b"SNAPPAK\x01"
INDEX_MAGIC = b"SNAPIDX\x01"
RECORD_HEAD = struct.Struct("<32sQ")
INDEX_HEAD = struct.Struct("<8sIQ")
INDEX_ENTRY = struct.Struct("<32sQQ")
CHECKSUM_BYTES = 16
PACK_SUFFIX = ".pack"
INDEX_SUFFIX = ".idx"
WRITE_BUFFER_BYTES = 1 << 20
WRITEBACK_BYTES = 8 << 20
MAX_INDEX_ENTRIES = 10_000_000


def new_pack_id() -> str:
    """A fresh pack name: 32 random hex digits (two writers never pick the same one)."""
    return os.urandom(16).hex()


def is_pack_id(name: str) -> bool:
    """True for a string shaped like a pack id."""
    return len(name) == 32 and all(c in "0123456789abcdef" for c in name)


@dataclass(frozen=True)
class PackIndex:
    """A decoded, validated index: where each digest's bytes lie in pack ``pack_id``."""

    pack_id: str
    pack_size: int
    entries: dict[bytes, tuple[int, int]]
    """digest -> (offset of the blob's bytes in the pack, size)."""

    @property
    def total_bytes(self) -> int:
        """The bytes of all blobs in the pack."""
        return sum(size for _, size in self.entries.values())


def _checksum(data: bytes | memoryview) -> bytes:
    return blake3.blake3(data).digest(length=CHECKSUM_BYTES)


def encode_index(entries: dict[bytes, tuple[int, int]], pack_size: int) -> bytes:
    """The index file's bytes for a pack of ``pack_size`` bytes holding ``entries``."""
    parts = [INDEX_HEAD.pack(INDEX_MAGIC, len(entries), pack_size)]
    parts.extend(
        INDEX_ENTRY.pack(digest, offset, size) for digest, (offset, size) in sorted(entries.items())
    )
    body = b"".join(parts)
    return body + _checksum(body)


def decode_index(pack_id: str, data: bytes) -> PackIndex:
    """Decode and validate an index file; raises CorruptPackError naming the pack."""

    def corrupt(why: str) -> CorruptPackError:
        return CorruptPackError(f"pack index {pack_id}{INDEX_SUFFIX} is corrupt: {why}")

    if len(data) < INDEX_HEAD.size + CHECKSUM_BYTES:
        raise corrupt("it is truncated")
    magic, count, pack_size = INDEX_HEAD.unpack_from(data)
    if magic != INDEX_MAGIC:
        raise corrupt("bad magic (not a snapstore pack index, or a newer format)")
    if count > MAX_INDEX_ENTRIES:
        raise corrupt(f"it claims {count} entries")
    end = INDEX_HEAD.size + count * INDEX_ENTRY.size
    if len(data) != end + CHECKSUM_BYTES:
        raise corrupt(f"{len(data)} bytes where {count} entries need {end + CHECKSUM_BYTES}")
    view = memoryview(data)
    if _checksum(view[:end]) != data[end:]:
        raise corrupt("checksum mismatch")
    if count == 0:
        return PackIndex(pack_id, pack_size, {})
    # Checked column by column (C-level passes): an index may list tens of thousands of blobs.
    digests, offsets, sizes = zip(
        *INDEX_ENTRY.iter_unpack(view[INDEX_HEAD.size : end]), strict=True
    )
    if not all(map(operator.lt, digests, digests[1:])):
        raise corrupt("entries are not sorted by digest")
    floor = len(PACK_MAGIC) + RECORD_HEAD.size
    ends = list(map(operator.add, offsets, sizes))
    if min(offsets) < floor or max(ends) > pack_size:
        outside = next(
            d for d, o, e in zip(digests, offsets, ends, strict=True) if o < floor or e > pack_size
        )
        raise corrupt(f"blob {outside.hex()} lies outside the pack")
    return PackIndex(
        pack_id, pack_size, dict(zip(digests, zip(offsets, sizes, strict=True), strict=True))
    )


MAX_REMEMBERED_INDEXES = 1024

_DECODED: FileMemo[PackIndex] = FileMemo(limit=MAX_REMEMBERED_INDEXES)
"""Indexes decoded in this process: indexes are immutable, so a new ``SnapStore`` of the same
root need not decode them again. ``forget_indexes`` drops those of packs that went away; the
limit bounds what roots no longer used can leave behind."""


def read_index(packs_dir: str, pack_id: str) -> PackIndex:
    """Read and decode ``packs/<id>.idx`` and check it against its pack file's size;
    OSError if the index cannot be read, CorruptPackError if it or its pack is damaged.

    Nothing is allocated for an index larger than its pack could need (each blob takes at
    least a record header in the pack), so a hostile or sparse index costs no memory."""
    path = os.path.join(packs_dir, pack_id + INDEX_SUFFIX)
    try:
        pack_size = os.stat(os.path.join(packs_dir, pack_id + PACK_SUFFIX)).st_size
    except FileNotFoundError:
        raise CorruptPackError(
            f"pack {pack_id}{PACK_SUFFIX} is missing (its index is there)"
        ) from None
    most = min(MAX_INDEX_ENTRIES, pack_size // RECORD_HEAD.size)
    limit = INDEX_HEAD.size + most * INDEX_ENTRY.size + CHECKSUM_BYTES
    try:
        index = _DECODED.read(path, lambda data: decode_index(pack_id, data), max_bytes=limit)
    except UnfitFileError as error:
        raise CorruptPackError(
            f"pack index {pack_id}{INDEX_SUFFIX} is corrupt: {error.strerror or error}"
        ) from None
    if index.pack_size != pack_size:
        raise PackSizeError(index, pack_size)
    return index


class PackSizeError(CorruptPackError):
    """A pack file is not the size its (intact) index records: truncated or overwritten.
    ``index`` still says which blobs the pack was meant to hold."""

    def __init__(self, index: PackIndex, actual_size: int) -> None:
        super().__init__(
            f"pack {index.pack_id}{PACK_SUFFIX} is {actual_size} bytes; its index says "
            f"{index.pack_size}"
        )
        self.index = index


def remember_index(packs_dir: str, index: PackIndex) -> None:
    """Remember the index this process just published, as if read back from its file."""
    _DECODED.remember(os.path.join(packs_dir, index.pack_id + INDEX_SUFFIX), index)


def forget_indexes(packs_dir: str, keep: set[str]) -> None:
    """Forget the decoded indexes of ``packs_dir`` whose pack id is not in ``keep``."""
    wanted = {os.path.join(packs_dir, pack_id + INDEX_SUFFIX) for pack_id in keep}
    prefix = os.path.join(packs_dir, "")
    _DECODED.forget(lambda path: path in wanted or not path.startswith(prefix))


class PackWriter:
    """Streams blobs into a new pack in ``tmp/``; ``publish`` puts it and its index in place.

    ``abort`` (or any failure) removes the temp file; nothing is ever visible in ``packs/``
    before its bytes are flushed.
    """

    def __init__(self, fs: FileSystem, tmp_dir: str, packs_dir: str, *, durable: bool) -> None:
        self.fs = fs
        self.tmp_dir = tmp_dir
        self.packs_dir = packs_dir
        self.durable = durable
        self.pack_id = new_pack_id()
        self.entries: dict[bytes, tuple[int, int]] = {}
        self.size = len(PACK_MAGIC)
        self._buffer: list[bytes | memoryview] = [PACK_MAGIC]
        self._buffered = len(PACK_MAGIC)
        self._fd, self._temp_path = create_temp(fs, tmp_dir)
        self._open = True
        self._unflushed = 0

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
            self._write(data)
        else:
            self._buffer.append(data)
            self._buffered += len(data)
            if self._buffered >= WRITE_BUFFER_BYTES:
                self._flush()

    def _flush(self) -> None:
        if self._buffer:
            self._write(b"".join(self._buffer))
            self._buffer = []
            self._buffered = 0

    def _write(self, data: bytes | memoryview) -> None:
        self.fs.write(self._fd, data)
        self._unflushed += len(data)
        if self.durable and self._unflushed >= WRITEBACK_BYTES:
            # Let the disk work while blobs are still being read; the fsync then waits less.
            start_writeback(self._fd)
            self._unflushed = 0

    def publish(self) -> PackIndex:
        """Flush the pack, rename it into ``packs/``, flush that directory, then write the
        index the same way; returns the index. On failure nothing of the pack is published
        except, possibly, the pack file alone (an unindexed pack is garbage for gc)."""
        try:
            self._flush()
            self.fs.fchmod(self._fd, 0o444)
            if self.durable:
                self.fs.fsync(self._fd)
            self._close()
            pack_path = os.path.join(self.packs_dir, self.pack_id + PACK_SUFFIX)
            self.fs.replace(self._temp_path, pack_path)
        except BaseException:
            self.abort()
            raise
        # The pack's name must be durable before an index can name it.
        if self.durable:
            self.fs.fsync_dir(self.packs_dir)
        write_atomic(
            self.fs,
            os.path.join(self.packs_dir, self.pack_id + INDEX_SUFFIX),
            encode_index(self.entries, self.size),
            tmp_dir=self.tmp_dir,
            durable=self.durable,
            mode=0o444,
        )
        return PackIndex(self.pack_id, self.size, dict(self.entries))

    def _close(self) -> None:
        if self._open:
            self._open = False
            self.fs.close(self._fd)

    def abort(self) -> None:
        """Drop the unpublished pack."""
        with contextlib.suppress(OSError):
            self._close()
        discard(self.fs, self._temp_path)
