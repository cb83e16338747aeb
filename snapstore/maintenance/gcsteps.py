"""gc's deletions, in short steps: each step holds the gc lock exclusively for a bounded
amount of work (``STEP_SECONDS``, ``STEP_ITEMS``), so a create waits at most one step.

Between steps creates commit, and a create may reuse a blob gc marked unreferenced. Every
step therefore first marks the manifests committed since the last one (``gcjournal``: each
commit notes its manifest while a gc runs) and then deletes only what is still unreferenced:

- a loose blob, if no mark names it now;
- a pack, if every blob of it marked now is also in a pack that stays (one gc keeps, or one
  it wrote); a pack that fails this is kept, and so is one the plan dropped later on;
- a loose blob packed by this gc: always (it is in a published pack);
- a pack no index names, if it still has none (found while writers ran, it may have been
  being published; under the exclusive lock no writer is half-way).

A pack is taken out of the store as a fold step does: a new pack log (in every step that
drops a pack: a process that followed the previous step's log must list the packs again),
then its index unlinked, under the lock; the packs themselves are unlinked after the lock is
released, once ``packs/`` is flushed (no process counts on a pack without an index).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field

from snapstore.backend.seam import Handle, Kind
from snapstore.errors import CorruptManifestError, MissingBlobError
from snapstore.format.packfile import PackIndex
from snapstore.logs import get_logger
from snapstore.maintenance.checks import mark_manifest
from snapstore.maintenance.packgc import PackWork
from snapstore.repo.repository import Repository
from snapstore.repo.trees import Marks

STEP_SECONDS = 0.02
"""The work one step does under the exclusive lock, at most (at least one item)."""
STEP_ITEMS = 256
"""At most this many deletions per step."""

logger = get_logger(__name__)


@dataclass
class StepResult:
    """What the steps deleted, and why they stopped early, if they did."""

    blobs_deleted: int = 0
    bytes_freed: int = 0
    packs_deleted: int = 0
    packs_kept: int = 0
    steps: int = 0
    longest_hold: float = 0.0
    problems: list[str] = field(default_factory=list)


class _Budget:
    """The deletions one step may still make: ``STEP_ITEMS`` at most, and none started after
    ``deadline`` (the first always is)."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.left = STEP_ITEMS

    def take(self) -> bool:
        if self.left <= 0 or (self.left < STEP_ITEMS and time.monotonic() >= self.deadline):
            return False
        self.left -= 1
        return True


class NewCommits:
    """The manifests committed since gc marked, as a step finds them (see ``gcjournal``)."""

    def __init__(self, repo: Repository, token: str | None) -> None:
        self.repo = repo
        self.token = token
        self.seen: set[str] = set()

    def mark(self, marks: Marks) -> str | None:
        """Mark every manifest noted since the last call; why that failed, if it did (its
        references are then unknown, and nothing more may be deleted)."""
        if self.token is None:
            return None
        names = self.repo.sessions.gc_journal.noted(self.token, self.seen)
        if names:
            self.repo.blobs.refresh()  # follows the pack log this gc started: the new packs
        for name in names:
            try:
                manifest = self.repo.catalog.read_named(name)
            except (FileNotFoundError, NotADirectoryError):
                continue  # the commit failed, or the snapshot is gone again
            except CorruptManifestError as error:
                return f"a snapshot committed during gc cannot be read: {error}"
            problem = mark_manifest(self.repo, manifest, marks)
            if problem is not None:
                return problem
        return None


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
        self.safe = {
            digest
            for index in repo.blobs.packs.indexes()
            if index.pack_id not in going
            for digest in index.entries
        }
        self.result = StepResult()

    def run(self) -> StepResult:
        """Step until nothing is left, or a step finds a commit whose references are
        unknown."""
        while self.garbage or self.packed_loose or self.orphans or self.drop:
            unindexed: list[str] = []
            with self.hold():
                started = time.monotonic()
                problem = self.commits.mark(self.marks)
                if problem is not None:
                    self.result.problems.append(f"{problem}; gc stopped deleting")
                    logger.warning("gc stopped deleting: %s", problem)
                    return self.result
                self._step(started + STEP_SECONDS, unindexed)
                held = time.monotonic() - started
            self.result.steps += 1
            self.result.longest_hold = max(self.result.longest_hold, held)
            if unindexed:
                self.repo.blobs.packs.remove_unindexed(unindexed)
        return self.result

    def _step(self, deadline: float, unindexed: list[str]) -> None:
        budget = _Budget(deadline)
        while self.garbage and budget.take():
            self._delete_garbage(self.garbage.pop())
        while self.packed_loose and budget.take():
            self._delete_packed_loose(self.packed_loose.pop())
        while self.orphans and budget.take():
            self._delete_orphan(self.orphans.pop())
        batch: list[PackIndex] = []
        packs = self.repo.blobs.packs
        while self.drop and budget.take():
            index = self.drop.pop()
            if not self._can_drop(index):
                continue
            if not batch:
                packs.announce_deletions(again=True)
            packs.unindex(index.pack_id)
            batch.append(index)
        unindexed += [index.pack_id for index in batch]
        self._count_dropped(batch)

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
        if not self.orphans_settled:
            packs.settle_listing(pack_id)
            self.orphans_settled = True
        freed = packs.delete_orphan(pack_id)
        if freed:
            self.result.bytes_freed += freed
            logger.info("deleted pack %s, which no index names", pack_id)

    def _can_drop(self, index: PackIndex) -> bool:
        """Whether every blob of ``index`` marked now is in a pack that stays; if not, the
        pack stays (and its blobs count as safe from then on)."""
        self.going.discard(index.pack_id)
        for digest in index.entries:
            if digest in self.marks.sizes and digest not in self.safe:
                self.safe.update(index.entries)
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
