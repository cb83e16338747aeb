"""Cutting a large file into content-defined chunks, streaming, without reading its holes.

The file's data is read where the filesystem says there is data (``SEEK_DATA``/``SEEK_HOLE``,
widened to 4096-byte blocks); only those real holes are holes: zeros the file holds on disk
(a preallocated database or disk image) are data, so a restore allocates them again and no
run is cut into tiny pieces around them. Each maximal run of data is cut by FastCDC
(``pyfastcdc``, the 2020 algorithm, in compiled code) with the given ``ChunkParams``. A cut
depends only on the bytes from the chunk's start, so the same bytes give the same chunks
wherever they lie: an overwrite changes the chunk it falls in (and at most the next), an
insertion the chunks around it, and every other chunk is the same blob as before. Memory
stays bounded whatever the file's size: at most a few ``max`` chunk lengths of a run are
held at a time.
"""

from __future__ import annotations

from collections.abc import Iterator

import blake3

from snapstore.format.extents import (
    CHUNK_PARAMS,
    CHUNKED_FROM_BYTES,
    ChunkParams,
    Extent,
    encode_chunked_map,
    map_digest,
)
from snapstore.fs.sparse import extents_digest, read_data

HELD_CHUNKS = 4
"""How many ``max`` chunk lengths of a run are gathered before cutting (the cutter's view)."""


class _RunCutter:
    """Cuts one run of data at a time, fed in pieces; ``cut`` yields every chunk whose end no
    later byte can move (at least ``max`` bytes follow its start), or all of them at the run's
    end."""

    def __init__(self, params: ChunkParams) -> None:
        import pyfastcdc  # deferred: only files of CHUNKED_FROM_BYTES or more are cut

        self.params = params
        self.cutter = pyfastcdc.FastCDC(params.avg, min_size=params.min, max_size=params.max)
        self.pending = bytearray()
        self.start = 0

    @property
    def end(self) -> int:
        """The file offset just past the bytes gathered so far."""
        return self.start + len(self.pending)

    def feed(self, offset: int, data: bytes) -> Iterator[tuple[int, bytes]]:
        """Add a piece of data at ``offset``; a gap since the last piece ends the run."""
        if self.pending and offset != self.end:
            yield from self.cut(final=True)
        if not self.pending:
            self.start = offset
        self.pending += data
        if len(self.pending) >= HELD_CHUNKS * self.params.max:
            yield from self.cut(final=False)

    def cut(self, *, final: bool) -> Iterator[tuple[int, bytes]]:
        """The chunks of the gathered bytes that are settled (all of them if ``final``)."""
        lengths = self._settled_lengths(final)
        used = 0
        chunks = []
        with memoryview(self.pending) as view:  # one copy per chunk, not a slice and a copy
            for length in lengths:
                chunks.append((self.start + used, bytes(view[used : used + length])))
                used += length
        del self.pending[:used]
        self.start += used
        yield from chunks

    def _settled_lengths(self, final: bool) -> list[int]:
        """The lengths of the settled chunks at the start of the gathered bytes (the views
        the cutter takes are all released on return, so the buffer may be resized)."""
        lengths = []
        size = len(self.pending)
        for chunk in self.cutter.cut_buf(self.pending):
            if not final and size - chunk.offset < self.params.max:
                break
            lengths.append(chunk.length)
        return lengths


def read_chunks(
    fd: int, size: int, params: ChunkParams = CHUNK_PARAMS
) -> Iterator[tuple[int, bytes]]:
    """The chunks of the open file's first ``size`` bytes, (offset, bytes) in offset order:
    the pieces of its chunked map. A file that shrinks meanwhile yields fewer (its stat
    shows the change)."""
    run = _RunCutter(params)
    for offset, data in read_data(fd, size):
        yield from run.feed(offset, data)
    yield from run.cut(final=True)


def chunked_map(fd: int, size: int, params: ChunkParams = CHUNK_PARAMS) -> bytes:
    """The chunked map a snapshot would record for the open file's first ``size`` bytes
    (only hashed, nothing stored)."""
    extents = [
        Extent(offset, len(data), blake3.blake3(data).digest())
        for offset, data in read_chunks(fd, size, params)
    ]
    return encode_chunked_map(size, extents, params)


def chunked_digest(fd: int, size: int, params: ChunkParams = CHUNK_PARAMS) -> bytes:
    """The digest of ``chunked_map``: what a snapshot records for such a file."""
    return map_digest(chunked_map(fd, size, params))


def holds_map(fd: int, size: int, digest: bytes) -> bool:
    """True if the open file's first ``size`` bytes give the extent map ``digest``, made
    either way a writer makes one (chunked, or cut at fixed offsets for a file with holes):
    the way a writer picks for this size is tried first. Equal digests mean equal bytes,
    whichever way matched."""
    ways = [chunked_digest, extents_digest]
    if size < CHUNKED_FROM_BYTES:
        ways.reverse()
    return any(way(fd, size) == digest for way in ways)
