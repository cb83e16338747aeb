"""Extent maps: a sparse file's content as its data extents, holes implied (format 2).

A file with holes is stored as the pieces of it that hold data plus one small object, its
*extent map*, naming each piece by offset, length and digest; the file's tree row names the
map instead of one blob of its bytes. Holes are never read, hashed or stored, and a restore
writes the pieces at their offsets into a file cut to the right size, so the holes stay holes.

The map a writer makes is a function of the file's bytes alone, whatever its holes look like
on disk: the file is cut into ``BLOCK_BYTES`` blocks at fixed offsets, the blocks holding any
byte other than zero form the data (an all-zero block is a hole, written explicitly or not),
and runs of data blocks are cut at every multiple of ``PIECE_BYTES``. Two files with the same
bytes thus get the same map and the same digest, and the digest of a file in the work tree
can be computed the same way to tell whether it still holds what a snapshot recorded. Byte
layout: docs/format.md, "Extent maps".

A large file (``CHUNKED_FROM_BYTES`` and over, holes or not) gets a *chunked* map instead
(magic ``CHUNKED_MAGIC``): its runs of data blocks are cut where their content says
(content-defined chunking, FastCDC), not at fixed offsets, so an overwrite or an insertion
changes only the pieces it touches and every other piece is stored once, across files,
snapshots and sessions. Such a map records the chunker's parameters; readers need only its
extents, which follow the same rules with a longer bound (``MAX_CHUNK_BYTES``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

import blake3
import msgpack

from snapstore.errors import CorruptManifestError

EXTENT_MAGIC = b"SNAPEXT\x02"
CHUNKED_MAGIC = b"SNAPEXT\x03"
CHUNKED_FROM_BYTES = 1 << 20
"""Files this large and larger are stored as a chunked map (smaller ones stay one blob, or
a fixed-cut map if they have holes)."""
MAX_CHUNK_BYTES = 16 << 20
BLOCK_BYTES = 4096
PIECE_BYTES = 1 << 20
DIGEST_BYTES = 32
MAX_MAP_BYTES = 64 << 20
_ZERO_BLOCK = bytes(BLOCK_BYTES)


class CorruptExtentMapError(CorruptManifestError):
    """An extent map fails to decode or does not fit the file that names it."""


class ChunkParams(NamedTuple):
    """FastCDC's bounds on a chunk's length, in bytes: a cut is never made before ``min``
    bytes, aims at ``avg`` (normalized chunking, level 1), and is forced at ``max``."""

    min: int
    avg: int
    max: int


CHUNK_PARAMS = ChunkParams(64 << 10, 256 << 10, 1 << 20)
"""The parameters writers use. 256 KiB on average: a 4 KiB overwrite costs one or two
pieces (docs/performance.md compares 64 KiB, 256 KiB and 1 MiB)."""


class Extent(NamedTuple):
    """One piece of a file's data: where it lies and the blob holding its bytes."""

    offset: int
    length: int
    digest: bytes


def encode_map(size: int, extents: Iterable[Extent]) -> bytes:
    """The bytes of the extent map of a file of ``size`` bytes whose data is ``extents``
    (in offset order, valid)."""
    rows = [[extent.offset, extent.length, extent.digest] for extent in extents]
    packed = msgpack.packb([size, rows], use_bin_type=True)
    assert isinstance(packed, bytes)
    return EXTENT_MAGIC + packed


def encode_chunked_map(size: int, extents: Iterable[Extent], params: ChunkParams) -> bytes:
    """The bytes of the chunked map of a file of ``size`` bytes cut with ``params`` into
    ``extents`` (in offset order, valid)."""
    rows = [[extent.offset, extent.length, extent.digest] for extent in extents]
    packed = msgpack.packb([size, rows, list(params)], use_bin_type=True)
    assert isinstance(packed, bytes)
    return CHUNKED_MAGIC + packed


def map_digest(data: bytes) -> bytes:
    """The digest naming an extent map's bytes (as any blob's)."""
    return blake3.blake3(data).digest()


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise CorruptExtentMapError(message)


def decode_map(data: bytes, size: int) -> list[Extent]:
    """The extents of a map read for a file of ``size`` bytes (the caller has checked the
    bytes against their digest); CorruptExtentMapError if it breaks any rule: extents in
    increasing order, none empty, longer than ``PIECE_BYTES`` (``MAX_CHUNK_BYTES`` in a chunked
    map), overlapping another or reaching past ``size``, and the map's own size equal to
    ``size``."""
    magic = data[: len(EXTENT_MAGIC)]
    _require(magic in (EXTENT_MAGIC, CHUNKED_MAGIC), "an extent map lacks its magic bytes")
    chunked = magic == CHUNKED_MAGIC
    try:
        found = msgpack.unpackb(data[len(EXTENT_MAGIC) :], raw=False, strict_map_key=True)
    except Exception as error:
        raise CorruptExtentMapError(f"an extent map does not decode: {error}") from None
    if chunked:
        _require(
            type(found) is list and len(found) == 3 and _params_fit(found[2]),
            "a chunked map is not [size, extents, [min, avg, max]] within bounds",
        )
        found = found[:2]
    _require(type(found) is list and len(found) == 2, "an extent map is not [size, extents]")
    recorded, rows = found
    longest = MAX_CHUNK_BYTES if chunked else PIECE_BYTES
    _require(type(recorded) is int and recorded == size, "an extent map is for another size")
    _require(type(rows) is list, "an extent map's extents are not an array")
    extents = []
    end = 0
    for row in rows:
        _require(_fits(row, end, size, longest), f"an extent map holds a bad extent {row!r:.80}")
        extents.append(Extent(row[0], row[1], row[2]))
        end = row[0] + row[1]
    return extents


def _params_fit(params: Any) -> bool:
    """Whether a chunked map's parameters are three integers ``0 < min <= avg <= max`` with
    ``max`` at most ``MAX_CHUNK_BYTES``."""
    return (
        type(params) is list
        and len(params) == 3
        and all(type(value) is int for value in params)
        and 0 < params[0] <= params[1] <= params[2] <= MAX_CHUNK_BYTES
    )


def _fits(row: Any, end: int, size: int, longest: int) -> bool:
    """Whether ``row`` is a valid extent starting at or after ``end`` within ``size``, at
    most ``longest`` bytes long."""
    if type(row) is not list or len(row) != 3:
        return False
    offset, length, digest = row
    return (
        type(offset) is int
        and type(length) is int
        and type(digest) is bytes
        and len(digest) == DIGEST_BYTES
        and end <= offset
        and 0 < length <= longest
        and offset + length <= size
    )


def _zero_blocks(data: bytes) -> list[int]:
    """The offsets in ``data`` of its all-zero blocks (a last, shorter block included), found
    with a substring search: data without any run of zeros costs one pass in C."""
    found = []
    position = 0
    full = len(data) - len(data) % BLOCK_BYTES
    while (start := data.find(_ZERO_BLOCK, position, full)) >= 0:
        aligned = -(-start // BLOCK_BYTES) * BLOCK_BYTES
        if data[aligned : aligned + BLOCK_BYTES] == _ZERO_BLOCK:
            found.append(aligned)
            position = aligned + BLOCK_BYTES
        else:
            position = aligned + 1
    if full < len(data) and data[full:] == bytes(len(data) - full):
        found.append(full)
    return found


def data_blocks(offset: int, data: bytes) -> Iterator[tuple[int, bytes]]:
    """The runs of ``data`` (which starts at ``offset``, a multiple of ``BLOCK_BYTES``) that
    hold a byte other than zero, whole blocks at a time and cut at every multiple of
    ``PIECE_BYTES``: the pieces an extent map lists, as (offset, bytes)."""
    start = 0
    for zero in [*_zero_blocks(data), len(data)]:
        while start < zero:
            cut = min(zero, (offset + start) // PIECE_BYTES * PIECE_BYTES + PIECE_BYTES - offset)
            yield offset + start, data[start:cut]
            start = cut
        start = zero + BLOCK_BYTES
