"""Reading files with holes without reading the holes (``SEEK_DATA``/``SEEK_HOLE``).

A file that may have holes (fewer blocks allocated than its size needs) is probed once with
``SEEK_HOLE``; every other file costs nothing more. A file found to have holes is read region
by region, only where the filesystem says there is data, and turned into the pieces of its
extent map (``snapstore.format.extents``). Where the filesystem cannot say (no
``SEEK_HOLE``, or it answers with an error), the file is read as any other.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator

import blake3

from snapstore.format.extents import (
    BLOCK_BYTES,
    PIECE_BYTES,
    Extent,
    data_blocks,
    encode_map,
    map_digest,
)

SEEK_DATA: int | None = getattr(os, "SEEK_DATA", None)
SEEK_HOLE: int | None = getattr(os, "SEEK_HOLE", None)
SECTOR_BYTES = 512


def may_have_holes(info: os.stat_result) -> bool:
    """True if a regular file's stat allows holes: fewer 512-byte blocks allocated than its
    size needs (no syscall; compressed or inline files pass too, and a probe tells)."""
    blocks = getattr(info, "st_blocks", None)
    return (
        blocks is not None
        and blocks * SECTOR_BYTES < info.st_size  # first: false for most files
        and SEEK_HOLE is not None
        and stat.S_ISREG(info.st_mode)
    )


def has_holes(fd: int, info: os.stat_result) -> bool:
    """True if the open regular file (with stat ``info``) has a hole before its end. At most
    one ``SEEK_HOLE`` probe, and none for a file whose blocks cover its size; the file's
    offset is put back to its start. False where the filesystem cannot tell."""
    if not may_have_holes(info):
        return False
    assert SEEK_HOLE is not None
    try:
        hole = os.lseek(fd, 0, SEEK_HOLE)
    except OSError:
        return False
    finally:
        os.lseek(fd, 0, os.SEEK_SET)
    return hole < info.st_size


def data_regions(fd: int, size: int) -> list[tuple[int, int]]:
    """The byte ranges of the file's first ``size`` bytes where it may hold data, widened to
    whole blocks of ``BLOCK_BYTES`` and merged where they touch. A filesystem that cannot
    tell gives one range: the whole file."""
    if SEEK_DATA is None or SEEK_HOLE is None:
        return [(0, size)] if size else []
    regions: list[tuple[int, int]] = []
    position = 0
    try:
        while position < size:
            try:
                start = os.lseek(fd, position, SEEK_DATA)
            except OSError as error:
                if error.errno == errno.ENXIO:
                    break
                raise
            if start >= size:
                break
            end = min(os.lseek(fd, start, SEEK_HOLE), size)
            start -= start % BLOCK_BYTES
            wide_end = min(-(-end // BLOCK_BYTES) * BLOCK_BYTES, size)
            if regions and regions[-1][1] >= start:
                regions[-1] = (regions[-1][0], max(regions[-1][1], wide_end))
            else:
                regions.append((start, wide_end))
            position = max(end, start + 1)
    except OSError:
        return [(0, size)] if size else []
    return regions


def _read_exactly(fd: int, length: int, offset: int) -> bytes:
    """Up to ``length`` bytes at ``offset``; fewer only where the file ends sooner."""
    parts = []
    while length > 0 and (chunk := os.pread(fd, length, offset)):
        parts.append(chunk)
        offset += len(chunk)
        length -= len(chunk)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def read_data(fd: int, size: int) -> Iterator[tuple[int, bytes]]:
    """The file's data regions (``data_regions``) as they are on disk, zeros and all,
    (offset, bytes) in offset order, one window of at most ``PIECE_BYTES`` (never crossing a
    multiple of it) at a time. A file that shrinks meanwhile yields less (its stat shows the
    change)."""
    for start, end in data_regions(fd, size):
        offset = start
        while offset < end:
            window = min(end, offset - offset % PIECE_BYTES + PIECE_BYTES) - offset
            data = _read_exactly(fd, window, offset)
            if data:
                yield offset, data
            if len(data) < window:
                return
            offset += window


def read_pieces(fd: int, size: int) -> Iterator[tuple[int, bytes]]:
    """The pieces of the file's fixed-cut extent map, (offset, bytes) in offset order: its
    data regions without their all-zero blocks (``data_blocks``)."""
    for offset, data in read_data(fd, size):
        yield from data_blocks(offset, data)


def extents_digest(fd: int, size: int) -> bytes:
    """The digest of the extent map a snapshot would record for the open file's first
    ``size`` bytes, whatever its holes on disk (a file without any is read whole)."""
    extents = [
        Extent(offset, len(data), blake3.blake3(data).digest())
        for offset, data in read_pieces(fd, size)
    ]
    return map_digest(encode_map(size, extents))
