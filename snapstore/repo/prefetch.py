"""Reading ahead the blobs a restore is about to write, in parallel and in bounded memory.

Where every read is a request with a round trip (object storage), reading one blob after the
other leaves the connection idle most of the time. ``read_ahead`` knows, from the plan, which
blobs the restore asks for and in what order: it reads them on a few threads, at most
``MAX_AHEAD_BYTES`` ahead of the writer, and neighbouring blobs of one pack in one ranged read
(a restore of thousands of small files costs a handful of requests per pack, not one per
file); a compressed block is read whole once and decompressed once for all its blobs. Each
blob is still verified against its digest before it is handed out; a read that fails falls
back to the ordinary read of that blob, which raises the error if it persists. Large blobs
are not read ahead: they stream as before. A file stored as an extent map (a large file's
chunks, a file with holes) is read ahead piece by piece, as the restore writes it.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from snapstore.backend.seam import Handle, Kind
from snapstore.errors import (
    CorruptBlobError,
    CorruptManifestError,
    CorruptPackError,
    MissingBlobError,
)
from snapstore.format.codec import CODEC_NONE, decompress
from snapstore.format.hashing import new_hasher
from snapstore.format.packfile import BLOCK_HEAD
from snapstore.repo.blobs import Blobs
from snapstore.repo.contents import load_map
from snapstore.repo.loose import BlobSource
from snapstore.repo.packset import Location

MAX_AHEAD_BYTES = 64 << 20
SPAN_BYTES = 8 << 20
"""At most this much of a pack in one ranged read."""
GAP_BYTES = 256 << 10
"""Neighbouring blobs at most this far apart are read together (the gap is read and dropped)."""
BLOB_AHEAD_MAX = 4 << 20
"""Blobs larger than this stream when they are asked for, instead."""


@dataclass
class _Span:
    """One ranged read of a pack (``start`` to ``end``): the blobs it holds, in the order
    they are asked for, and the blocks decompressed from it so far."""

    pack_id: str
    start: int
    end: int
    blobs: list[tuple[bytes, Location]] = field(default_factory=list)
    future: Future[bytes] | None = None
    raw_blocks: dict[int, bytes] = field(default_factory=dict)


def _needed(location: Location) -> tuple[int, int]:
    """The bytes of its pack a blob's read needs: its own bytes in a stored block, its whole
    block (with the block's head) in a compressed one."""
    block = location.block
    if block.codec == CODEC_NONE:
        start = block.offset + location.offset
        return start, start + location.size
    return block.offset - BLOCK_HEAD.size, block.offset + block.stored


def _spans(blobs: Blobs, wanted: Iterable[tuple[bytes, int]]) -> list[_Span]:
    """The ranged reads covering ``wanted`` in order; blobs not worth reading ahead are
    left out (they are read when asked for)."""
    spans: list[_Span] = []
    for digest, size in wanted:
        location = blobs.packs.locate(digest)
        if location is None or location.size != size or size > BLOB_AHEAD_MAX:
            continue
        start, end = _needed(location)
        last = spans[-1] if spans else None
        if (
            last is not None
            and last.pack_id == location.pack_id
            and last.start <= start <= last.end + GAP_BYTES
            and max(end, last.end) - last.start <= SPAN_BYTES
        ):
            last.end = max(end, last.end)
        else:
            last = _Span(location.pack_id, start, end)
            spans.append(last)
        last.blobs.append((digest, location))
    return spans


def _piece(span: _Span, data: bytes, location: Location) -> bytes:
    """A blob's bytes out of its span's data (its block decompressed, once per span)."""
    block = location.block
    if block.codec == CODEC_NONE:
        at = block.offset + location.offset - span.start
        return data[at : at + location.size]
    raw = span.raw_blocks.get(location.number)
    if raw is None:
        at = block.offset - BLOCK_HEAD.size - span.start
        where = f"block {location.number} of pack {span.pack_id}"
        if BLOCK_HEAD.unpack_from(data, at) != (block.codec, block.kind, block.stored, block.raw):
            raise CorruptPackError(f"{where}: its head does not match the pack's index")
        stored = data[at + BLOCK_HEAD.size : at + BLOCK_HEAD.size + block.stored]
        raw = decompress(block.codec, stored, block.raw, where)
        span.raw_blocks = {location.number: raw}  # blobs come in order: one block at a time
    return raw[location.offset : location.offset + location.size]


class ReadAhead:
    """A BlobSource that hands out blobs read ahead (see the module docstring); anything
    asked for out of the planned order is read the ordinary way."""

    def __init__(self, blobs: Blobs, wanted: Iterable[tuple[bytes, int]], workers: int) -> None:
        self.blobs = blobs
        self._pending: deque[_Span] = deque(_spans(blobs, wanted))
        self._started: deque[_Span] = deque()
        self._ahead = 0
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="read-ahead")
        self._fill()

    def _read(self, span: _Span) -> bytes:
        length = span.end - span.start
        data = self.blobs.backend.read_range(Handle(Kind.PACK, span.pack_id), span.start, length)
        if len(data) != length:
            raise CorruptPackError(f"pack {span.pack_id} is truncated")
        return data

    def _fill(self) -> None:
        """Start reads while fewer than ``MAX_AHEAD_BYTES`` are in flight or unclaimed."""
        with self._lock:
            while self._pending and (
                not self._started
                or self._ahead + self._pending[0].end - self._pending[0].start <= MAX_AHEAD_BYTES
            ):
                span = self._pending.popleft()
                self._ahead += span.end - span.start
                span.future = self._pool.submit(self._read, span)
                self._started.append(span)

    def _take(self, digest: bytes, size: int | None) -> tuple[_Span, Location] | None:
        """The started span whose next blob is ``digest``, and where that blob lies."""
        with self._lock:
            if not self._started:
                return None
            span = self._started[0]
            found, location = span.blobs[0]
            if found != digest or size not in (None, location.size):
                return None
            span.blobs.pop(0)
            if not span.blobs:
                self._started.popleft()
                self._ahead -= span.end - span.start
            return span, location

    def chunks(self, digest: bytes, size: int | None = None) -> Iterator[bytes]:
        taken = self._take(digest, size)
        if taken is None:
            yield from self.blobs.chunks(digest, size)
            return
        span, location = taken
        assert span.future is not None
        try:
            piece = _piece(span, span.future.result(), location)
        except Exception:  # the ordinary read tries again, and raises what persists
            piece = None
        self._fill()
        if piece is None or len(piece) != location.size or not _hashes_to(piece, digest):
            yield from self.blobs.chunks(digest, size)
            return
        yield piece

    def read(self, digest: bytes, size: int | None = None) -> bytes:
        return b"".join(self.chunks(digest, size))

    def size(self, digest: bytes) -> int:
        return self.blobs.size(digest)

    def close(self) -> None:
        """Stop reading ahead (reads in flight finish and are dropped)."""
        with self._lock:
            self._pending.clear()
            self._started.clear()
        self._pool.shutdown(wait=True, cancel_futures=True)


def _hashes_to(data: bytes, digest: bytes) -> bool:
    hasher = new_hasher(len(data))
    hasher.update(data)
    return hasher.digest() == digest


def _with_pieces(blobs: Blobs, wanted: Iterable[tuple[bytes, int]]) -> Iterator[tuple[bytes, int]]:
    """``wanted`` with every extent map replaced by the pieces it names, in the order a
    restore reads them. A file's map is a packed blob whose size is not the file's (a file's
    own blob always is); one that does not decode as a map of that file is left as it is."""
    for digest, size in wanted:
        stored = blobs.packs.packed_size(digest)
        if stored is None or stored == size:
            yield digest, size
            continue
        try:
            extents = load_map(blobs, digest, size)
        except (CorruptManifestError, CorruptBlobError, MissingBlobError):
            yield digest, size
            continue
        yield from ((extent.digest, extent.length) for extent in extents)


def read_ahead(source: BlobSource, wanted: Iterable[tuple[bytes, int]]) -> BlobSource:
    """``source``, reading ``wanted`` (files' blobs or extent maps, with the files' sizes)
    ahead where its backend pays per request; else as is. Call ``close`` on a ReadAhead when
    done."""
    if not isinstance(source, Blobs) or source.backend.properties.parallel_reads <= 1:
        return source
    pieces = _with_pieces(source, wanted)
    return ReadAhead(source, pieces, source.backend.properties.parallel_reads)
