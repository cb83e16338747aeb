"""Reading ahead the blobs a restore is about to write, in parallel and in bounded memory.

Where every read is a request with a round trip (object storage), reading one blob after the
other leaves the connection idle most of the time. ``read_ahead`` knows, from the plan, which
blobs the restore asks for and in what order: it reads them on a few threads, at most
``REMOTE.ahead_bytes`` ahead of the writer, and neighbouring blobs of one pack in one ranged
read (a restore of thousands of small files costs a handful of requests per pack, not one per
file); a compressed block is read whole once and decompressed once for all its blobs, when
the first of them is asked for, one block at a time (a span of compressed bytes may hold many
times its size once decompressed).

On a local disk a read costs little, but decompressing costs the writer's thread about as
much as creating the files it writes (after gc, a block holds every version of a few files,
and a restore of one state decompresses a block for each). There, one thread decompresses
the compressed blocks the restore needs, one block per read, in its order and at most
``LOCAL.ahead_bytes`` ahead, while the writer creates files (zstd lets go of the
interpreter's lock while it works); other blobs are read when asked for, as without
read-ahead, and a restore that needs fewer than two compressed blocks starts no thread.

Each blob is still verified against its digest before it is handed out; a read that fails
falls back to the ordinary read of that blob, which raises the error if it persists. Large
blobs are not read ahead: they stream as before. A file stored as an extent map (a large
file's chunks, a file with holes) is read ahead piece by piece, as the restore writes it.
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
    SnapstoreError,
)
from snapstore.format.codec import CODEC_NONE, decompress
from snapstore.format.hashing import new_hasher
from snapstore.format.packfile import BLOCK_HEAD, Block
from snapstore.repo.blobs import Blobs
from snapstore.repo.contents import load_map
from snapstore.repo.loose import BlobSource
from snapstore.repo.packset import Location

BLOB_AHEAD_MAX = 4 << 20
"""Blobs larger than this stream when they are asked for, instead."""
LOCAL_MIN_BLOCKS = 2
"""Compressed blocks a local restore must need before a thread decompresses them ahead."""


@dataclass(frozen=True)
class Reach:
    """How far and in what pieces a backend is read ahead."""

    span_bytes: int
    """At most this much of a pack in one ranged read (a block is always read whole)."""
    gap_bytes: int
    """Neighbouring blobs at most this far apart are read together (the gap is dropped)."""
    ahead_bytes: int
    """Bytes read (and decompressed) but not yet handed out, at most (one read beyond)."""
    compressed_only: bool
    """Read ahead only blobs of compressed blocks (the others cost nothing to read later)."""
    decompress_ahead: bool
    """Decompress on the reading thread (one block a read); else as the blobs are asked
    for, one block at a time (a read of many blocks would hold them all)."""


REMOTE = Reach(
    span_bytes=8 << 20,
    gap_bytes=256 << 10,
    ahead_bytes=64 << 20,
    compressed_only=False,
    decompress_ahead=False,
)
"""Where each read is a request: few, large ranged reads on several threads."""
LOCAL = Reach(
    span_bytes=0, gap_bytes=0, ahead_bytes=16 << 20, compressed_only=True, decompress_ahead=True
)
"""A local disk: one compressed block per read, decompressed on one thread."""

_Loaded = tuple[bytes, dict[int, bytes]]
"""A span's bytes, and its compressed blocks decompressed (by block number)."""


@dataclass
class _Span:
    """One ranged read of a pack (``start`` to ``end``): the blobs it holds, in the order
    they are asked for, and its compressed blocks (decompressed by the reading thread)."""

    pack_id: str
    start: int
    end: int
    blobs: deque[tuple[bytes, Location]] = field(default_factory=deque)
    compressed: dict[int, Block] = field(default_factory=dict)
    plain: bool = False
    """Whether it holds blobs of blocks stored as they are (read from its bytes)."""
    decompress_ahead: bool = True
    future: Future[_Loaded] | None = None
    loaded: _Loaded | None = None

    @property
    def cost(self) -> int:
        """The memory the span holds once read: its bytes and its blocks decompressed (all
        of them, or one at a time)."""
        raws = [block.raw for block in self.compressed.values()]
        held = sum(raws) if self.decompress_ahead else max(raws, default=0)
        return self.end - self.start + held


def _needed(location: Location) -> tuple[int, int]:
    """The bytes of its pack a blob's read needs: its own bytes in a stored block, its whole
    block (with the block's head) in a compressed one."""
    block = location.block
    if block.codec == CODEC_NONE:
        start = block.offset + location.offset
        return start, start + location.size
    return block.offset - BLOCK_HEAD.size, block.offset + block.stored


def _joins(span: _Span, pack_id: str, start: int, end: int, reach: Reach) -> bool:
    """Whether the read of ``span`` can take the bytes from ``start`` to ``end`` too."""
    if span.pack_id != pack_id or start < span.start:
        return False
    if end <= span.end:
        return True
    return start <= span.end + reach.gap_bytes and end - span.start <= reach.span_bytes


def _located(blobs: Blobs, wanted: Iterable[tuple[bytes, int]]) -> Iterator[tuple[bytes, Location]]:
    """Where each of ``wanted`` lies, in the order a restore reads them, with every extent
    map replaced by the pieces it names: one look-up in the pack indexes a blob. A file's
    map is a packed blob whose size is not the file's (a file's own blob always is); one
    that does not decode as a map of that file, and blobs no pack holds, are left out (the
    restore reads them the ordinary way, which raises what is wrong)."""
    packs = blobs.packs
    for digest, size in wanted:
        location = packs.locate(digest)
        if location is None:
            continue
        if location.size == size:
            yield digest, location
            continue
        try:
            extents = load_map(blobs, digest, size)
        except (CorruptManifestError, CorruptBlobError, MissingBlobError):
            continue
        for extent in extents:
            piece = packs.locate(extent.digest)
            if piece is not None and piece.size == extent.length:
                yield extent.digest, piece


def _spans(blobs: Blobs, wanted: Iterable[tuple[bytes, int]], reach: Reach) -> list[_Span]:
    """The ranged reads covering ``wanted`` in order; blobs not worth reading ahead are
    left out (they are read when asked for)."""
    spans: list[_Span] = []
    last: _Span | None = None
    for digest, location in _located(blobs, wanted):
        if location.size > BLOB_AHEAD_MAX:
            continue
        compressed = location.block.codec != CODEC_NONE
        if reach.compressed_only and not compressed:
            continue
        start, end = _needed(location)
        if last is not None and _joins(last, location.pack_id, start, end, reach):
            last.end = max(end, last.end)
        else:
            last = _Span(location.pack_id, start, end, decompress_ahead=reach.decompress_ahead)
            spans.append(last)
        if compressed:
            last.compressed[location.number] = location.block
        else:
            last.plain = True
        last.blobs.append((digest, location))
    return spans


def _decompressed(span: _Span, data: bytes, number: int, block: Block) -> bytes:
    """A compressed block of the span, its head checked against the pack's index."""
    at = block.offset - BLOCK_HEAD.size - span.start
    where = f"block {number} of pack {span.pack_id}"
    if BLOCK_HEAD.unpack_from(data, at) != (block.codec, block.kind, block.stored, block.raw):
        raise CorruptPackError(f"{where}: its head does not match the pack's index")
    stored = data[at + BLOCK_HEAD.size : at + BLOCK_HEAD.size + block.stored]
    return decompress(block.codec, stored, block.raw, where)


def _piece(span: _Span, loaded: _Loaded, location: Location) -> bytes:
    """A blob's bytes out of its span's data, or out of its block decompressed; blocks the
    blobs asked for have gone past are dropped (blobs come in the order of the span)."""
    data, raws = loaded
    block = location.block
    if block.codec == CODEC_NONE:
        at = block.offset + location.offset - span.start
        return data[at : at + location.size]
    for number in [number for number in raws if number < location.number]:
        del raws[number]
    raw = raws.get(location.number)
    if raw is None:  # not decompressed ahead: now, keeping only this block
        raw = _decompressed(span, data, location.number, block)
        raws.clear()
        raws[location.number] = raw
    return raw[location.offset : location.offset + location.size]


class ReadAhead:
    """A BlobSource that hands out blobs read ahead (see the module docstring); anything
    asked for out of the planned order is read the ordinary way."""

    def __init__(self, blobs: Blobs, spans: Iterable[_Span], workers: int, reach: Reach) -> None:
        self.blobs = blobs
        self._pending: deque[_Span] = deque(spans)
        self._started: deque[_Span] = deque()
        self._ahead = 0
        self._ahead_bytes = reach.ahead_bytes
        self._lock = threading.Lock()
        self._block_locks: dict[tuple[str, int], threading.Lock] = {}
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="read-ahead")
        try:
            with self._lock:
                self._fill()
        except BaseException:  # no thread could be started: those started end
            self._pool.shutdown(wait=True, cancel_futures=True)
            raise

    def _load(self, span: _Span) -> _Loaded:
        """Read a span and decompress its compressed blocks (on a reading thread), each
        block once: one decompressed lately (the blobs a restore asks for may come back to
        a block) is taken from the store's cache of decompressed blocks, and a span whose
        every blob lies in such a block is not read at all."""
        cache = self.blobs.packs.cache
        raws: dict[int, bytes] = {}
        if not span.decompress_ahead:
            return self._read(span), raws
        for number in span.compressed:
            cached = cache.get((span.pack_id, number))
            if cached is not None:
                raws[number] = cached
        data = self._read(span) if span.plain or len(raws) < len(span.compressed) else b""
        for number, block in span.compressed.items():
            if number not in raws:
                raws[number] = self._block(span, data, number, block)
        return data, raws

    def _block(self, span: _Span, data: bytes, number: int, block: Block) -> bytes:
        """A block of ``span`` decompressed once: the writer, loading a span no thread had
        begun, and the reading thread, loading a later span of the same block, may come to
        it together; the second waits for the first and takes its result from the cache."""
        key = (span.pack_id, number)
        with self._lock:
            block_lock = self._block_locks.setdefault(key, threading.Lock())
        with block_lock:
            raw = self.blobs.packs.cache.get(key)
            if raw is None:
                raw = _decompressed(span, data, number, block)
                self.blobs.packs.cache.put(key, raw)
            return raw

    def _read(self, span: _Span) -> bytes:
        length = span.end - span.start
        data = self.blobs.backend.read_range(Handle(Kind.PACK, span.pack_id), span.start, length)
        if len(data) != length:
            raise CorruptPackError(f"pack {span.pack_id} is truncated")
        return data

    def _fill(self) -> None:
        """Start reads while less than ``ahead_bytes`` is in flight or unclaimed (under the
        lock: when reading starts, and when the writer has taken a span's last blob)."""
        while self._pending and (
            not self._started or self._ahead + self._pending[0].cost <= self._ahead_bytes
        ):
            span = self._pending.popleft()
            self._ahead += span.cost
            span.future = self._pool.submit(self._load, span)
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
            span.blobs.popleft()
            if not span.blobs:
                self._started.popleft()
                self._ahead -= span.cost
                self._fill()
            return span, location

    def chunks(self, digest: bytes, size: int | None = None) -> Iterator[bytes]:
        taken = self._take(digest, size)
        if taken is None:
            yield from self.blobs.chunks(digest, size)
            return
        span, location = taken
        try:
            piece = _piece(span, self._loaded(span), location)
        except Exception:  # the ordinary read tries again, and raises what persists
            piece = None
        if piece is None or len(piece) != location.size or not _hashes_to(piece, digest):
            yield from self.blobs.chunks(digest, size)
            return
        yield piece

    def _loaded(self, span: _Span) -> _Loaded:
        """The span read (and decompressed): by a reading thread, or by the caller if no
        thread has begun it yet (on a busy machine the reading thread may fall behind: the
        writer never waits for work nobody has started)."""
        if span.loaded is None:
            assert span.future is not None
            if not span.future.done() and span.future.cancel():
                span.loaded = self._load(span)
            else:
                span.loaded = span.future.result()
        return span.loaded

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


def read_ahead(source: BlobSource, wanted: Iterable[tuple[bytes, int]]) -> BlobSource:
    """``source``, reading ``wanted`` (files' blobs or extent maps, with the files' sizes)
    ahead: on several threads where its backend pays per request, on one that decompresses
    where it is local and the restore needs several compressed blocks; else as is. Call
    ``close`` on a ReadAhead when done."""
    if not isinstance(source, Blobs):
        return source
    workers = source.backend.properties.parallel_reads
    reach = REMOTE if workers > 1 else LOCAL
    try:
        spans = _spans(source, wanted, reach)
    except (OSError, SnapstoreError):  # each blob's ordinary read raises what persists
        return source
    if workers <= 1 and sum(len(span.compressed) for span in spans) < LOCAL_MIN_BLOCKS:
        return source
    try:
        return ReadAhead(source, spans, max(workers, 1), reach)
    except RuntimeError:  # no thread can be started now: each blob is read when asked for
        return source
