"""Writing packs and reading their indexes, through the backend.

A pack is staged, flushed and published first, its name flushed, and only then is its index
written (atomically, durably): an index never names a pack a crash could lose. Creating one
object per blob costs far more than hashing it; a pack turns thousands of small blobs into two
objects and two flushes. Blobs are gathered into blocks, each compressed on its own (see
``snapstore.format.codec``); file contents and tree objects never share a block, so reading a
directory never decompresses file data. The bytes: ``snapstore.format.packfile``.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Protocol

from snapstore.backend.seam import Backend, Handle, Kind, StagedObject
from snapstore.errors import CorruptPackError
from snapstore.format.codec import WRITE_LEVEL, compress
from snapstore.format.indextable import EntryTable
from snapstore.format.packfile import (
    BLOCK_HEAD,
    KIND_DATA,
    MAX_BLOCK_RAW,
    PACK_MAGIC,
    RECORD_HEAD,
    Block,
    PackIndex,
    decode_index,
    encode_index,
    index_limit,
    new_pack_id,
)
from snapstore.fs.reading import UnfitFileError
from snapstore.repo.filememo import FileMemo, backend_key

BLOCK_BYTES = 1 << 20
"""A block is closed once its raw bytes reach this (reading one blob decompresses at most
one block: about a millisecond)."""
MAX_REMEMBERED_INDEXES = 1024
COMPRESSING_BLOCKS = 4
"""Closed blocks that may wait for their compression at once (a bound on the memory they
hold)."""
_RECORD_HEAD_BYTES = RECORD_HEAD.size
_record_head = RECORD_HEAD.pack
INLINE_BLOCK_BYTES = 256 << 10
"""A block with fewer raw bytes than this is compressed in the caller's thread: zstd takes
well under a tenth of a millisecond for it, less than handing it to a thread (a small
create's blocks, the last block of a larger one)."""


def _compressing_threads() -> int:
    """Threads that compress a writer's blocks: two where the process may run on two cores.
    Compressing is most of a first snapshot's work (zstd releases the GIL), and two threads
    keep up with the one thread that reads and hashes the files: a third would wait for
    blocks to fill."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - macOS has no affinity
        cores = os.cpu_count() or 1
    return max(1, min(2, cores))


COMPRESSING_THREADS = _compressing_threads()

_DECODED: FileMemo[PackIndex] = FileMemo(limit=MAX_REMEMBERED_INDEXES)
"""Indexes decoded in this process: indexes are immutable, so a new ``SnapStore`` of the same
root need not decode them again. ``forget_indexes`` drops those of packs that went away; the
limit bounds what roots no longer used can leave behind."""


class SegmentSink(Protocol):
    """Where a writer appends its blocks as one segment of an appendable pack
    (``openpack.OpenPack``)."""

    available: bool

    def append(
        self,
        body: Sequence[bytes | memoryview],
        blocks: list[Block],
        entries: dict[bytes, tuple[int, int, int]],
    ) -> tuple[PackIndex, int]: ...


SEGMENT_BYTES = 4 << 20
"""The stored bytes of blocks a writer may append as one segment; past them it writes a
pack with an index file of its own (one flush for many blobs costs little there)."""


class PackSizeError(CorruptPackError):
    """A pack is not the size its (intact) index records: truncated or overwritten. ``index``
    still says which blobs the pack was meant to hold."""

    def __init__(self, index: PackIndex, actual_size: int) -> None:
        super().__init__(
            f"pack {index.pack_id} is {actual_size} bytes; its index says {index.pack_size}"
        )
        self.index = index


def read_index(backend: Backend, pack_id: str) -> PackIndex:
    """Read and decode a pack's index and check it against the pack's size; OSError if the
    index cannot be read, CorruptPackError if it or its pack is damaged.

    Nothing is allocated for an index larger than its pack could need (each blob takes at
    least a record head in the pack), so a hostile or sparse index costs no memory."""
    try:
        pack_size = backend.stat(Handle(Kind.PACK, pack_id)).size
    except FileNotFoundError:
        raise CorruptPackError(f"pack {pack_id} is missing (its index is there)") from None
    try:
        index = _DECODED.read(
            backend,
            Handle(Kind.INDEX, pack_id),
            lambda data: decode_index(pack_id, data),
            max_bytes=index_limit(pack_size),
        )
    except UnfitFileError as error:
        raise CorruptPackError(
            f"pack index {pack_id} is corrupt: {error.strerror or error}"
        ) from None
    if index.pack_size != pack_size:
        raise PackSizeError(index, pack_size)
    if isinstance(index.entries, EntryTable) and index.entries.problem is not None:
        raise index.entries.problem  # read whole before (gc, verify): it breaks the rules
    return index


def forget_indexes(backend: Backend, keep: set[str]) -> None:
    """Forget the decoded indexes of ``backend`` whose pack id is not in ``keep``."""
    mine = backend_key(backend)

    def kept(key: tuple[str, Handle]) -> bool:
        owner, handle = key
        return owner != mine or handle.kind is not Kind.INDEX or handle.name in keep

    _DECODED.forget(kept)


def join_and_compress(parts: list[bytes | memoryview], level: int) -> tuple[int, bytes]:
    """``compress`` of the block made of ``parts``: joined on the compressing thread, not the
    caller's (``bytes.join`` of a megabyte or more of ``bytes`` releases the GIL; the copy,
    and the faults of its fresh buffer, were a tenth of the reading thread's time)."""
    return compress(b"".join(parts), level)


class PackWriter:
    """Streams blobs into a new staged pack, block by block; ``publish`` puts it and its
    index in place.

    ``abort`` (or any failure) drops the staged pack; nothing is ever visible before its
    bytes are flushed. ``level`` is the zstd level of its blocks. ``inline``: compress every
    block in the caller's thread (a writer that is itself a background thread, which must
    also work while the interpreter shuts down and no new thread pool may start).
    ``segments``: where the backend appends, the blocks are kept in memory and ``publish``
    appends them as one segment of the process's appendable pack, unless they grow past
    ``SEGMENT_BYTES`` (then they go on into a pack of their own).
    """

    def __init__(
        self,
        backend: Backend,
        *,
        level: int = WRITE_LEVEL,
        inline: bool = False,
        segments: SegmentSink | None = None,
    ) -> None:
        self.backend = backend
        self.level = level
        self.inline = inline
        self.pack_id = new_pack_id()
        self.entries: dict[bytes, tuple[int, int, int]] = {}
        self.blocks: list[Block] = []
        self.size = len(PACK_MAGIC)
        self._open: list[bytes | memoryview] = []
        self._open_bytes = 0
        self._open_kind = KIND_DATA
        self._closed = 0
        self._compressing: deque[tuple[int, int, Future[tuple[int, bytes]]]] = deque()
        self._pool: ThreadPoolExecutor | None = None
        self._segments = segments if segments is not None and segments.available else None
        self._held: list[bytes] = []
        self.appended = 0
        """The bytes of the segment ``publish`` appended (0: a pack of its own)."""
        self._staged: StagedObject | None = None
        if self._segments is None:
            self._start_staged()

    def _start_staged(self) -> None:
        """Stage a pack of its own, holding the blocks kept in memory so far."""
        self._staged = staged = self.backend.stage(Kind.PACK)
        try:
            staged.write(PACK_MAGIC)
            for part in self._held:
                staged.write(part)
        except BaseException:
            staged.abort()
            raise
        self._held = []
        self._segments = None

    def _emit(self, head: bytes, stored: bytes) -> None:
        """Put a block (its head and stored bytes) after the previous one."""
        if self._staged is not None:
            self._staged.write(head)
            self._staged.write(stored)
            return
        self._held += (head, stored)
        if self.size + len(head) + len(stored) - len(PACK_MAGIC) > SEGMENT_BYTES:
            self._start_staged()

    def __contains__(self, digest: bytes) -> bool:
        return digest in self.entries

    @property
    def pending_bytes(self) -> int:
        """Raw bytes waiting in the open block."""
        return self._open_bytes

    def add(self, digest: bytes, data: bytes | memoryview, kind: int = KIND_DATA) -> None:
        """Append one blob (already hashed to ``digest``) of ``kind``; a repeated digest is
        skipped."""
        entries = self.entries
        if digest in entries:
            return
        length = len(data)
        record = _RECORD_HEAD_BYTES + length
        if record > MAX_BLOCK_RAW:
            raise ValueError(f"a blob of {length} bytes is too large for a pack")
        start = self._open_bytes  # every record has a head: 0 only while the block is empty
        if start and (
            kind != self._open_kind or start >= BLOCK_BYTES or start + record > MAX_BLOCK_RAW
        ):
            self.close_block()
            start = 0
        self._open_kind = kind
        entries[digest] = (self._closed, start + _RECORD_HEAD_BYTES, length)
        parts = self._open
        parts.append(_record_head(length))
        parts.append(data)
        self._open_bytes = start + record

    def close_block(self, *, last: bool = False) -> None:
        """Close the open block (the next blob starts another) and hand it to the writer's
        threads to compress: zstd releases the GIL, so blocks compress on the other cores
        while the caller reads and hashes the next files. Blocks reach the pack in the order
        they closed, whichever thread finishes first. A block under ``INLINE_BLOCK_BYTES``,
        and the ``last`` block of a pack that needed no thread so far, is compressed here:
        starting or waking a thread for it costs more than compressing it."""
        if not self._open:
            return
        parts, raw_length = self._open, self._open_bytes
        self._open, self._open_bytes = [], 0
        self._closed += 1
        small = raw_length < INLINE_BLOCK_BYTES
        if self.inline or small or (last and self._pool is None and not self._compressing):
            done: Future[tuple[int, bytes]] = Future()
            done.set_result(compress(b"".join(parts), self.level))
            self._compressing.append((self._open_kind, raw_length, done))
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(
                max_workers=COMPRESSING_THREADS, thread_name_prefix="snapstore-pack"
            )
        future = self._pool.submit(join_and_compress, parts, self.level)
        self._compressing.append((self._open_kind, raw_length, future))
        while len(self._compressing) > COMPRESSING_BLOCKS:
            self._write_next()

    def _write_next(self) -> None:
        """Append the oldest closed block to the pack, once compressed."""
        kind, raw_length, future = self._compressing.popleft()
        codec, stored = future.result()
        self._emit(BLOCK_HEAD.pack(codec, kind, len(stored), raw_length), stored)
        offset = self.size + BLOCK_HEAD.size
        self.blocks.append(Block(offset, len(stored), raw_length, codec, kind))
        self.size = offset + len(stored)

    def _stop(self) -> None:
        """End the writer's threads, dropping blocks not yet written."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        self._compressing.clear()

    def publish(self) -> PackIndex:
        """Publish the pack with its name flushed, then write its index; returns the index.
        On failure nothing of the pack is published except, possibly, the pack alone (an
        unindexed pack is garbage for gc)."""
        try:
            self.close_block(last=True)
            while self._compressing:
                self._write_next()
        except BaseException:
            self.abort()
            raise
        finally:
            self._stop()
        if self._staged is None:
            assert self._segments is not None
            index, self.appended = self._segments.append(self._held, self.blocks, self.entries)
            self._held = []
            return index
        self._staged.commit(self.pack_id, name_durable=True)
        index = PackIndex(self.pack_id, self.size, dict(self.entries), tuple(self.blocks))
        handle = Handle(Kind.INDEX, self.pack_id)
        self.backend.write(handle, encode_index(self.blocks, self.entries, self.size))
        _DECODED.remember(self.backend, handle, index)
        return index

    def abort(self) -> None:
        """Drop the unpublished pack."""
        self._stop()
        self._held = []
        if self._staged is not None:
            self._staged.abort()


def copy_as_pack(source: Backend, index: PackIndex, destination: Backend, pack_id: str) -> int:
    """Copy the blocks of pack ``index`` (an appendable pack: its segments) of ``source``
    into a new pack ``pack_id`` of ``destination`` with an index file of its own, each block
    as it is (its head checked against the index); the bytes of the new pack."""
    staged = destination.stage(Kind.PACK)
    blocks: list[Block] = []
    size = len(PACK_MAGIC)
    handle = Handle(Kind.PACK, index.pack_id)
    try:
        staged.write(PACK_MAGIC)
        for block in index.blocks:
            data = source.read_range(
                handle, block.offset - BLOCK_HEAD.size, BLOCK_HEAD.size + block.stored
            )
            if len(data) != BLOCK_HEAD.size + block.stored or BLOCK_HEAD.unpack_from(data) != (
                block.codec,
                block.kind,
                block.stored,
                block.raw,
            ):
                raise CorruptPackError(f"pack {index.pack_id}: a block does not match its index")
            staged.write(data)
            blocks.append(block._replace(offset=size + BLOCK_HEAD.size))
            size += len(data)
        staged.commit(pack_id, name_durable=True)
    except BaseException:
        staged.abort()
        raise
    destination.write(Handle(Kind.INDEX, pack_id), encode_index(blocks, dict(index.entries), size))
    return size
