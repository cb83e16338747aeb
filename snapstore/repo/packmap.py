"""Which pack holds each digest, as one process sees the packs: a dict for the digests of
small packs, and the large packs themselves, each asked through its own index.

Putting every digest of a pack gc wrote (every live blob of the store: hundreds of thousands)
into a dict costs a new process a pass over all of them, and the index whole decoded, to
look up a handful; a large pack's index is instead looked up where it lies
(``format.indextable``), so a large pack joins or leaves the map at no cost per digest.

A lookup tries the dict first, then the large packs, largest first. Of two packs holding a
digest it finds a small one before a large one, and of two small ones the one mapped last
(``PackSet`` maps them smallest first after a listing, so the larger wins there, as a fold's
merged pack or a pack gc rewrote should win over the one about to go); every pack dropped
from the view takes only its own digests with it. The copy found is the one a writer judges:
a copy in a segment of an appendable pack not known flushed makes a create store the blob
again even where a large pack holds it too (a duplicate, never a loss). A digest no small
pack holds costs one bisection per large pack (about a microsecond each): the price of not
mapping their digests one by one.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, MutableMapping

from snapstore.format.indextable import LAZY_ENTRIES, Entry, EntryTable
from snapstore.format.packfile import PackIndex

LARGE_PACK_ENTRIES = LAZY_ENTRIES
"""A pack with an index file of its own of at least this many blobs is looked up in its
index instead of through the dict (where its index is not decoded whole either)."""


def is_large(index: PackIndex) -> bool:
    """Whether the map asks ``index`` itself rather than mapping its digests one by one (an
    appendable pack, whose index grows segment by segment, is always mapped by digest)."""
    if isinstance(index.entries, EntryTable):
        return True  # never iterated per digest, whatever the bounds
    return not index.segments and len(index.entries) >= LARGE_PACK_ENTRIES


class PackMap(MutableMapping[bytes, PackIndex]):
    """digest -> the index of a pack holding it (see the module docstring). Threads may
    look up while one thread changes it: the large packs are replaced, never changed in
    place, and the dict changes one key at a time. Setting or deleting a digest acts on
    the dict of small packs."""

    def __init__(self) -> None:
        self._small: dict[bytes, PackIndex] = {}
        self._large: tuple[PackIndex, ...] = ()

    @property
    def mapped(self) -> int:
        """How many digests are mapped one by one (those of small packs)."""
        return len(self._small)

    @property
    def large(self) -> tuple[PackIndex, ...]:
        """The large packs, asked through their indexes, largest first."""
        return self._large

    def add(self, index: PackIndex, digests: Iterable[bytes] | None = None) -> None:
        """Map ``digests`` (by default, all of the pack's) to ``index``; a large pack is
        added (or replaces its earlier index) as a whole."""
        if digests is None and is_large(index):
            kept = [held for held in self._large if held.pack_id != index.pack_id]
            self._large = tuple(sorted([*kept, index], key=lambda i: i.pack_size, reverse=True))
            return
        self._small.update(dict.fromkeys(index.entries if digests is None else digests, index))

    def remove(self, gone: list[PackIndex]) -> bool:
        """Take the digests of packs gone from the view out of the map, by pack id (the map
        names an appendable pack's earlier segments by the index object of that time); True
        if a digest mapped to one of them may also be held by a pack still in the view (which
        only a new map, built from every pack, finds again)."""
        ids = {index.pack_id for index in gone}
        if any(index.pack_id in ids for index in self._large):
            self._large = tuple(index for index in self._large if index.pack_id not in ids)
        partial = False
        small = self._small
        for index in gone:
            if is_large(index):
                continue
            for digest in index.entries:
                held = small.get(digest)
                if held is not None and held.pack_id in ids:
                    del small[digest]
                    partial = True
        return partial

    def find(self, digest: bytes) -> tuple[PackIndex, Entry] | None:
        """The index of a pack holding ``digest``, with its entry there."""
        index = self._small.get(digest)
        if index is not None:
            entry = index.entries.get(digest)
            if entry is not None:
                return index, entry
        for index in self._large:
            entry = index.entries.get(digest)
            if entry is not None:
                return index, entry
        return None

    def get(self, digest: bytes, default: PackIndex | None = None) -> PackIndex | None:  # type: ignore[override]
        index = self._small.get(digest)
        if index is not None:
            return index
        for index in self._large:
            if digest in index.entries:
                return index
        return default

    def __getitem__(self, digest: bytes) -> PackIndex:
        index = self.get(digest)
        if index is None:
            raise KeyError(digest)
        return index

    def __contains__(self, digest: object) -> bool:
        return isinstance(digest, bytes) and self.get(digest) is not None

    def __setitem__(self, digest: bytes, index: PackIndex) -> None:
        self._small[digest] = index

    def __delitem__(self, digest: bytes) -> None:
        del self._small[digest]

    def __iter__(self) -> Iterator[bytes]:
        """Every digest once (the digests of large packs: their indexes read whole)."""
        small, large = self._small, self._large
        yield from list(small)
        for position, index in enumerate(large):
            earlier = large[:position]
            for digest in index.entries:
                if digest not in small and not any(digest in e.entries for e in earlier):
                    yield digest

    def __len__(self) -> int:
        return sum(1 for _ in self)
