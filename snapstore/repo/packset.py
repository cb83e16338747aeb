"""The packs of a store as this process sees them: which digests each pack holds, and reads.

Indexes (and the segments of appendable packs) are loaded lazily and kept. ``refresh``, right
after taking the gc lock, follows the pack log (``packlog``, a local store) from where it
stopped: it loads the packs published since, notes the segments other processes appended
since as **pending**, and drops the packs deleted (gc logs a deletion before it unlinks the
index or appendable pack, a fold's shared half just after); a new log, or a backend without
one, means listing ``packs/``, which loads everything. A reader that misses a blob lists once
more. ``BlockCache`` keeps the last decompressed blocks. Which pack holds a digest:
``PackMap`` (the digests of small packs one by one, large packs asked through their indexes,
which are looked up in their bytes: ``format.indextable``). Every question the view answers
is complete by default, pending segments loaded first (``packlookups``).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable

from snapstore.backend import packlog
from snapstore.backend.packlog import TOKEN_BYTES, LogPosition, deleted_ids, published
from snapstore.backend.seam import Backend
from snapstore.errors import CorruptPackError
from snapstore.format.packfile import PackIndex, is_pack_id
from snapstore.format.segments import Segment, merge
from snapstore.repo import segmented
from snapstore.repo.blockcache import BlockCache
from snapstore.repo.packlookups import PackLookups, renewed_in_children
from snapstore.repo.packmap import PackMap
from snapstore.repo.packreads import Location as Location
from snapstore.repo.packreads import PackReads, log_end, split_readable
from snapstore.repo.packs import PackSizeError, forget_indexes, read_index

PENDING_SEGMENTS = 1024
"""Segments of other processes a view may leave pending: past them a refresh loads them all
(about 20 µs each)."""
PENDING_BYTES = 4 << 20
"""Bytes of pending segments past which a refresh loads them all: what a create may store
again because its dedupe did not see it."""


class PackSet(PackLookups, PackReads):
    """The packs of one store root."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self._lock = threading.Lock()
        renewed_in_children(self)
        self._indexes: dict[str, PackIndex] = {}
        self._where = PackMap()
        self._broken: dict[str, str] = {}
        self._damaged: dict[bytes, str] = {}
        self._loaded = False
        self._log = backend.pack_log()
        self._position: LogPosition | None = None
        self._listed_since_refresh = False
        self._settled: dict[str, int] = {}
        """Packs whose name (and bytes, up to the offset given) this process knows durable."""
        self._flushed: dict[str, int] = {}
        """Appendable packs whose bytes their writer flushed, up to the offset given."""
        self._where_partial = False
        """``_where`` may lack a digest another pack holds (``_drop``): a listing rebuilds it."""
        self._pending: dict[str, int] = {}
        """Appendable packs with segments the pack log announced and this view did not load
        yet, with the end of the last one (see the module docstring)."""
        self._pending_lines: dict[str, int] = {}
        """How many segments of each pack in ``_pending``."""
        self.follow_log = True
        """Whether a refresh may follow the pack log: False while the store's marker names a
        format before 3, whose writers (an older version) delete packs without starting a
        new log, so only a listing tells which packs are gone."""
        self.cache = BlockCache()
        self.deletion_log_bytes = packlog.RESTART_BYTES
        """How long the pack log may grow by deletions before a new one (``PackLog``)."""

    def after_fork_in_child(self) -> None:
        """As ``PackLookups.after_fork_in_child``; the block cache, whose lock a parent's
        thread may also have held, starts empty."""
        super().after_fork_in_child()
        self.cache = BlockCache(self.cache.budget)

    def refresh(self, *, full: bool = False) -> None:
        """Bring the view up to date (see the module docstring); ``full``: list ``packs/``
        whatever the log says (gc and verify, which judge every pack)."""
        with self._lock:
            self._listed_since_refresh = False
            if self._log is not None and self.follow_log and self._loaded and not full:
                lines, position = self._log.read_lines(self._position)
                if lines is not None:
                    self._position = position
                    gone = set(deleted_ids(lines))
                    self._load_new([e for e in published(lines) if e[0] not in gone])
                    self._drop(gone)
                    if self.pending_segments > PENDING_SEGMENTS or (
                        self._pending_bytes() > PENDING_BYTES
                    ):
                        self._load_pending()
                    return
            self._list_all(whole=full)

    @property
    def has_log(self) -> bool:
        """Whether the backend keeps a pack log (a local store)."""
        return self._log is not None

    def relist_once(self) -> bool:
        """List ``packs/`` again if that was not done since the last refresh (a reader that
        misses a blob); True if it did."""
        with self._lock:
            if self._listed_since_refresh or self._log is None:
                return False
            self._list_all()
            return True

    def _load_new(self, entries: list[tuple[str, int | None]]) -> None:
        """Load the indexes of packs the log names that this view lacks, and note the
        segments appended to appendable packs up to the ends it gives as pending."""
        indexed: dict[str, None] = {}
        for pack_id, end in entries:
            if not is_pack_id(pack_id):
                continue
            if end is not None:
                self._note_pending(pack_id, end)
            elif pack_id not in self._indexes:
                indexed[pack_id] = None
        for pack_id in indexed:
            if pack_id in self._pending:
                continue
            index = self._load(pack_id)
            if index is not None:
                self._indexes[pack_id] = index
                self._where.add(index)

    def _note_pending(self, pack_id: str, end: int) -> None:
        """A log line says the writer of appendable pack ``pack_id`` flushed it up to
        ``end``: known flushed from now on; segments past what this view loaded wait in
        ``_pending`` until something needs them."""
        self._flushed[pack_id] = max(self._flushed.get(pack_id, 0), end)
        held = self._indexes.get(pack_id)
        if held is not None and (not held.segments or end <= held.pack_size):
            return
        if end > self._pending.get(pack_id, 0):
            self._pending[pack_id] = end
            self._pending_lines[pack_id] = self._pending_lines.get(pack_id, 0) + 1

    def _load_pending(self) -> None:
        """Load every pending segment (the lock held)."""
        for pack_id in list(self._pending):
            self._load_segments(pack_id, self._pending[pack_id])
            del self._pending[pack_id]
            self._pending_lines.pop(pack_id, None)

    def _load_segments(self, pack_id: str, end: int | None) -> bool:
        """Read an appendable pack's segments after those this view holds, up to ``end``
        (None: its last whole one); False if it is no appendable pack or is gone. A damaged
        one is noted as broken (its blobs count as missing, gc leaves it alone)."""
        previous = self._indexes.get(pack_id)
        if end is not None:  # a log line or this process's append: flushed that far
            self._flushed[pack_id] = max(self._flushed.get(pack_id, 0), end)
        if previous is not None and (
            not previous.segments or (end is not None and end <= previous.pack_size)
        ):
            return bool(previous.segments)
        try:
            index, added, first = segmented.load(self.backend, pack_id, previous, end)
        except (FileNotFoundError, NotADirectoryError):
            return False
        except (CorruptPackError, OSError) as error:
            if end is not None:
                return previous is not None  # a line past what reads: the next listing judges
            if previous is None and not segmented.is_appendable(self.backend, pack_id):
                return False
            self._broken[pack_id] = str(error)
            self._indexes.pop(pack_id, None)
            self._where.remove([previous] if previous is not None else [])
            self._where_partial = True
            return True
        self._indexes[pack_id] = index
        self._where.add(index, added)
        self._flushed[pack_id] = max(self._flushed.get(pack_id, 0), first)
        return True

    def flushed(self, index: PackIndex, digest: bytes) -> bool:
        """Whether the bytes of ``digest`` in the pack of ``index`` are known flushed by
        their writer: a pack with an index file; an appendable pack up to where a log line,
        its first segment, or this process's own append ended (nothing else may count on)."""
        if not index.segments:
            return True
        block = index.blocks[index.entries[digest][0]]
        return self._flushed.get(index.pack_id, 0) > block.offset

    def durable(self, index: PackIndex) -> set[bytes]:
        """The digests of the pack of ``index`` whose bytes are known flushed (``flushed``):
        what gc may count on that pack to hold."""
        return {digest for digest in index.entries if self.flushed(index, digest)}

    def flushed_end(self, index: PackIndex) -> int:
        """How far the bytes of the pack of ``index`` are known flushed (``flushed``)."""
        flushed = self._flushed.get(index.pack_id, 0) if index.segments else index.pack_size
        return min(index.pack_size, flushed)

    def add_segment(self, pack_id: str, segment: Segment) -> PackIndex:
        """Count on a segment this process just appended (durably) to its appendable pack,
        and tell other processes through the pack log; the pack's index now."""
        with self._lock:
            previous = self._indexes.get(pack_id)
            if previous is None or previous.pack_size != segment.start:
                self._load_segments(pack_id, segment.end)
                index = self._indexes.get(pack_id)
                if index is None:
                    raise CorruptPackError(f"pack {pack_id} cannot be read back")
            else:
                index, added = merge(pack_id, previous, [segment])
                self._indexes[pack_id] = index
                self._where.add(index, added)
            self._settled[pack_id] = max(self._settled.get(pack_id, 0), segment.end)
            self._flushed[pack_id] = max(self._flushed.get(pack_id, 0), segment.end)
        if self._log is not None:
            self._log.add_segment(pack_id, segment.end)
        return index

    def _drop(self, pack_ids: set[str]) -> None:
        """Stop counting on deleted packs (a digest another pack also holds may leave the
        map: rare, see ``_rebuild``; a create stores it again, a read lists)."""
        for pack_id in pack_ids:
            self._broken.pop(pack_id, None)
            self._settled.pop(pack_id, None)
            self._flushed.pop(pack_id, None)
            self._pending.pop(pack_id, None)
            self._pending_lines.pop(pack_id, None)
        gone = [self._indexes.pop(pack_id) for pack_id in pack_ids if pack_id in self._indexes]
        self._where_partial |= self._where.remove(gone)
        self.cache.forget((i.pack_id, n) for i in gone for n in range(len(i.blocks)))

    def _load(self, pack_id: str) -> PackIndex | None:
        """A pack's index, or None if it cannot be used (then noted as broken, unless gone)."""
        try:
            return read_index(self.backend, pack_id)
        except FileNotFoundError:
            return None
        except PackSizeError as error:
            self._broken[pack_id] = str(error)
            with contextlib.suppress(CorruptPackError):  # a large table may break the rules
                self._damaged.update(dict.fromkeys(error.index.entries, str(error)))
        except (CorruptPackError, OSError) as error:
            self._broken[pack_id] = str(error)
        return None

    def _list_all(self, *, whole: bool = False) -> None:
        """List ``packs/``: load indexes (and segments) that appeared, forget packs that went
        away. A pack file without an index is an appendable pack (by its magic) or garbage.
        ``whole``: read every large index whole (``read_whole``)."""
        self._position = log_end(self._log)
        self._learn_flushed()
        self._listed_since_refresh = True
        indexed, packed = self._listed()
        forget_indexes(self.backend, indexed)
        before = set(self._indexes)
        for pack_id in before:
            if pack_id not in (packed if self._indexes[pack_id].segments else indexed):
                del self._indexes[pack_id]
        self._broken = {}
        self._damaged = {}
        for pack_id in sorted(indexed):
            if pack_id not in self._indexes:
                index = self._load(pack_id)
                if index is not None:
                    self._indexes[pack_id] = index
        for pack_id in indexed & (set(self._indexes) - packed):
            del self._indexes[pack_id]
            self._broken[pack_id] = f"pack {pack_id} is missing (its index is there)"
        for pack_id in sorted(packed - indexed):
            self._load_segments(pack_id, None)
        self._pending.clear()  # each appendable pack was read to its last whole segment
        self._pending_lines.clear()
        if whole:
            self._drop_unreadable(split_readable(list(self._indexes.values()))[1])
        if set(self._indexes) != before or not self._loaded or self._where_partial:
            self._rebuild()
            self._where_partial = False
        self._loaded = True

    def _learn_flushed(self) -> None:
        """Read the pack log from its start for the segments its lines announce: their
        writers flushed them (see ``flushed``). Where the log cannot be read whole, nothing
        is learnt (a blob of such a segment is then stored again, not counted on)."""
        if self._log is None or self._position is None:
            return
        start = LogPosition(self._position.token, TOKEN_BYTES + 1)
        entries, position = self._log.read(start)
        if entries is None or position is None:
            return
        self._position = position
        for pack_id, end in entries:
            if end is not None:
                self._flushed[pack_id] = max(self._flushed.get(pack_id, 0), end)

    def _rebuild(self) -> None:
        """The map from digest to pack; of two small packs holding a digest, the larger (a
        fold's merged pack) rather than the one about to go (``PackMap`` for large ones)."""
        where = PackMap()
        for index in sorted(self._indexes.values(), key=lambda index: index.pack_size):
            where.add(index)
        self._where = where

    def register(self, index: PackIndex) -> None:
        """Count on a pack this process just published (no need to list the packs again),
        and tell other processes through the pack log."""
        with self._lock:
            self._indexes[index.pack_id] = index
            self._where.add(index)
            self._settled[index.pack_id] = index.pack_size
        if self._log is not None:
            self._log.add(index.pack_id)

    def settled(self, index: PackIndex, digest: bytes) -> bool:
        """Whether this process knows the name of the pack of ``index`` (and its index's),
        and the bytes of ``digest`` in it, to be durable (it published them, or flushed them
        since it counted on them): a writer that counts on it need not flush them again."""
        settled = self._settled.get(index.pack_id, -1)
        if not index.segments:
            return settled >= 0
        return settled > index.blocks[index.entries[digest][0]].offset

    def settle(self, ends: dict[str, int]) -> None:
        """Note that the names of these packs, and their bytes up to the offsets given,
        were just made durable (see ``settled``)."""
        with self._lock:
            for pack_id, end in ends.items():
                self._settled[pack_id] = max(self._settled.get(pack_id, -1), end)

    def announce_deletions(self) -> None:
        """Start a new pack log, followed by this process (the exclusive gc lock held, this
        view refreshed under it): every other process lists the packs at its next refresh."""
        with self._lock:
            if self._log is not None:
                self._log.restart()
                _, self._position = self._log.read(None)

    def _record_deletions(self, pack_ids: list[str], *, follow_restart: bool = True) -> None:
        """Log a deletion, or start a new log (followed if ``follow_restart``); raises if not."""
        with self._lock:
            if self._log is None or self._log.record_deletions(
                pack_ids, limit=self.deletion_log_bytes
            ):
                return
            if follow_restart:
                _, self._position = self._log.read(None)

    def read_whole(self, indexes: list[PackIndex]) -> list[PackIndex]:
        """Those of ``indexes`` whose entries all keep the rules, each read whole if it was
        only looked up so far (``format.indextable``); the others are broken from now on,
        as a corrupt index is: for a caller that reads every entry (gc, verify, stats, a
        fold), which must judge such a pack by all of its blobs."""
        readable, unreadable = split_readable(indexes)
        if unreadable:
            with self._lock:
                self._drop_unreadable(unreadable)
        return readable

    def _drop_unreadable(self, unreadable: dict[str, tuple[PackIndex, str]]) -> None:
        for pack_id, (index, why) in unreadable.items():  # as split_readable found them
            if self._indexes.get(pack_id) is index:
                del self._indexes[pack_id]
                self._broken[pack_id] = why
                self._where_partial |= self._where.remove([index])

    def unindex(
        self,
        indexes: list[PackIndex],
        *,
        held_by: list[PackIndex] | None = None,
        fits: Callable[[int], bool] | None = None,
    ) -> list[PackIndex]:
        """Take packs out as the caller read them (view refreshed under the gc lock): log,
        drop from this view, unlink (``_take_out``); those taken out. gc logs each one just
        before its unlink, until ``fits(taken so far)`` says no; a fold points this view at
        ``held_by`` first and logs all last (why: ``maintenance.fold``)."""
        if held_by is None:
            taken: list[PackIndex] = []
            for index in indexes:
                if taken and fits is not None and not fits(len(taken)):
                    break
                self._record_deletions([index.pack_id])
                with self._lock:
                    self._drop({index.pack_id})
                self._take_out(index)
                taken.append(index)
            return taken
        pack_ids = [index.pack_id for index in indexes]
        with self._lock:
            for index in held_by:
                self._where.add(index)
            self._drop(set(pack_ids))
        for index in indexes:
            self._take_out(index)
        self._record_deletions(pack_ids, follow_restart=False)
        return indexes
