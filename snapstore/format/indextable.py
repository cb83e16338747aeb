"""The entry table of a pack index: decoded whole for a small index, looked up where it lies
in the index's bytes for a large one.

An index lists its blobs sorted by digest, 44 bytes each (``INDEX_ENTRY``). Decoding every
entry of a large index into a dict costs about two microseconds an entry (0.4 s of CPU for
the 200,000 blobs of one pack gc wrote), which a process that needs a handful of them pays
in full; ``EntryTable`` instead keeps the index's bytes and finds a digest by bisection,
through a column of the first four bytes of every digest (an array of integers, built from
the table in C at the first lookup) and, where several entries share those bytes, the
digests themselves.

What is checked when (the rules: docs/format.md, "Index file"):

- when the index is read (``packfile.decode_index``): its size against its counts, its magic,
  its checksum over every byte, and its block table; so the bytes are those its writer wrote;
- when a lookup finds an entry: that entry's rules (its block is one the pack lists, the blob
  lies within the block's raw bytes); an entry that breaks them counts as absent;
- when the table is read whole (iteration, ``items``, ``values``: gc, verify, stats, a fold,
  which read every entry anyway): every rule, the strict order of the digests included,
  decoding every entry once (then kept): ``CorruptPackError`` if one breaks them. A full
  refresh of the packs (gc and verify) reads every large table whole first, so a pack whose
  entries break the rules is broken for them exactly as a corrupt index is.
"""

from __future__ import annotations

import operator
import struct
import sys
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import ItemsView, Iterator, KeysView, Mapping, Sequence, ValuesView

from snapstore.errors import CorruptPackError

INDEX_ENTRY = struct.Struct("<32sIII")
"""digest, block number, offset of the blob's bytes in the block's raw bytes, size."""
DIGEST_BYTES = 32
BLOB_FLOOR = 4
"""No blob's bytes start before this offset of its block's raw bytes (its size comes first,
``packfile.RECORD_HEAD``)."""
LAZY_ENTRIES = 1024
"""An index of at least this many entries is looked up in its bytes (``EntryTable``); a
smaller one is decoded whole (about 2 ms at this size)."""
PREFIX_BYTES = 4
_PREFIX_TYPE = next(code for code in "IL" if array(code).itemsize == PREFIX_BYTES)

Entry = tuple[int, int, int]
"""block number, offset of the blob's bytes in the block's raw bytes, size."""


def corrupt_index(pack_id: str, why: str) -> CorruptPackError:
    """The error of a pack index that breaks the rules."""
    return CorruptPackError(f"pack index {pack_id} is corrupt: {why}")


def checked_entries(
    pack_id: str, table: bytes | memoryview, raws: Sequence[int]
) -> dict[bytes, Entry]:
    """Every entry of an entry table, checked against the rules (sorted digests, known
    blocks, blobs within their block's ``raws`` bytes); CorruptPackError naming the pack."""
    if not table:
        return {}
    # Checked column by column (C-level passes): an index may list tens of thousands of blobs.
    digests, numbers, offsets, sizes = zip(*INDEX_ENTRY.iter_unpack(table), strict=True)
    if not all(map(operator.lt, digests, digests[1:])):
        raise corrupt_index(pack_id, "entries are not sorted by digest")
    if max(numbers) >= len(raws):
        raise corrupt_index(pack_id, "an entry names a block the pack does not have")
    block_raws = [raws[number] for number in numbers]
    ends = list(map(operator.add, offsets, sizes))
    if min(offsets) < BLOB_FLOOR or any(map(operator.gt, ends, block_raws)):
        raise corrupt_index(pack_id, "a blob lies outside its block")
    return dict(zip(digests, zip(numbers, offsets, sizes, strict=True), strict=True))


def prefix_column(data: bytes, start: int, count: int) -> array[int]:
    """The first ``PREFIX_BYTES`` of each of the ``count`` digests of the table at ``start``
    of ``data``, as big-endian integers (so they sort as the digests do): strided slices
    interleaved in C, no object per entry."""
    end = start + count * INDEX_ENTRY.size
    joined = bytearray(PREFIX_BYTES * count)
    for byte in range(PREFIX_BYTES):
        joined[byte::PREFIX_BYTES] = data[start + byte : end : INDEX_ENTRY.size]
    column = array(_PREFIX_TYPE)
    column.frombytes(joined)
    if sys.byteorder == "little":
        column.byteswap()
    return column


class _Digests(Sequence[bytes]):
    """The digests of an entry table as a sequence (what ``bisect`` needs), each sliced out
    of the bytes when asked for."""

    def __init__(self, data: bytes, start: int, count: int) -> None:
        self._data = data
        self._start = start
        self._count = count

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, position: int) -> bytes:  # type: ignore[override]
        at = self._start + position * INDEX_ENTRY.size
        return self._data[at : at + DIGEST_BYTES]


class EntryTable(Mapping[bytes, Entry]):
    """The entries of a large index (see the module docstring), read from its bytes: ``data``
    holds ``count`` entries from ``start``; ``raws`` is the raw length of each block the
    index lists (its block table, already checked)."""

    def __init__(
        self, pack_id: str, data: bytes, start: int, count: int, raws: tuple[int, ...]
    ) -> None:
        self.pack_id = pack_id
        self._data = data
        self._start = start
        self._count = count
        self._raws = raws
        self._prefixes: array[int] | None = None
        self._whole: dict[bytes, Entry] | None = None
        self._problem: CorruptPackError | None = None

    @property
    def problem(self) -> CorruptPackError | None:
        """Why the table could not be read whole, once that was tried and failed."""
        return self._problem

    @property
    def decoded(self) -> bool:
        """Whether the table was read whole (every entry decoded and checked)."""
        return self._whole is not None

    def whole(self) -> dict[bytes, Entry]:
        """Every entry, checked against every rule (decoded once, then kept);
        CorruptPackError if one breaks them."""
        whole = self._whole
        if whole is not None:
            return whole
        if self._problem is not None:
            raise self._problem
        end = self._start + self._count * INDEX_ENTRY.size
        try:
            whole = checked_entries(
                self.pack_id, memoryview(self._data)[self._start : end], self._raws
            )
        except CorruptPackError as error:
            self._problem = error
            raise
        self._whole = whole
        self._data, self._prefixes = b"", None  # lookups use the dict from now on
        return whole

    def get(self, digest: bytes, default: Entry | None = None) -> Entry | None:  # type: ignore[override]
        """The entry of ``digest`` (one that breaks the rules counts as absent)."""
        whole = self._whole
        if whole is not None:
            return whole.get(digest, default)
        at = self._find(digest)
        if at is None:
            return default
        number, offset, size = INDEX_ENTRY.unpack_from(self._data, at)[1:]
        if number >= len(self._raws) or offset < BLOB_FLOOR or offset + size > self._raws[number]:
            return default
        return number, offset, size

    def _find(self, digest: bytes) -> int | None:
        """Where the entry of ``digest`` starts in the bytes, if the table lists it."""
        prefixes = self._prefixes
        if prefixes is None:
            prefixes = self._prefixes = prefix_column(self._data, self._start, self._count)
        key = int.from_bytes(digest[:PREFIX_BYTES], "big")
        low = bisect_left(prefixes, key)
        if low == self._count or prefixes[low] != key:
            return None
        if low + 1 < self._count and prefixes[low + 1] == key:  # digests sharing a prefix
            high = bisect_right(prefixes, key, low)
            low = bisect_left(_Digests(self._data, self._start, self._count), digest, low, high)
            if low == high:
                return None
        at = self._start + low * INDEX_ENTRY.size
        return at if self._data[at : at + DIGEST_BYTES] == digest else None

    def __getitem__(self, digest: bytes) -> Entry:
        entry = self.get(digest)
        if entry is None:
            raise KeyError(digest)
        return entry

    def __contains__(self, digest: object) -> bool:
        return isinstance(digest, bytes) and self.get(digest) is not None

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.whole())

    def keys(self) -> KeysView[bytes]:
        return self.whole().keys()

    def items(self) -> ItemsView[bytes, Entry]:
        return self.whole().items()

    def values(self) -> ValuesView[Entry]:
        return self.whole().values()
