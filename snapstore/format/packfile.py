"""The pack format alone: many small blobs in one immutable object, found through an index.

Format 2 packs hold *blocks*: runs of blobs (file contents, or tree objects, never both in
one block) compressed together, each behind a small head. Its index lists the blocks (where
each lies, its codec, its raw and stored sizes) and every blob's block, offset within the
block's raw bytes, and size, sorted by digest, and ends with a checksum. Format 1 packs,
still read, hold each blob raw; their index is read as one uncompressed block per blob, so
every reader sees one shape. Byte layout: docs/format.md, "Packs".
"""

from __future__ import annotations

import operator
import os
import re
import struct
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import blake3

from snapstore.format.codec import CODEC_NONE, CODECS
from snapstore.format.indextable import INDEX_ENTRY as INDEX_ENTRY
from snapstore.format.indextable import (
    LAZY_ENTRIES,
    EntryTable,
    checked_entries,
    corrupt_index,
)

PACK_MAGIC = b"SNAPPAK\x02"
INDEX_MAGIC = b"SNAPIDX\x02"
SEGMENTED_MAGIC = b"SNAPPAK\x03"
"""The magic of an appendable pack: segments, each with its own index (``format.segments``)."""
SEGMENT_INDEX_MAGIC = b"SNAPIDX\x03"
PACK_MAGIC_V1 = b"SNAPPAK\x01"
INDEX_MAGIC_V1 = b"SNAPIDX\x01"
BLOCK_HEAD = struct.Struct("<BBII")
"""codec, kind, stored length, raw length: before each block's stored bytes."""
RECORD_HEAD = struct.Struct("<I")
"""Each blob's size, before its bytes in a block's raw bytes (a pack reads without its index)."""
INDEX_HEAD = struct.Struct("<8sIIQ")
INDEX_BLOCK = struct.Struct("<QIIBB")
INDEX_HEAD_V1 = struct.Struct("<8sIQ")
INDEX_ENTRY_V1 = struct.Struct("<32sQQ")
RECORD_HEAD_V1 = struct.Struct("<32sQ")
CHECKSUM_BYTES = 16
MAX_INDEX_ENTRIES = 10_000_000
MAX_BLOCK_RAW = 32 << 20
"""No block holds more raw bytes (a blob of up to 16 MiB, or blobs filling a block)."""
KIND_DATA = 0
KIND_TREE = 1
KINDS = (KIND_DATA, KIND_TREE)


def new_pack_id() -> str:
    """A fresh pack name: 32 random hex digits (two writers never pick the same one)."""
    return os.urandom(16).hex()


_PACK_ID = re.compile("[0-9a-f]{32}")


def is_pack_id(name: str) -> bool:
    """True for a string shaped like a pack id (32 lowercase hex digits)."""
    return _PACK_ID.fullmatch(name) is not None


class Block(NamedTuple):
    """Where a block's stored bytes lie in its pack, how they are encoded, and what it holds."""

    offset: int
    stored: int
    raw: int
    codec: int
    kind: int


class PackIndex(NamedTuple):
    """A decoded, validated index: the blocks of pack ``pack_id`` and where each digest lies."""

    pack_id: str
    pack_size: int
    entries: Mapping[bytes, tuple[int, int, int]]
    """digest -> (block number, offset of the blob's bytes in the block's raw bytes, size): a
    dict, for a large index an ``EntryTable`` looked up in the index's bytes, for an
    appendable pack a version of its table (``format.packversions``)."""
    blocks: Sequence[Block]
    """A tuple, or for an appendable pack the blocks of that version of its table."""
    version: int = 2
    segments: int = 0
    """How many segments of an appendable pack this index gathers (``format.segments``);
    0 for a pack with an index file of its own. ``pack_size`` is then where the last of them
    ends (the file may be longer: segments appended since, or a torn tail)."""

    @property
    def total_bytes(self) -> int:
        """The raw bytes of all blobs in the pack."""
        return sum(size for _, _, size in self.entries.values())

    def size_of(self, digest: bytes) -> int:
        """The raw size of a blob the pack holds."""
        return self.entries[digest][2]


def _checksum(data: bytes | memoryview) -> bytes:
    return blake3.blake3(data).digest(length=CHECKSUM_BYTES)


def encode_index(
    blocks: list[Block],
    entries: dict[bytes, tuple[int, int, int]],
    pack_size: int,
    magic: bytes = INDEX_MAGIC,
) -> bytes:
    """The format 2 index of a pack of ``pack_size`` bytes holding ``blocks`` and ``entries``
    (with another ``magic``: a segment's index, whose ``pack_size`` is where it starts)."""
    parts = [INDEX_HEAD.pack(magic, len(blocks), len(entries), pack_size)]
    parts.extend(INDEX_BLOCK.pack(*block) for block in blocks)
    parts.extend(INDEX_ENTRY.pack(digest, *entry) for digest, entry in sorted(entries.items()))
    body = b"".join(parts)
    return body + _checksum(body)


def index_limit(pack_size: int) -> int:
    """The largest index a pack of ``pack_size`` bytes can have (each blob takes at least a
    record head in the pack, each block a block head): more is refused unread."""
    most = min(MAX_INDEX_ENTRIES, pack_size // RECORD_HEAD.size)
    blocks = min(MAX_INDEX_ENTRIES, pack_size // BLOCK_HEAD.size)
    v2 = INDEX_HEAD.size + blocks * INDEX_BLOCK.size + most * INDEX_ENTRY.size
    return v2 + CHECKSUM_BYTES


def decode_index(pack_id: str, data: bytes) -> PackIndex:
    """Decode and validate an index file of either format; CorruptPackError naming the pack."""
    if data[:8] == INDEX_MAGIC_V1:
        return _decode_v1(pack_id, data)
    return _decode_v2(pack_id, data)


def decode_segment_index(pack_id: str, data: bytes, floor: int) -> PackIndex:
    """Decode and validate a segment's index, whose blocks lie at ``floor`` or after (its
    ``pack_size`` is the offset the index itself starts at)."""
    return _decode_v2(pack_id, data, SEGMENT_INDEX_MAGIC, floor)


def _checked_body(pack_id: str, data: bytes, end: int) -> memoryview:
    if len(data) != end + CHECKSUM_BYTES:
        raise corrupt_index(
            pack_id, f"{len(data)} bytes where its counts need {end + CHECKSUM_BYTES}"
        )
    view = memoryview(data)
    if _checksum(view[:end]) != data[end:]:
        raise corrupt_index(pack_id, "checksum mismatch")
    return view


def _decode_v2(
    pack_id: str, data: bytes, magic_wanted: bytes = INDEX_MAGIC, floor: int = len(PACK_MAGIC)
) -> PackIndex:
    """A format 2 index (or, with ``magic_wanted`` and ``floor``, a segment's index, whose
    blocks lie between ``floor`` and the offset its head records)."""
    if len(data) < INDEX_HEAD.size + CHECKSUM_BYTES:
        raise corrupt_index(pack_id, "it is truncated")
    magic, block_count, count, pack_size = INDEX_HEAD.unpack_from(data)
    if magic != magic_wanted:
        raise corrupt_index(pack_id, "bad magic (not a snapstore pack index, or a newer format)")
    if count > MAX_INDEX_ENTRIES or block_count > MAX_INDEX_ENTRIES:
        raise corrupt_index(pack_id, f"it claims {count} entries in {block_count} blocks")
    blocks_end = INDEX_HEAD.size + block_count * INDEX_BLOCK.size
    end = blocks_end + count * INDEX_ENTRY.size
    view = _checked_body(pack_id, data, end)
    blocks = tuple(map(Block._make, INDEX_BLOCK.iter_unpack(view[INDEX_HEAD.size : blocks_end])))
    _check_blocks(pack_id, blocks, pack_size, floor)
    raws = tuple(block.raw for block in blocks)
    if count >= LAZY_ENTRIES and magic_wanted == INDEX_MAGIC:
        if not isinstance(data, bytes):
            data = bytes(data)
        return PackIndex(
            pack_id, pack_size, EntryTable(pack_id, data, blocks_end, count, raws), blocks
        )
    return PackIndex(
        pack_id, pack_size, checked_entries(pack_id, view[blocks_end:end], raws), blocks
    )


def _check_blocks(pack_id: str, blocks: tuple[Block, ...], pack_size: int, floor: int) -> None:
    """Blocks must follow each other in the pack (from ``floor``), heads included, within its
    size."""
    for block in blocks:
        if block.offset < floor + BLOCK_HEAD.size or block.offset + block.stored > pack_size:
            raise corrupt_index(pack_id, f"a block at {block.offset} lies outside the pack")
        if block.codec not in CODECS or block.kind not in KINDS:
            raise corrupt_index(
                pack_id, f"a block has unknown codec {block.codec} or kind {block.kind}"
            )
        if block.raw > MAX_BLOCK_RAW or (block.codec == CODEC_NONE and block.stored != block.raw):
            raise corrupt_index(pack_id, f"a block claims {block.raw} raw bytes in {block.stored}")
        floor = block.offset + block.stored


def _decode_v1(pack_id: str, data: bytes) -> PackIndex:
    """A format 1 index, each blob as a raw block of its own."""
    if len(data) < INDEX_HEAD_V1.size + CHECKSUM_BYTES:
        raise corrupt_index(pack_id, "it is truncated")
    _, count, pack_size = INDEX_HEAD_V1.unpack_from(data)
    if count > MAX_INDEX_ENTRIES:
        raise corrupt_index(pack_id, f"it claims {count} entries")
    end = INDEX_HEAD_V1.size + count * INDEX_ENTRY_V1.size
    view = _checked_body(pack_id, data, end)
    if count == 0:
        return PackIndex(pack_id, pack_size, {}, (), version=1)
    digests, offsets, sizes = zip(
        *INDEX_ENTRY_V1.iter_unpack(view[INDEX_HEAD_V1.size : end]), strict=True
    )
    if not all(map(operator.lt, digests, digests[1:])):
        raise corrupt_index(pack_id, "entries are not sorted by digest")
    floor = len(PACK_MAGIC_V1) + RECORD_HEAD_V1.size
    ends = list(map(operator.add, offsets, sizes))
    if min(offsets) < floor or max(ends) > pack_size:
        outside = next(
            d for d, o, e in zip(digests, offsets, ends, strict=True) if o < floor or e > pack_size
        )
        raise corrupt_index(pack_id, f"blob {outside.hex()} lies outside the pack")
    blocks = tuple(
        Block(offset, size, size, CODEC_NONE, KIND_DATA)
        for offset, size in zip(offsets, sizes, strict=True)
    )
    entries = {
        digest: (number, 0, size)
        for number, (digest, size) in enumerate(zip(digests, sizes, strict=True))
    }
    return PackIndex(pack_id, pack_size, entries, blocks, version=1)
