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
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

import blake3
import msgpack

from snapstore.errors import CorruptManifestError

EXTENT_MAGIC = b"SNAPEXT\x02"
BLOCK_BYTES = 4096
PIECE_BYTES = 1 << 20
DIGEST_BYTES = 32
MAX_MAP_BYTES = 64 << 20
_ZERO_BLOCK = bytes(BLOCK_BYTES)


class CorruptExtentMapError(CorruptManifestError):
    """An extent map fails to decode or does not fit the file that names it."""


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


def map_digest(data: bytes) -> bytes:
    """The digest naming an extent map's bytes (as any blob's)."""
    return blake3.blake3(data).digest()


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise CorruptExtentMapError(message)


def decode_map(data: bytes, size: int) -> list[Extent]:
    """The extents of a map read for a file of ``size`` bytes (the caller has checked the
    bytes against their digest); CorruptExtentMapError if it breaks any rule: extents in
    increasing order, none empty, longer than ``PIECE_BYTES``, overlapping another or reaching
    past ``size``, and the map's own size equal to ``size``."""
    _require(data[: len(EXTENT_MAGIC)] == EXTENT_MAGIC, "an extent map lacks its magic bytes")
    try:
        found = msgpack.unpackb(data[len(EXTENT_MAGIC) :], raw=False, strict_map_key=True)
    except Exception as error:
        raise CorruptExtentMapError(f"an extent map does not decode: {error}") from None
    _require(type(found) is list and len(found) == 2, "an extent map is not [size, extents]")
    recorded, rows = found
    _require(type(recorded) is int and recorded == size, "an extent map is for another size")
    _require(type(rows) is list, "an extent map's extents are not an array")
    extents = []
    end = 0
    for row in rows:
        _require(_fits(row, end, size), f"an extent map holds a bad extent {row!r:.80}")
        extents.append(Extent(row[0], row[1], row[2]))
        end = row[0] + row[1]
    return extents


def _fits(row: Any, end: int, size: int) -> bool:
    """Whether ``row`` is a valid extent starting at or after ``end`` within ``size``."""
    if type(row) is not list or len(row) != 3:
        return False
    offset, length, digest = row
    return (
        type(offset) is int
        and type(length) is int
        and type(digest) is bytes
        and len(digest) == DIGEST_BYTES
        and end <= offset
        and 0 < length <= PIECE_BYTES
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
