"""Appendable packs: one pack file a writer appends one segment to per create.

A pack with an index file of its own costs a create two new names and four flushes. An
appendable pack (magic ``SNAPPAK\\x03``, no index file) holds **segments** back to back after
its magic; a segment is the blocks of one create (laid out as in any pack), then their index
(the format 2 index layout with the magic ``SNAPIDX\\x03``, block offsets counted from the
start of the file, and the offset the index starts at where a pack's size would be), then a
fixed-size trailer:

    magic ``SNAPSEG\\x03`` (8) · segment start (u64) · index length (u64) · checksum (16)

The checksum is BLAKE3 (16-byte output) of the trailer's first 24 bytes followed by the
index's own checksum (its last 16 bytes). A segment is whole once it ends with a trailer
that checks, whose index checks and starts right after the segment's blocks: a reader walks
a pack backwards from a known end (a pack log line, or the file's size) by trailers, and
forwards from the first segment (block heads, then an index's magic) when the file ends in
a torn tail, the bytes of an append that never finished: they are never read as a segment.
Byte layout: docs/format.md, "Appendable packs".
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

import blake3

from snapstore.errors import CorruptPackError
from snapstore.format.codec import CODECS
from snapstore.format.packfile import (
    BLOCK_HEAD,
    CHECKSUM_BYTES,
    INDEX_BLOCK,
    INDEX_ENTRY,
    INDEX_HEAD,
    KINDS,
    MAX_BLOCK_RAW,
    MAX_INDEX_ENTRIES,
    RECORD_HEAD,
    SEGMENT_INDEX_MAGIC,
    SEGMENTED_MAGIC,
    Block,
    PackIndex,
    decode_segment_index,
    encode_index,
    index_limit,
)
from snapstore.format.packversions import PackTable, VersionEntries

TRAILER = struct.Struct("<8sQQ16s")
TRAILER_MAGIC = b"SNAPSEG\x03"
FIRST_SEGMENT = len(SEGMENTED_MAGIC)
"""Where the first segment of an appendable pack starts."""

Reader = Callable[[int, int], bytes]
"""Reads ``length`` bytes at ``offset`` of one pack (fewer where the file ends)."""


@dataclass(frozen=True)
class Segment:
    """One whole segment: where it starts and ends, and its own index (block numbers count
    from its first block)."""

    start: int
    end: int
    index: PackIndex


def _trailer_checksum(head: bytes, index: bytes) -> bytes:
    return blake3.blake3(head + index[-CHECKSUM_BYTES:]).digest(length=CHECKSUM_BYTES)


def encode_tail(
    blocks: list[Block], entries: dict[bytes, tuple[int, int, int]], start: int, index_start: int
) -> bytes:
    """The index and trailer that end a segment starting at ``start`` whose blocks (offsets
    counted from the start of the file) end at ``index_start``."""
    index = encode_index(blocks, entries, index_start, SEGMENT_INDEX_MAGIC)
    head = TRAILER_MAGIC + struct.pack("<QQ", start, len(index))
    return index + head + _trailer_checksum(head, index)


def _corrupt(pack_id: str, end: int, why: str) -> CorruptPackError:
    return CorruptPackError(f"pack {pack_id}: no whole segment ends at {end}: {why}")


def read_segment(pack_id: str, read: Reader, end: int, floor: int) -> Segment:
    """The segment that ends at ``end`` and starts at ``floor`` or after; CorruptPackError
    if no whole segment ends there."""
    if end - TRAILER.size < floor:
        raise _corrupt(pack_id, end, "too short")
    raw = read(end - TRAILER.size, TRAILER.size)
    if len(raw) != TRAILER.size:
        raise _corrupt(pack_id, end, "the file ends sooner")
    magic, start, length, checksum = TRAILER.unpack(raw)
    index_start = end - TRAILER.size - length
    if magic != TRAILER_MAGIC or not floor <= start <= index_start:
        raise _corrupt(pack_id, end, "no trailer")
    if length > index_limit(index_start - start + FIRST_SEGMENT):
        raise _corrupt(pack_id, end, f"an index of {length} bytes")
    data = read(index_start, length)
    if len(data) != length or _trailer_checksum(raw[:24], data) != checksum:
        raise _corrupt(pack_id, end, "checksum mismatch")
    index = decode_segment_index(pack_id, data, start)
    if index.pack_size != index_start:
        raise _corrupt(pack_id, end, "its index does not follow its blocks")
    return Segment(start, end, index)


def read_back(pack_id: str, read: Reader, end: int, stop: int) -> list[Segment]:
    """The segments between ``stop`` (where a segment starts) and ``end`` (where one ends),
    in file order, walked backwards by their trailers; CorruptPackError if they do not
    follow each other exactly."""
    found = []
    cursor = end
    while cursor > stop:
        segment = read_segment(pack_id, read, cursor, stop)
        found.append(segment)
        cursor = segment.start
    if cursor != stop:
        raise _corrupt(pack_id, end, f"segments do not meet at {stop}")
    found.reverse()
    return found


def whole_end(read: Reader, start: int, size: int) -> int:
    """Where the last whole segment after ``start`` (where a segment starts) ends, walking
    forwards by block heads and indexes within ``size`` bytes: ``start`` if none is whole.
    What follows is a torn tail."""
    good = cursor = start
    while cursor + BLOCK_HEAD.size <= size:
        head = read(cursor, INDEX_HEAD.size)
        if head[:8] == SEGMENT_INDEX_MAGIC:
            if len(head) < INDEX_HEAD.size:
                break
            _, blocks, entries, _ = INDEX_HEAD.unpack(head)
            if blocks > MAX_INDEX_ENTRIES or entries > MAX_INDEX_ENTRIES:
                break
            length = INDEX_HEAD.size + blocks * INDEX_BLOCK.size + entries * INDEX_ENTRY.size
            end = cursor + length + CHECKSUM_BYTES + TRAILER.size
            if end > size:
                break
            try:
                segment = read_segment("", read, end, good)
            except CorruptPackError:
                break
            if segment.start != good:
                break
            good = cursor = end
            continue
        if len(head) < BLOCK_HEAD.size:
            break
        codec, kind, stored, raw = BLOCK_HEAD.unpack_from(head)
        if codec not in CODECS or kind not in KINDS or not RECORD_HEAD.size <= raw <= MAX_BLOCK_RAW:
            break  # no writer makes such a block (zeros, say: a size made durable before data)
        if stored == 0:
            break
        cursor += BLOCK_HEAD.size + stored
    return good


def merge(
    pack_id: str, previous: PackIndex | None, segments: list[Segment]
) -> tuple[PackIndex, list[bytes]]:
    """One index of a whole appendable pack: ``previous`` (its segments read so far) and
    the ``segments`` that follow it, block numbers counted across the pack; and every digest
    the new segments hold (a digest stored twice keeps its first place, but is returned: a
    process's map may have lost it when another pack that held it went, and maps it to this
    pack again). The new index shares its table with ``previous`` (``format.packversions``):
    it costs what the new segments hold, and ``previous`` stays as it was."""
    parts = [(segment.index.blocks, segment.index.entries) for segment in segments]
    if previous is None:
        entries = PackTable().extend(None, parts)
    else:
        tip = previous.entries if isinstance(previous.entries, VersionEntries) else None
        entries = tip.table.extend(tip, parts) if tip is not None else None
        if entries is None:  # not the tip of a table: one of its own first
            own = PackTable.of(previous.entries, previous.blocks)
            entries = own.table.extend(own, parts)
    assert entries is not None  # a new table's tip extends
    held = [digest for segment in segments for digest in segment.index.entries]
    count = (previous.segments if previous is not None else 0) + len(segments)
    end = segments[-1].end if segments else (previous.pack_size if previous else FIRST_SEGMENT)
    return PackIndex(pack_id, end, entries, entries.blocks(), segments=count), held
