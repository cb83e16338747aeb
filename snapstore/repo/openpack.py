"""The appendable pack a process writes the blobs of its small creates to, one segment each.

The first small create of a process writes an appendable pack (``format.segments``) holding
one segment: staged, flushed, renamed into ``packs/``, ``packs/`` flushed, as any pack, but
with its index inside. The process keeps the file open, and every later small create
appends one segment (its blocks, index and trailer, in one write) and flushes the file
once: its data and its index are durable together, with no new name and no directory to
flush. A pack log line (the pack's id and where the segment ends) tells other processes.

A segment is appended only while the file is still the pack in place (gc or a fold may
have deleted it while the process was idle), by the process that opened it (a forked child
starts its own), below ``SEGMENTS_PER_PACK`` segments and ``APPENDABLE_PACK_BYTES`` bytes;
otherwise the next create starts a new pack. After a write or flush that failed, the pack is
cut back to its last whole segment (as far as that works) and abandoned: nothing is ever
appended after bytes that may be torn. Appends are serialized
by a lock (creates of several threads of one process).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Sequence

from snapstore.backend.seam import AppendableObject, Backend, Kind
from snapstore.format.packfile import PACK_MAGIC, SEGMENTED_MAGIC, Block, PackIndex, new_pack_id
from snapstore.format.segments import FIRST_SEGMENT, Segment, encode_tail
from snapstore.repo.packset import PackSet

SEGMENTS_PER_PACK = 256
"""Segments a pack takes before its writer starts another (a reader that lists the packs
reads a pack's segments one by one: this bounds how many)."""
APPENDABLE_PACK_BYTES = 16 << 20
"""Bytes past which a writer starts another pack."""


class OpenPack:
    """The appendable pack of one store's writers in this process (see the module
    docstring); ``available`` only where the backend appends."""

    def __init__(self, backend: Backend, packs: PackSet) -> None:
        self.backend = backend
        self.packs = packs
        self.available = backend.properties.appends
        self._lock = threading.Lock()
        self._lock_pid = os.getpid()
        self._file: AppendableObject | None = None
        self._pack_id = ""
        self._segments = 0
        self._pid = 0

    def _held(self) -> threading.Lock:
        """The lock appends take; a forked child takes a new one (the parent's may have
        been held by another thread at the fork, and would never be let go in the child),
        and forgets the parent's pack."""
        if self._lock_pid != os.getpid():
            self._lock = threading.Lock()
            self._lock_pid = os.getpid()
            self._file = None
        return self._lock

    def _usable(self) -> bool:
        """Whether the next segment may go into the open pack."""
        return (
            self._file is not None
            and self._pid == os.getpid()
            and self._segments < SEGMENTS_PER_PACK
            and self._file.size < APPENDABLE_PACK_BYTES
            and self._file.current()
        )

    def append(
        self,
        body: Sequence[bytes | memoryview],
        blocks: list[Block],
        entries: dict[bytes, tuple[int, int, int]],
    ) -> tuple[PackIndex, int]:
        """Append one segment: the blocks ``body`` holds, laid out as ``blocks`` say for a
        pack whose blocks start right after its magic, and ``entries``; durable when this
        returns. Returns the pack's index now and the bytes the segment added to the store
        (with the magic, for a new pack)."""
        with self._held():
            if self._usable():
                assert self._file is not None
                return self._append(
                    self._file, self._pack_id, self._file.size, body, blocks, entries
                )
            self._close()
            pack_id = new_pack_id()
            staged = self.backend.stage_appendable(Kind.PACK)
            if staged is None:
                raise OSError("this store cannot append to packs")
            index, size = self._append(staged, pack_id, FIRST_SEGMENT, body, blocks, entries)
            self._file, self._pack_id, self._segments, self._pid = staged, pack_id, 1, os.getpid()
            return index, size

    def _append(
        self,
        file: AppendableObject,
        pack_id: str,
        start: int,
        body: Sequence[bytes | memoryview],
        blocks: list[Block],
        entries: dict[bytes, tuple[int, int, int]],
    ) -> tuple[PackIndex, int]:
        shift = start - len(PACK_MAGIC)
        placed = [block._replace(offset=block.offset + shift) for block in blocks]
        index_start = start + sum(len(part) for part in body)
        tail = encode_tail(placed, entries, start, index_start)
        data = b"".join([*body, tail])
        fresh = start == FIRST_SEGMENT
        try:
            if fresh:
                file.write(SEGMENTED_MAGIC + data)
                file.commit(pack_id, name_durable=True)
            else:
                file.append(data)
                file.sync()
        except BaseException:
            if not fresh:
                with contextlib.suppress(OSError):
                    file.truncate(start)  # best effort: readers skip it anyway (no log line)
                self._file = None
            file.abort()
            raise
        self._segments += 0 if fresh else 1
        own = PackIndex(pack_id, index_start, dict(entries), tuple(placed))
        segment = Segment(start, index_start + len(tail), own)
        return self.packs.add_segment(pack_id, segment), len(data) + (
            len(SEGMENTED_MAGIC) if fresh else 0
        )

    def close(self) -> None:
        """Stop appending to the open pack, if any (the next small create starts another)."""
        with self._held():
            self._close()

    def _close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
