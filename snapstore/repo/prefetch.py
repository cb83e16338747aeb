"""Reading ahead the blobs a restore is about to write, in parallel and in bounded memory.

Where every read is a request with a round trip (object storage), reading one blob after the
other leaves the connection idle most of the time. ``read_ahead`` knows, from the plan, which
blobs the restore asks for and in what order: it reads them on a few threads, at most
``MAX_AHEAD_BYTES`` ahead of the writer, and neighbouring blobs of one pack in one ranged read
(a restore of thousands of small files costs a handful of requests per pack, not one per
file). Each blob is still verified against its digest before it is handed out; a read that
fails falls back to the ordinary read of that blob, which raises the error if it persists.
Large blobs are not read ahead: they stream as before.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from snapstore.repo.blobs import Blobs
from snapstore.repo.loose import BlobSource, new_hasher
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
    """One ranged read of a pack: the blobs it holds, in the order they are asked for."""

    pack_id: str
    start: int
    end: int
    blobs: list[tuple[bytes, int, int]] = field(default_factory=list)
    """(digest, offset in the span, size)"""
    future: Future[bytes] | None = None


def _spans(blobs: Blobs, wanted: Iterable[tuple[bytes, int]]) -> list[_Span]:
    """The ranged reads covering ``wanted`` in order; blobs not worth reading ahead are
    left out (they are read when asked for)."""
    spans: list[_Span] = []
    for digest, size in wanted:
        location = blobs.packs.locate(digest)
        if location is None or location.size != size or size > BLOB_AHEAD_MAX:
            continue
        last = spans[-1] if spans else None
        if (
            last is not None
            and last.pack_id == location.pack_id
            and last.end <= location.offset <= last.end + GAP_BYTES
            and location.offset + size - last.start <= SPAN_BYTES
        ):
            last.blobs.append((digest, location.offset - last.start, size))
            last.end = location.offset + size
            continue
        span = _Span(location.pack_id, location.offset, location.offset + size)
        span.blobs.append((digest, 0, size))
        spans.append(span)
    return spans


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
        return self.blobs.packs.read_unverified(
            Location(span.pack_id, span.start, span.end - span.start)
        )

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

    def _take(self, digest: bytes, size: int | None) -> tuple[_Span, int] | None:
        """The started span whose next blob is ``digest``, and its offset in the span."""
        with self._lock:
            if not self._started:
                return None
            span = self._started[0]
            found, offset, length = span.blobs[0]
            if found != digest or size not in (None, length):
                return None
            span.blobs.pop(0)
            if not span.blobs:
                self._started.popleft()
                self._ahead -= span.end - span.start
            return span, offset

    def chunks(self, digest: bytes, size: int | None = None) -> Iterator[bytes]:
        taken = self._take(digest, size)
        if taken is None:
            yield from self.blobs.chunks(digest, size)
            return
        span, offset = taken
        assert span.future is not None
        try:
            data = span.future.result()
        except Exception:  # the ordinary read retries it, and raises what persists
            data = b""
        self._fill()
        length = self._length(digest, size)
        piece = data[offset : offset + length] if len(data) >= offset + length else None
        if piece is None:
            yield from self.blobs.chunks(digest, size)
            return
        hasher = new_hasher(length)
        hasher.update(piece)
        if hasher.digest() != digest:  # the ordinary read falls back to a loose copy, or raises
            yield from self.blobs.chunks(digest, size)
            return
        yield piece

    def _length(self, digest: bytes, size: int | None) -> int:
        if size is not None:
            return size
        location = self.blobs.packs.locate(digest)
        return 0 if location is None else location.size

    def read(self, digest: bytes, size: int | None = None) -> bytes:
        return b"".join(self.chunks(digest, size))

    def close(self) -> None:
        """Stop reading ahead (reads in flight finish and are dropped)."""
        with self._lock:
            self._pending.clear()
            self._started.clear()
        self._pool.shutdown(wait=True, cancel_futures=True)


def read_ahead(source: BlobSource, wanted: Iterable[tuple[bytes, int]]) -> BlobSource:
    """``source``, reading ``wanted`` ahead where its backend pays per request; else as is.
    Call ``close`` on a ReadAhead when done."""
    if not isinstance(source, Blobs) or source.backend.properties.parallel_reads <= 1:
        return source
    return ReadAhead(source, wanted, source.backend.properties.parallel_reads)
