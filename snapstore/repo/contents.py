"""A recorded file's bytes from the store, whether one blob holds them or an extent map
names their pieces (a large file, cut into chunks, or a file with holes:
``snapstore.format.extents``).

Every reader of a file's content goes through here, so a chunked file or a file with holes
reads the same as any other: ``read_content`` gives its bytes with the holes as zeros,
``pieces`` the pieces of data at their offsets (a restore writes those and leaves the holes
unwritten), ``read_range`` part of the file, fetching only the pieces that hold it.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor

from snapstore.errors import CorruptBlobError, FileTooLargeError
from snapstore.format.extents import MAX_MAP_BYTES, CorruptExtentMapError, Extent, decode_map
from snapstore.models import FileEntry
from snapstore.repo.loose import BlobSource

PIECES_AHEAD = 4
"""How many pieces of a mapped file are read ahead of the one being used."""
MAX_READ_WITH_HOLES = 1 << 30
"""The most hole bytes ``read_content`` materializes (holes become zeros in memory, so a
few kilobytes in the store could otherwise ask for any amount). Only hole bytes count:
whether a file's bytes were stored as one blob or as pieces never changes what reads."""


def load_map(blobs: BlobSource, digest: bytes, file_size: int) -> list[Extent]:
    """The extents of the map ``digest`` of a file of ``file_size`` bytes, verified and
    validated; CorruptExtentMapError for a map that breaks the rules (or is too large to be
    one), MissingBlobError or CorruptBlobError if its bytes cannot be had."""
    size = blobs.size(digest)
    if size > MAX_MAP_BYTES:
        raise CorruptExtentMapError(f"extent map {digest.hex()} is {size} bytes, too large")
    return decode_map(blobs.read(digest, size), file_size)


def pieces(blobs: BlobSource, entry: FileEntry) -> Iterator[tuple[int, bytes]]:
    """The file's bytes as (offset, chunk), in offset order, each verified against its
    digest: consecutive chunks for a plain file; for a file with holes only its data pieces
    (the gaps between them are zeros). A chunk that fails its digest raises CorruptBlobError
    once it has been read whole."""
    assert entry.digest is not None
    if not entry.extents:
        offset = 0
        for chunk in blobs.chunks(entry.digest, entry.size):
            yield offset, chunk
            offset += len(chunk)
        if offset != entry.size:
            raise CorruptBlobError(
                f"blob {entry.digest.hex()} holds {offset} bytes, not the {entry.size} recorded"
            )
        return
    yield from _map_pieces(blobs, load_map(blobs, entry.digest, entry.size))


def _map_pieces(blobs: BlobSource, extents: list[Extent]) -> Iterator[tuple[int, bytes]]:
    """The pieces named by ``extents``, in order, each verified. Up to ``PIECES_AHEAD`` are
    read (and verified) on a worker thread ahead of the caller, so that a restore's writes
    overlap its reads and hashing; a failed read raises when its turn comes."""
    if len(extents) <= 1:
        for extent in extents:
            yield extent.offset, _read_piece(blobs, extent)
        return
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pieces")
    ahead: deque[tuple[Extent, Future[bytes]]] = deque()
    upcoming = iter(extents)
    try:
        for extent in itertools.islice(upcoming, PIECES_AHEAD):
            ahead.append((extent, pool.submit(_read_piece, blobs, extent)))
        while ahead:
            extent, future = ahead.popleft()
            data = future.result()
            for following in itertools.islice(upcoming, 1):
                ahead.append((following, pool.submit(_read_piece, blobs, following)))
            yield extent.offset, data
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _read_piece(blobs: BlobSource, extent: Extent) -> bytes:
    """One piece's bytes, verified against its digest and its recorded length."""
    data = blobs.read(extent.digest, extent.length)
    if len(data) != extent.length:
        raise CorruptBlobError(
            f"piece {extent.digest.hex()} holds {len(data)} bytes, not {extent.length}"
        )
    return data


def read_content(blobs: BlobSource, entry: FileEntry) -> bytes:
    """The file's whole bytes, verified (a file with holes gets zeros in them; its map is
    checked first, and FileTooLargeError refuses one whose holes add up to more than
    ``MAX_READ_WITH_HOLES`` bytes)."""
    assert entry.digest is not None
    if not entry.extents:
        return blobs.read(entry.digest, entry.size)
    extents = load_map(blobs, entry.digest, entry.size)
    holes = entry.size - sum(extent.length for extent in extents)
    if holes > MAX_READ_WITH_HOLES:
        raise FileTooLargeError(
            f"{entry.path!r} is a file of {entry.size} bytes with {holes} bytes of holes, too "
            f"many to read into memory (at most {MAX_READ_WITH_HOLES}); restore it instead"
        )
    content = bytearray(entry.size)
    for offset, data in _map_pieces(blobs, extents):
        content[offset : offset + len(data)] = data
    return bytes(content)


def read_range(
    blobs: BlobSource, entry: FileEntry, offset: int, length: int | None, head_bytes: int
) -> tuple[bytes, bytes]:
    """The file's first ``head_bytes`` and its bytes from ``offset`` (at most ``length``;
    None: to the end), holes as zeros; only the two windows are kept in memory. A file of
    one blob is read whole in one pass (its bytes are verified against one digest); of a
    file with an extent map, only the pieces that overlap a window are read, each verified."""
    assert entry.digest is not None
    start = min(max(offset, 0), entry.size)
    end = entry.size if length is None else min(entry.size, start + max(length, 0))
    head = bytearray(min(head_bytes, entry.size))
    window = bytearray(end - start)
    if entry.extents:
        wanted = [(0, len(head)), (start, end)]
        found: Iterator[tuple[int, bytes]] = _map_pieces(
            blobs, _overlapping(load_map(blobs, entry.digest, entry.size), wanted)
        )
    else:
        found = pieces(blobs, entry)
    for piece_offset, data in found:
        _copy_into(head, 0, piece_offset, data)
        _copy_into(window, start, piece_offset, data)
    return bytes(head), bytes(window)


def _overlapping(extents: list[Extent], ranges: list[tuple[int, int]]) -> list[Extent]:
    """The extents that share a byte with any of the ``ranges`` (start, end)."""
    return [
        extent
        for extent in extents
        if any(
            low < high and extent.offset < high and low < extent.offset + extent.length
            for low, high in ranges
        )
    ]


def _copy_into(target: bytearray, target_start: int, offset: int, data: bytes) -> None:
    """Copy the part of ``data`` (which lies at file offset ``offset``) that falls in
    ``target`` (which holds the file's bytes from ``target_start``)."""
    low = max(target_start, offset)
    high = min(target_start + len(target), offset + len(data))
    if low < high:
        target[low - target_start : high - target_start] = data[low - offset : high - offset]
