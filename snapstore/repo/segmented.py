"""Reading appendable packs through the backend: which packs are appendable, their segments
up to a known end or to the last whole one, and whether one grew since it was read.

An appendable pack has no index file: its segments carry their own (``format.segments``).
A reader loads the segments after those it knows, up to the end a pack log line gives (a
whole segment's end, which its writer flushed before writing the line) or, when it lists
the packs, to the file's size, walking back by trailers; a file that does not end with a
whole segment ends in a torn tail (an append killed half-way), found by walking forwards
and never read. A segment that does not check elsewhere makes the pack damaged, as a
corrupt index does.
"""

from __future__ import annotations

from snapstore.backend.seam import Backend, Handle, Kind
from snapstore.errors import CorruptPackError
from snapstore.format.packfile import SEGMENTED_MAGIC, PackIndex
from snapstore.format.segments import (
    FIRST_SEGMENT,
    Reader,
    Segment,
    merge,
    read_back,
    read_segment,
    whole_end,
)

WINDOW_BYTES = 64 << 10
"""How much of the end of the segments a log line announces is read in one go."""


def _reader(backend: Backend, pack_id: str) -> Reader:
    handle = Handle(Kind.PACK, pack_id)
    return lambda offset, length: backend.read_range(handle, offset, length)


def _window(read: Reader, start: int, end: int) -> Reader:
    """``read``, with the last ``WINDOW_BYTES`` of the bytes from ``start`` to ``end``
    (whole segments: they never change) read once, up front, and served from memory: the
    trailers and indexes of the segments another process appended since lie at their ends,
    so loading a few small ones costs one read, not two per segment, and a large one's
    blocks are not read. A read not wholly within the window reads the file."""
    start = max(start, end - WINDOW_BYTES)
    data = read(start, end - start)
    stop = start + len(data)

    def windowed(offset: int, length: int) -> bytes:
        if start <= offset and offset + length <= stop:
            return data[offset - start : offset - start + length]
        return read(offset, length)

    return windowed


def is_appendable(backend: Backend, pack_id: str) -> bool:
    """Whether the pack file ``pack_id`` is an appendable pack (by its magic); False if it is
    gone or holds anything else."""
    try:
        head = backend.read_range(Handle(Kind.PACK, pack_id), 0, len(SEGMENTED_MAGIC))
    except (FileNotFoundError, NotADirectoryError):
        return False
    return head == SEGMENTED_MAGIC


def load(
    backend: Backend, pack_id: str, previous: PackIndex | None, end: int | None = None
) -> tuple[PackIndex, list[bytes], int]:
    """The index of an appendable pack read up to ``end`` (a whole segment's end) or, with
    None, to its last whole segment, reading only the segments after ``previous`` (what
    this process read of it before); every digest they hold; and where the first segment
    ends (0 with ``previous``): its writer flushed it before the pack got its name, whereas
    the later ones may have been read before their writer flushed them. FileNotFoundError
    if the pack is gone, CorruptPackError if it is no appendable pack or a segment is
    damaged."""
    read = _reader(backend, pack_id)
    if previous is None and read(0, FIRST_SEGMENT) != SEGMENTED_MAGIC:
        raise CorruptPackError(f"pack {pack_id} is not an appendable pack")
    stop = previous.pack_size if previous is not None else FIRST_SEGMENT
    if end is None:
        segments = _to_last_whole(
            pack_id, read, stop, backend.stat(Handle(Kind.PACK, pack_id)).size
        )
    else:
        segments = read_back(pack_id, _window(read, stop, end), end, stop) if end > stop else []
    first = segments[0].end if previous is None and segments else 0
    if previous is not None and not segments:
        return previous, [], first
    index, added = merge(pack_id, previous, segments)
    return index, added, first


def _to_last_whole(pack_id: str, read: Reader, stop: int, size: int) -> list[Segment]:
    """The segments from ``stop`` to the last whole one of a file of ``size`` bytes: a
    file that does not end with a whole segment ends in a torn tail, left unread; one that
    does, but whose segments do not lead back to ``stop``, is damaged, and so is one whose
    first segment is not whole (it was flushed before the pack got its name)."""
    if size <= stop:
        return []
    try:
        return read_back(pack_id, read, size, stop)
    except CorruptPackError:
        end = whole_end(read, stop, size)
    if end == FIRST_SEGMENT:
        raise CorruptPackError(f"pack {pack_id} is damaged: its first segment does not read")
    try:
        read_segment(pack_id, read, size, end)
    except CorruptPackError:
        return read_back(pack_id, read, end, stop) if end > stop else []
    raise CorruptPackError(
        f"pack {pack_id} is damaged: its segments after offset {end} do not read"
    )


def grown(backend: Backend, index: PackIndex) -> bool:
    """Whether whole segments were appended to the appendable pack of ``index`` since it
    was read (gc and folding never delete such a pack: its new blobs are in no other)."""
    try:
        size = backend.stat(Handle(Kind.PACK, index.pack_id)).size
    except FileNotFoundError:
        return False
    if size <= index.pack_size:
        return False
    return whole_end(_reader(backend, index.pack_id), index.pack_size, size) > index.pack_size
