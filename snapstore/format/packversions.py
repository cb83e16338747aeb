"""Successive indexes of one appendable pack, sharing one append-only table.

A process reads an appendable pack (``format.segments``) segment by segment, and each
segment read gives a new ``PackIndex`` of the pack while the earlier ones stay in use (the
map of digests to packs names the index of the time each digest was read; gc and a fold
judge a pack by the index they read). Copying the index so far for each segment made every
segment cost the pack's size; instead every index of the pack is a *version* of one
``PackTable``, whose entries and blocks are only ever appended:

- a version is the table's first ``blocks`` blocks and first ``entries`` entries at the time
  it was made; an entry belongs to it if and only if its block number is below its block
  count (entries of a later segment always name later blocks), so a version never shows what
  was appended after it, whoever holds it and whatever was appended since;
- a digest stored twice keeps its first place: the table never changes an entry it holds;
- the table's entries keep the order they were added in, so iterating a version walks that
  list up to its count (a list iterator, unlike a dict's, tolerates appends beside it);
- appends are made under the table's lock and only to the newest version (the table's
  tip); a version that is no longer the tip gets a table of its own first (a copy: no
  writer does that, but the result stays right if one does).

Lookups (``get``, ``in``) are one dict lookup and one comparison, as for a dict; ``len`` is
kept per version.
"""

from __future__ import annotations

import threading
from collections.abc import ItemsView, Iterable, Iterator, Mapping, Sequence, ValuesView
from itertools import islice
from typing import overload

from snapstore.format.indextable import Entry
from snapstore.format.packfile import Block


class PackTable:
    """The entries and blocks of one appendable pack as read so far (append-only)."""

    __slots__ = ("_blocks", "_entries", "_lock", "_order")

    def __init__(self) -> None:
        self._entries: dict[bytes, Entry] = {}
        self._order: list[bytes] = []
        self._blocks: list[Block] = []
        self._lock = threading.Lock()

    @classmethod
    def of(cls, entries: Mapping[bytes, Entry], blocks: Sequence[Block]) -> VersionEntries:
        """A new table holding ``entries`` and ``blocks`` (each entry's block among them),
        as its tip: the one copy, for an index that is not the tip of a table."""
        table = cls()
        table._entries = dict(entries)
        table._order = list(table._entries)
        table._blocks = list(blocks)
        return VersionEntries(table, len(table._blocks), len(table._order))

    def extend(
        self, after: VersionEntries | None, segments: Iterable[Segment]
    ) -> VersionEntries | None:
        """Append the blocks and entries of ``segments`` (pairs of blocks and entries, block
        numbers counted from each one's first block) after the version ``after`` (None: an
        empty table): the version holding them, or None if ``after`` is no longer this
        table's tip (then nothing changed)."""
        with self._lock:
            blocks, entries, order = self._blocks, self._entries, self._order
            if (len(blocks), len(order)) != (
                (after.block_count, len(after)) if after is not None else (0, 0)
            ):
                return None
            for segment_blocks, segment_entries in segments:
                base = len(blocks)
                for digest, (number, offset, size) in segment_entries.items():
                    if digest not in entries:
                        entries[digest] = (number + base, offset, size)
                        order.append(digest)
                blocks.extend(segment_blocks)
            return VersionEntries(self, len(blocks), len(order))


Segment = tuple[Sequence[Block], Mapping[bytes, Entry]]
"""The blocks of one segment and its entries (block numbers counted from its first block)."""


class VersionEntries(Mapping[bytes, Entry]):
    """digest -> (block number, offset, size): the entries of one version of a pack's
    table, its first ``block_count`` blocks and the entries that name them."""

    __slots__ = ("_entries", "_length", "_order", "block_count", "table")

    def __init__(self, table: PackTable, block_count: int, length: int) -> None:
        self.table = table
        self.block_count = block_count
        self._length = length
        self._entries = table._entries
        self._order = table._order

    def blocks(self) -> VersionBlocks:
        """The blocks of this version."""
        return VersionBlocks(self.table._blocks, self.block_count)

    def get(self, digest: bytes, default: Entry | None = None) -> Entry | None:  # type: ignore[override]
        entry = self._entries.get(digest)
        if entry is None or entry[0] >= self.block_count:
            return default
        return entry

    def __getitem__(self, digest: bytes) -> Entry:
        entry = self.get(digest)
        if entry is None:
            raise KeyError(digest)
        return entry

    def __contains__(self, digest: object) -> bool:
        entry = self._entries.get(digest) if isinstance(digest, bytes) else None
        return entry is not None and entry[0] < self.block_count

    def __len__(self) -> int:
        return self._length

    def __iter__(self) -> Iterator[bytes]:
        return islice(self._order, self._length)

    def items(self) -> ItemsView[bytes, Entry]:
        return _VersionItems(self)

    def values(self) -> ValuesView[Entry]:
        return _VersionValues(self)

    def __repr__(self) -> str:
        return f"VersionEntries({dict(self.items())!r})"


class _VersionItems(ItemsView[bytes, Entry]):
    """A version's entries, walked over its prefix of the digest list (which holds exactly
    its entries: no block check needed)."""

    _mapping: VersionEntries

    def __iter__(self) -> Iterator[tuple[bytes, Entry]]:
        version = self._mapping
        entries = version._entries
        for digest in islice(version._order, version._length):
            yield digest, entries[digest]


class _VersionValues(ValuesView[Entry]):
    """A version's entries' values, walked as ``_VersionItems`` walks them."""

    _mapping: VersionEntries

    def __iter__(self) -> Iterator[Entry]:
        version = self._mapping
        entries = version._entries
        for digest in islice(version._order, version._length):
            yield entries[digest]


class VersionBlocks(Sequence[Block]):
    """The first ``count`` blocks of a pack's table."""

    __slots__ = ("_blocks", "_count")

    def __init__(self, blocks: list[Block], count: int) -> None:
        self._blocks = blocks
        self._count = count

    @overload
    def __getitem__(self, number: int) -> Block: ...

    @overload
    def __getitem__(self, number: slice) -> Sequence[Block]: ...

    def __getitem__(self, number: int | slice) -> Block | Sequence[Block]:
        if isinstance(number, slice):
            return tuple(self)[number]
        if number < 0:
            number += self._count
        if not 0 <= number < self._count:
            raise IndexError("block number out of range")
        return self._blocks[number]

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[Block]:
        return islice(self._blocks, self._count)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (VersionBlocks, tuple, list)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"VersionBlocks({tuple(self)!r})"
