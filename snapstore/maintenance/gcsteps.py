"""gc's deletions, in short steps: each step holds the gc lock exclusively for a bounded
time (``STEP_SECONDS``), so a create waits at most one step. Before each deletion a step asks
whether one more fits in that time, reading the clock (``pace``: how long an unlink takes on
this disk now, measured as the steps go), and ends once none does: an unlink may take
microseconds on an idle disk and milliseconds beside a busy one, and slow down within a step.
At least one deletion per step, at most ``STEP_ITEMS``. Packs are checked in batches sized by
the pace, then each logged as deleted and its index unlinked in turn; those of a batch the
step had no time left for go back to the plan, untouched, and a later step checks them again.

Between steps creates commit, and a create may reuse a blob gc marked unreferenced. Every
step therefore first marks the manifests committed since the last one (``gcjournal``: each
commit notes its manifest while a gc runs; ``gcnoted``: marked ahead of the lock, checked by
their bytes under it, within the step's time) and then deletes only what is still
unreferenced:

- a loose blob, if no mark names it now;
- a pack, if every blob of it marked now is also in a pack that stays (one gc keeps, or one
  it wrote); a pack that fails this is kept, and so is one the plan dropped later on;
- a loose blob packed by this gc: always (it is in a published pack);
- a pack no index names, if it still has none (found while writers ran, it may have been
  being published; under the exclusive lock no writer is half-way).

A pack is taken out of the store as a fold step does: its deletion written in the pack log
(every other process drops it from its view at its next refresh, without listing
``packs/``), then its index unlinked, under the lock; the packs themselves are unlinked after
the lock is released, once ``packs/`` is flushed (no process counts on a pack without an
index). A last short hold starts a new pack log, so the log does not grow with every gc.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from time import monotonic
from typing import TypeVar

from snapstore.backend.packlog import MAX_READ_BYTES
from snapstore.backend.seam import Handle, Kind
from snapstore.errors import LockTimeout, MissingBlobError
from snapstore.format.packfile import PackIndex
from snapstore.logs import get_logger
from snapstore.maintenance.gcnoted import NewCommits
from snapstore.maintenance.pace import HoldTimes, Pace
from snapstore.maintenance.packgc import PackWork
from snapstore.repo.repository import Repository
from snapstore.repo.trees import Marks

STEP_SECONDS = 0.02
"""The work one step does under the exclusive lock, at most (at least one item)."""
STEP_ITEMS = 4096
"""At most this many deletions per step, however fast the disk."""
SETTLE_MOST_SECONDS = 1.0
"""The longest a hold checks the commits made since the last one (after holds that ran out
of time: a create may wait that long once commits come faster than 20 ms can check)."""
LOG_BYTES = MAX_READ_BYTES // 2
"""How long the pack log may grow while gc deletes (about 240,000 deletions; a process reads
at most ``MAX_READ_BYTES`` past its position in one go, and lists ``packs/`` past that)."""

logger = get_logger(__name__)
_Item = TypeVar("_Item")


@dataclass
class StepResult:
    """What the steps deleted, and why they stopped early, if they did."""

    blobs_deleted: int = 0
    bytes_freed: int = 0
    packs_deleted: int = 0
    packs_kept: int = 0
    steps: int = 0
    longest_hold: float = 0.0
    longest_hold_parts: dict[str, float] = field(default_factory=dict)
    """Where the longest hold went: seconds per part (``refresh``: the pack log;
    ``settle``: the commits since the last step; ``delete``), and ``<part>_items``: how
    many entries it checked, how many deletions it made."""
    longest_wait: float = 0.0
    """The longest a step waited for the lock (the creates wait behind it meanwhile)."""
    problems: list[str] = field(default_factory=list)


class Steps:
    """Carry out the deletions of one gc (see the module docstring)."""

    def __init__(
        self,
        repo: Repository,
        marks: Marks,
        work: PackWork,
        garbage: list[bytes],
        hold: Callable[[], AbstractContextManager[None]],
        commits: NewCommits,
    ) -> None:
        self.repo = repo
        self.marks = marks
        self.hold = hold
        self.commits = commits
        self.garbage = list(garbage)
        self.packed_loose = list(work.packed_loose)
        self.orphans = list(work.orphans)
        self.orphans_settled = False
        self.drop = list(work.drop)
        going = {index.pack_id for index in work.drop}
        self.going = set(going)
        packs = repo.blobs.packs
        self.safe = {
            digest
            for index in packs.read_whole(packs.indexes())
            if index.pack_id not in going
            for digest in packs.durable(index)
        }
        self.result = StepResult()
        self.clock = monotonic
        self.deleted_in_step = 0
        self.settle_seconds = STEP_SECONDS
        """How long the next hold may check the commits made since the last one."""
        self.paces = {
            kind: Pace(STEP_ITEMS, self.clock) for kind in ("garbage", "packed", "orphan", "pack")
        }

    def run(self) -> StepResult:
        """Step until nothing is left, or a step finds a commit whose references are
        unknown. The pack log may grow to ``LOG_BYTES`` meanwhile (a new log makes every
        process list ``packs/``: mid-gc, thousands of packs); the end starts a new one."""
        packs = self.repo.blobs.packs
        usual, packs.deletion_log_bytes = packs.deletion_log_bytes, LOG_BYTES
        try:
            return self._run()
        finally:
            packs.deletion_log_bytes = usual

    def _run(self) -> StepResult:
        while self.garbage or self.packed_loose or self.orphans or self.drop:
            if not self._ahead():
                return self.result
            asked = self.clock()
            with self.hold():
                hold = HoldTimes(self.clock, asked)
                self.repo.blobs.refresh()  # the log since the last step: cheap, and exact
                hold.lap("refresh")
                deadline = hold.started + STEP_SECONDS
                budget = hold.started + self.settle_seconds
                settled, problem = self.commits.settle(self.marks, self.clock, budget)
                self._next_settle(settled, deadline)
                hold.lap("settle", self.commits.settled_entries)
                if settled and problem is None:
                    self.commits.flush_missing()  # rare here: most were found ahead
                self.deleted_in_step = 0
                dropped = self._step(deadline) if settled and problem is None else []
                hold.lap("delete", self.deleted_in_step)
            self.commits.release()
            self._note(hold)
            if problem is not None:
                self._stop(problem)
                return self.result
            if dropped:
                self.repo.blobs.packs.remove_unindexed([index.pack_id for index in dropped])
                self._count_dropped(dropped)
        if self.result.packs_deleted:
            self._restart_log()
        return self.result

    def _next_settle(self, settled: bool, deadline: float) -> None:
        """How long the next hold may check commits: twice as long after one that ran out
        of time (so that gc finishes while commits keep coming), at most
        ``SETTLE_MOST_SECONDS``; as long again after one that settled too late to delete
        more than one item; else ``STEP_SECONDS``."""
        if not settled:
            self.settle_seconds = min(2 * self.settle_seconds, SETTLE_MOST_SECONDS)
        elif self.clock() < deadline:
            self.settle_seconds = STEP_SECONDS

    def _note(self, hold: HoldTimes) -> None:
        """Count a step, and keep the times of the longest hold and the longest wait."""
        result = self.result
        result.steps += 1
        if hold.held > result.longest_hold:
            result.longest_hold = hold.held
            result.longest_hold_parts = dict(hold.parts)
        result.longest_wait = max(result.longest_wait, hold.waited)

    def _restart_log(self) -> None:
        """Start a new pack log once the packs are few, so that the log does not grow from
        gc to gc; only tidiness (a deleter restarts a long log anyway), so a store that
        stays busy, or a log that cannot be written, leaves it as it is."""
        with contextlib.suppress(LockTimeout, OSError), self.hold():
            self.repo.blobs.refresh()
            self.repo.blobs.packs.announce_deletions()

    def _ahead(self) -> bool:
        """What a step needs that costs its hold nothing, done before it takes the lock:
        mark what was committed since the last look (so that the step, which must check each
        such manifest again, ``gcnoted``, reads few under the lock), and flush ``packs/``
        once before the first orphan pack is deleted. False if a commit's references are
        unknown (then nothing more is deleted: only gc deletes while a gc runs, so nothing
        is lost meanwhile)."""
        if self.orphans and not self.orphans_settled:
            # An orphan lost its index before gc listed the packs (while gc-run is held no
            # fold deletes), so this flush, after the listing, makes that unlink durable
            # before the pack's: no index can come back naming a pack that is gone.
            self.repo.blobs.packs.settle_listing(self.orphans[-1])
            self.orphans_settled = True
        problem = self.commits.mark_ahead(self.marks, self.clock)
        if problem is not None:
            self._stop(problem)
            return False
        self.commits.flush_missing()
        return True

    def _stop(self, problem: str) -> None:
        self.result.problems.append(f"{problem}; gc stopped deleting")
        logger.warning("gc stopped deleting: %s", problem)

    def _step(self, deadline: float) -> list[PackIndex]:
        """Delete until ``deadline`` (at least one item); the packs whose indexes went."""
        paces = self.paces
        done = self._delete_each(paces["garbage"], self.garbage, self._delete_garbage, deadline, 0)
        done = self._delete_each(
            paces["packed"], self.packed_loose, self._delete_packed_loose, deadline, done
        )
        done = self._delete_each(paces["orphan"], self.orphans, self._delete_orphan, deadline, done)
        self.deleted_in_step = done
        pace = paces["pack"]
        if not self.drop or not (count := pace.fitting(deadline, done)):
            return []
        started = self.clock()
        batch = self._droppable(count, lambda checked: pace.fitting(deadline, done + checked) > 0)
        if not batch:
            return []
        dropped = self.repo.blobs.packs.unindex(
            batch, fits=lambda unlinked: pace.fitting(deadline, done + unlinked) > 0
        )
        pace.took(len(dropped), self.clock() - started)
        self.drop += reversed(batch[len(dropped) :])  # not logged: checked again later
        self.deleted_in_step += len(dropped)
        return dropped

    def _delete_each(
        self,
        pace: Pace,
        queue: list[_Item],
        delete: Callable[[_Item], None],
        deadline: float,
        done: int,
    ) -> int:
        """Delete from the end of ``queue`` while one more deletion fits in the step (the
        clock read before each: ``Pace.fitting``); the step's deletions so far, these
        included."""
        while queue and pace.fitting(deadline, done):
            started = self.clock()
            delete(queue.pop())
            pace.took(1, self.clock() - started)
            done += 1
        return done

    def _droppable(self, count: int, fits: Callable[[int], bool]) -> list[PackIndex]:
        """The next ``count`` packs of the plan that may still be dropped, as far as
        ``fits(packs checked so far)`` allows checking them (each marked blob of a pack is
        looked up)."""
        batch: list[PackIndex] = []
        checked = 0
        while self.drop and len(batch) < count and (checked == 0 or fits(checked)):
            index = self.drop.pop()
            checked += 1
            if self._can_drop(index):
                batch.append(index)
        return batch

    def _delete_garbage(self, digest: bytes) -> None:
        if digest in self.marks.sizes:
            return  # a commit since gc marked reuses it
        with contextlib.suppress(FileNotFoundError, MissingBlobError):
            self.result.bytes_freed += self.repo.blobs.loose.delete(digest)
            self.result.blobs_deleted += 1

    def _delete_packed_loose(self, digest: bytes) -> None:
        with contextlib.suppress(FileNotFoundError, MissingBlobError):
            self.result.bytes_freed += self.repo.blobs.loose.delete(digest)

    def _delete_orphan(self, pack_id: str) -> None:
        """Delete a pack that had no index when gc listed the packs, if it still has none
        (a writer may have been publishing it then; under the lock none is)."""
        packs = self.repo.blobs.packs
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            self.repo.backend.stat(Handle(Kind.INDEX, pack_id))
            return
        freed = packs.delete_orphan(pack_id)
        if freed:
            self.result.bytes_freed += freed
            logger.info("deleted pack %s, which no index names", pack_id)

    def _can_drop(self, index: PackIndex) -> bool:
        """Whether every blob of ``index`` marked now is in a pack that stays, and no segment
        was appended to it since gc read it (blobs no other pack holds); if not, the pack
        stays (and its blobs count as safe from then on)."""
        self.going.discard(index.pack_id)
        if self.repo.blobs.packs.grown(index):
            self.safe.update(self.repo.blobs.packs.durable(index))
            self.result.packs_kept += 1
            logger.info("kept pack %s: segments were appended to it during gc", index.pack_id)
            return False
        for digest in index.entries:
            if digest in self.marks.sizes and digest not in self.safe:
                self.safe.update(self.repo.blobs.packs.durable(index))
                self.result.packs_kept += 1
                logger.info("kept pack %s: a snapshot committed during gc uses it", index.pack_id)
                return False
        return True

    def _count_dropped(self, batch: list[PackIndex]) -> None:
        for index in batch:
            dead = sum(1 for digest in index.entries if digest not in self.marks.sizes)
            self.result.blobs_deleted += dead
            self.result.bytes_freed += index.pack_size
            self.result.packs_deleted += 1
            logger.info(
                "deleted pack %s (%d bytes, %d blobs, %d of them unreferenced)",
                index.pack_id,
                index.pack_size,
                len(index.entries),
                dead,
            )
