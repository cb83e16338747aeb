"""Folding small packs into one: a bounded step of pack consolidation that never waits.

Every create publishes a pack of its own, so a store checkpointed often grows thousands of
packs of a few kilobytes. A fold step takes the smallest of them (as ``packgc.geometric_merge``
picks them, at most ``FoldPolicy.max_packs`` packs and ``max_bytes`` bytes) and merges them:

1. under the gc lock held **shared**, like a create (taken only if free at once: nothing
   waits for a fold, and a gc that announced itself goes first), it reads and verifies every
   blob of those packs and publishes the merged pack and its index, durably, with a pack log
   line. From then on every blob is in two packs: harmless duplicates;
2. under the gc lock held **shared** again, with ``locks/gc-run`` held shared (both only if
   free at once: while a gc runs this step deletes nothing, since gc deletes in steps of its
   own, counting on the packs it saw when it planned to stay), it brings its view up to date
   and, if the merged packs are still there, unlinks the folded packs' indexes, then writes
   their deletion in the pack log (``PackSet.unindex``). Creates and readers go on
   meanwhile: every blob of those packs is in the merged ones, so a create that claimed one
   names a blob that stays stored; a process that refreshes from then on drops them;
3. a **barrier**: the gc lock taken exclusively and let go at once, first at an instant when
   nobody holds it (unannounced: no create waits for it), else announced on gc-intent and
   waited for at most a moment. Every hold that began before the deletion was logged (and may
   read a folded pack as its view saw it) has then ended, so the fold flushes ``packs/`` and
   deletes the packs themselves. Folded appendable packs (no index: deleting one unlinks the
   pack, which its writer may append to under a shared hold) are checked and deleted only
   within that exclusive instant, unless they grew since the fold read them. If the barrier
   does not come, the fold is left pending: the pack files stay (no index names them; gc
   removes them if this process ends first).

No marking is needed: the merged packs hold every blob of the folded ones. A kill between the
steps leaves duplicates the next fold or gc drops, or packs without an index, which gc
deletes. Two processes folding the same packs each publish a complete merged pack, and
whichever deletes second finds the folded packs gone (or deletes the other's merged pack as
one of its own sources, whose blobs its merged pack also holds). The safety argument in full:
docs/concurrency.md, "Small packs fold themselves".
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from snapstore.errors import CorruptBlobError, LockTimeout, MissingBlobError
from snapstore.format.codec import WRITE_LEVEL
from snapstore.format.packfile import PackIndex
from snapstore.logs import get_logger
from snapstore.maintenance.foldpolicy import FoldPolicy, small_packs
from snapstore.maintenance.packgc import geometric_merge, is_lone_map, read_verified
from snapstore.repo.batch import PackSeries
from snapstore.repo.packset import Location
from snapstore.repo.repository import Repository

logger = get_logger(__name__)

QUIET_WAIT = 0.25
"""Seconds a fold's barrier looks for an instant when nobody holds the gc lock before it
announces itself. Nobody waits for this part, so it may be long: with four bridges on one
root, a quarter of a second halved what creates waited behind announced barriers (2.3 ms
per create with 50 ms, in one loaded run)."""


@dataclass
class Fold:
    """A fold whose merged packs are published: the packs it folded and the packs it wrote."""

    folded: list[PackIndex]
    """The packs it folded, as it read them (an appendable pack grown since is kept)."""
    merged: list[PackIndex] = field(default_factory=list)
    unindexed: list[str] | None = None
    """The folded packs whose indexes this fold unlinked (their files are deleted after the
    barrier); None until ``unindex_sources`` ran."""
    appendable: list[PackIndex] = field(default_factory=list)
    """The folded appendable packs still to delete, under the barrier's exclusive hold."""
    held: float = 0.0
    """Seconds its barrier took (waiting for the holds of the gc lock in progress to end)."""

    @property
    def sources(self) -> list[str]:
        """The ids of the packs it folded."""
        return [index.pack_id for index in self.folded]

    @property
    def bytes_written(self) -> int:
        return sum(index.pack_size for index in self.merged)


def choose(indexes: list[PackIndex], policy: FoldPolicy) -> list[PackIndex]:
    """The small packs to fold in one step: the smallest that break the geometric rule, at
    most ``max_packs`` of them and ``max_bytes`` in all; none if fewer than two."""
    small = [index for index in indexes if index.pack_size < policy.small_bytes]
    chosen: list[PackIndex] = []
    total = 0
    for index in geometric_merge(small):
        if len(chosen) == policy.max_packs or total + index.pack_size > policy.max_bytes:
            break
        chosen.append(index)
        total += index.pack_size
    return chosen if len(chosen) >= 2 else []


@contextlib.contextmanager
def _shared_if_free(repo: Repository, *, gc_run: bool = False) -> Iterator[bool]:
    """Hold the gc lock shared (and ``gc-run`` too, before it, if ``gc_run``: no gc starts
    meanwhile), each only if free at once and no gc or fold announced itself (yields True)."""
    with contextlib.ExitStack() as held:
        try:
            if gc_run:
                held.enter_context(repo.sessions.gc_journal.run_lock.shared(timeout=0))
            with repo.gc_intent.shared(timeout=0):
                held.enter_context(repo.gc_lock.shared(timeout=0))
            free = True
        except LockTimeout:
            free = False
        yield free


def write_merged(
    repo: Repository, policy: FoldPolicy, pause: Callable[[], None] | None = None
) -> Fold | None:
    """Step 1: publish the merged pack of the chosen small packs; None if the store was busy,
    nothing is worth folding, or a blob could not be read (logged; nothing is changed).
    ``pause`` is called before each blob is copied (a fold thread yields to creates there)."""
    with _shared_if_free(repo) as free:
        if not free:
            return None
        repo.blobs.refresh()
        chosen = choose(repo.blobs.packs.read_whole(small_packs(repo, policy)), policy)
        if not chosen:
            return None
        try:
            return _copy(repo, chosen, pause)
        except (CorruptBlobError, MissingBlobError) as error:
            logger.warning("small packs were not folded: %s", error)
            return None


def _copy(
    repo: Repository, chosen: list[PackIndex], pause: Callable[[], None] | None = None
) -> Fold:
    """Copy every blob of ``chosen`` (verified) into new packs: file contents first, then
    trees, each in the order its pack held them; ``pause()`` before each blob."""
    packs = repo.blobs.packs
    order = sorted(
        (index.blocks[number].kind, position, number, offset, digest, index, size)
        for position, index in enumerate(chosen)
        for digest, (number, offset, size) in index.entries.items()
    )
    series = PackSeries(repo.blobs, level=WRITE_LEVEL, inline=True)
    try:
        for kind, _, number, offset, digest, index, size in order:
            if pause is not None:
                pause()
            where = Location(index.pack_id, number, index.blocks[number], offset, size)
            data = read_verified(packs, where, digest)
            if is_lone_map(where, data):
                series.add_alone(digest, data, kind)
            else:
                series.add(digest, data, kind)
        series.finish()
    finally:
        series.abort()
    return Fold(chosen, series.published)


def unindex_sources(repo: Repository, fold: Fold) -> bool:
    """Deletion, first half: take the folded packs out of the store (their indexes unlinked,
    their deletion logged) under the gc lock held **shared**, with ``gc-run`` held shared so
    that no gc starts meanwhile; True once done (or no longer needed), False if a gc runs or
    the store is busy. Creates and readers go on meanwhile: none is stopped by it. Folded
    appendable packs are left to the barrier (``_take_out_appendable``)."""
    with _shared_if_free(repo, gc_run=True) as free:
        if not free:
            return False  # a gc deleting in steps counts on the packs it saw staying
        packs = repo.blobs.packs
        packs.refresh()
        present = {index.pack_id for index in packs.indexes()}
        if not all(index.pack_id in present for index in fold.merged):
            logger.debug("merged packs of a fold are gone (gc or another fold took them)")
            fold.unindexed = []
            return True
        doomed = [i for i in fold.folded if i.pack_id in present and not i.segments]
        if doomed:
            repo.require_current_format()  # a version before 4 reads no deletion line
            packs.unindex(doomed, held_by=fold.merged)
        fold.unindexed = [index.pack_id for index in doomed]
        fold.appendable = [i for i in fold.folded if i.pack_id in present and i.segments]
        return True


def _take_out_appendable(repo: Repository, fold: Fold) -> None:
    """Delete the folded appendable packs that did not grow since the fold read them, under
    the barrier's exclusive hold: a writer appends only under the gc lock held shared, so
    none grows meanwhile (under a shared hold, one could append a segment, which the merged
    pack lacks, between the check and the unlink). Nothing while a gc runs between its steps,
    or if the merged packs went meanwhile; the packs kept are duplicates a later fold drops."""
    if not fold.appendable or repo.sessions.gc_journal.gc_running():
        return
    packs = repo.blobs.packs
    packs.refresh()
    present = {index.pack_id for index in packs.indexes()}
    if not all(index.pack_id in present for index in fold.merged):
        return
    doomed = [i for i in fold.appendable if i.pack_id in present and not packs.grown(i)]
    if doomed:
        packs.unindex(doomed, held_by=fold.merged)
    fold.unindexed = [*(fold.unindexed or []), *(index.pack_id for index in doomed)]


def _barrier(repo: Repository, wait: float, then: Callable[[], None]) -> bool:
    """True once every hold of the gc lock that began before this call has ended (each may
    count on a pack as its view saw it when it refreshed), ``then`` run within the exclusive
    hold. The exclusive lock is taken and let go at once: first unannounced, at an instant
    when nobody holds it (no create waits behind that; tried for ``QUIET_WAIT`` or ``wait``,
    whichever is longer), then, if none came, announced on gc-intent, so that new holders
    wait behind it (at most ``wait``) until the holds in progress end."""
    try:
        with repo.gc_lock.exclusive(timeout=max(wait, QUIET_WAIT)):
            then()
            return True
    except LockTimeout:
        pass
    with repo.gc_intent.exclusive_if_free() as announced:
        if not announced:
            return False
        try:
            with repo.gc_lock.exclusive(timeout=wait):
                then()
                return True
        except LockTimeout:
            return False


def drop_sources(repo: Repository, fold: Fold, wait: float = 0.0) -> bool:
    """Step 2: delete the folded packs (``unindex_sources``, then the barrier, then the pack
    files) if the merged packs are still there; True once done (or no longer needed), False
    if the store stayed busy (tried again later: what is done stays done)."""
    if fold.unindexed is None and not unindex_sources(repo, fold):
        return False
    if fold.unindexed or fold.appendable:
        started = time.monotonic()
        if not _barrier(repo, wait, lambda: _take_out_appendable(repo, fold)):
            return False
        fold.held = time.monotonic() - started
        fold.appendable = []
        if fold.unindexed:
            repo.blobs.packs.remove_unindexed(fold.unindexed)
    doomed = fold.unindexed or []
    logger.info(
        "folded %d small packs into %d (%d bytes)",
        len(doomed),
        len(fold.merged),
        fold.bytes_written,
    )
    return True
