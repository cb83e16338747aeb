"""What a view of the packs (``PackSet``) answers about digests and packs: complete by
default, with one opt-in named for what it is.

A refresh notes the segments other processes appended as pending (``PackSet.refresh``); they
are loaded (read, checksums checked, decoded, mapped) only when something needs them. Every
question the view answers is complete by default: it loads what is pending first
(``by_digest``, ``indexes``, ``iter_digests``, ``broken``, ``damage``) or before it reports a
miss (``locate``, ``packed_size``, ``holds``), so nothing reports a blob missing, and no gc,
fold or verify judges a pack, on a view that lacks what the pack log announced. The one
exception is named for what it is: ``by_digest_possibly_stale``, a create's dedupe, where a
miss only stores the blob again in the create's own pack (a duplicate, never a loss); a hit
there is still loaded, checked data, counted on only if known flushed (``PackSet.flushed``).
Bridges on one root, each checkpointing its own session, never need each other's segments: a
create no longer loads them. What is pending is loaded anyway at the next refresh past
``packset.PENDING_SEGMENTS`` segments or ``PENDING_BYTES`` bytes (bounding what a create may
store again), and a pack deleted meanwhile (a fold's merged pack replacing it) never is.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Iterator

from snapstore.format.indextable import Entry
from snapstore.format.packfile import PackIndex
from snapstore.format.segments import FIRST_SEGMENT
from snapstore.repo.packmap import PackMap
from snapstore.repo.packreads import Location


class PackLookups:
    """The questions a ``PackSet`` answers from what it loaded (see the module docstring)."""

    _lock: threading.Lock
    _where: PackMap
    _indexes: dict[str, PackIndex]
    _broken: dict[str, str]
    _damaged: dict[bytes, str]
    _pending: dict[str, int]
    _pending_lines: dict[str, int]
    _loaded: bool

    def refresh(self, *, full: bool = False) -> None:
        raise NotImplementedError

    def after_fork_in_child(self) -> None:
        """Make a forked child's view trust nothing a parent's thread was doing at the fork:
        a thread may have held the lock (never to let go in the child) or been half-way
        through a listing (packs loaded, the map of digests not rebuilt), so the child gets
        a new lock and lists again at its first question."""
        self._lock = threading.Lock()
        self._loaded = False

    def _load_pending(self) -> None:
        raise NotImplementedError

    @property
    def pending_segments(self) -> int:
        """How many segments other processes appended are pending in this view."""
        return sum(self._pending_lines.values())

    def _pending_bytes(self) -> int:
        """The bytes of the pending segments."""
        total = 0
        for pack_id, end in self._pending.items():
            held = self._indexes.get(pack_id)
            total += end - (held.pack_size if held is not None else FIRST_SEGMENT)
        return total

    def _complete(self) -> None:
        """Make the view hold everything the pack log announced: load what is pending."""
        self._ensure_loaded()
        if self._pending:
            with self._lock:
                self._load_pending()

    def _ensure_loaded(self) -> None:
        if not self._loaded:
            self.refresh()

    def _find(self, digest: bytes) -> tuple[PackIndex, Entry] | None:
        """A pack holding ``digest`` with its entry, looking at what is pending before a
        miss (a hit needs nothing more: it is loaded, checked data). After a miss the map is
        asked again even if nothing is pending now: another thread may have loaded it since
        the first look (a pack leaves ``_pending`` only once it is mapped)."""
        self._ensure_loaded()
        found = self._where.find(digest)
        if found is None:
            self._complete()
            found = self._where.find(digest)
        return found

    def locate(self, digest: bytes) -> Location | None:
        """Where a digest's bytes lie, if some pack holds it."""
        found = self._find(digest)
        if found is None:
            return None
        index, (number, offset, size) = found
        return Location(index.pack_id, number, index.blocks[number], offset, size)

    def holds(self, digest: bytes) -> bool:
        """Whether some pack holds the digest (complete: see the module docstring; asked
        for every blob a commit counts on, so kept to one lookup where it hits)."""
        if not self._loaded:
            self.refresh()
        if digest in self._where:
            return True
        self._complete()  # then ask again, as ``_find`` does
        return digest in self._where

    def damage(self, digest: bytes) -> str | None:
        """Why the blob cannot be read from the pack that was meant to hold it, if its pack
        is damaged (its index intact, the pack file not the size it records)."""
        self._complete()
        return self._damaged.get(digest)

    def by_digest(self) -> PackMap:
        """The index holding each packed digest (the current view, with what was pending
        loaded, kept up to date by this view's refreshes until a listing builds a new map;
        read only). A holder that asks again after a refresh sees what it announced."""
        self._complete()
        return self._where

    def by_digest_possibly_stale(self) -> PackMap:
        """``by_digest`` without loading what is pending: it may lack blobs other processes
        stored since this view last loaded, so a miss there does not mean missing. Only for
        a writer's dedupe (``BlobBatch.claim``), where a miss stores the blob again in the
        writer's own pack; every other reader asks ``by_digest`` or a lookup, which are
        complete. A hit is loaded, checked data, to be counted on only if known flushed
        (``flushed``, ``settled``), as with ``by_digest``."""
        self._ensure_loaded()
        return self._where

    def packed_size(self, digest: bytes) -> int | None:
        """The size of a packed blob, or None if no pack holds it (cheaper than locate)."""
        found = self._find(digest)
        return None if found is None else found[1][2]

    def indexes(self) -> list[PackIndex]:
        """Every readable pack's index (with what was pending loaded)."""
        self._complete()
        with self._lock:
            return list(self._indexes.values())

    def pack_sizes(self) -> dict[str, int]:
        """The size of every pack of the view by id, an appendable pack's up to where the
        pack log last said it ends (complete without loading what is pending)."""
        self._ensure_loaded()
        with self._lock:
            sizes = {pack_id: index.pack_size for pack_id, index in self._indexes.items()}
            for pack_id, end in self._pending.items():
                sizes[pack_id] = max(sizes.get(pack_id, 0), end)
        return sizes

    def broken(self) -> dict[str, str]:
        """Packs whose index cannot be used, and why (their blobs count as missing)."""
        self._complete()
        return dict(self._broken)

    def iter_digests(self) -> Iterator[bytes]:
        """Every digest held by some pack (one pass: ``list`` of the map would ask its
        length first, a pass of its own)."""
        self._complete()
        yield from list(iter(self._where))


_VIEWS: weakref.WeakSet[PackLookups] = weakref.WeakSet()


def renewed_in_children(view: PackLookups) -> None:
    """Start ``view`` afresh in every child forked from now on (``after_fork_in_child``)."""
    _VIEWS.add(view)


def _renew_views_in_child() -> None:
    for view in list(_VIEWS):
        view.after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_renew_views_in_child)
