"""Blob garbage collection: delete what no manifest in the store references, without
stalling the creates that run beside it.

A gc runs alone (``locks/gc-run``, held exclusively throughout; a second gc finds it held
and is skipped, before it announces itself to anyone), in three parts:

1. **Open** (the gc lock exclusive, announced through gc-intent while it waits; a short
   hold): mark the store as the current format, start noting commits (``gcjournal``) and
   remove stale temp objects (no writer is half-way while the lock is held).
2. **Mark and copy** (the gc lock shared, as a create holds it: creates go on, nothing is
   deleted): list every pack, note those no index names, convert what is left of format 1
   (``upgrade``), mark from every manifest on disk (``reachable``), and copy the live blobs
   of the packs worth rewriting into new packs (``packgc``). A corrupt manifest, or one
   whose trees cannot be read, stops here: its references are unknown, so nothing is
   deleted.
3. **Delete** in short steps, each under the gc lock held exclusively for a bounded amount
   of work, each first marking what was committed since (``gcsteps``).

A store whose cache other hosts do not share (object storage) cannot note commits: there gc
holds the gc lock exclusively through all three parts. A dry run deletes nothing, so after
its opening hold it only reads.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

from snapstore.backend.seam import Kind
from snapstore.errors import LockTimeout
from snapstore.maintenance import gcnoted, gcsteps, packgc
from snapstore.maintenance.checks import clean_temp
from snapstore.maintenance.checks import referenced as reachable
from snapstore.maintenance.upgrade import convert_manifests
from snapstore.models import GcReport
from snapstore.repo.locks import exclusive_with_intent
from snapstore.repo.repository import Repository
from snapstore.repo.trees import Marks

STEP_WAIT = 0.05
"""How long a step, announced, waits for the gc lock before it lets the creates through."""
RUN_LOCK_WAIT = 1.0
"""How long a gc waits for another to finish before it reports the store busy."""


def collect(repo: Repository, *, dry_run: bool) -> GcReport:
    """Collect the garbage of ``repo`` (``dry_run``: only report it); a store busy for longer
    than the lock timeout (another gc running, or a holder of the gc lock) is reported as
    skipped, with whatever was deleted before."""
    report = GcReport()
    try:
        with contextlib.ExitStack() as running:
            journal = repo.sessions.gc_journal
            if journal.supported:
                wait = min(RUN_LOCK_WAIT, journal.run_lock.timeout)
                running.enter_context(journal.run_lock.exclusive(timeout=wait))
            _Collection(repo, report, dry_run=dry_run).run()
    except LockTimeout as error:
        report.skipped = report.locked = True
        report.reason = f"the store is busy: {error}"
        return report
    if report.problems:
        report.reason = "; ".join(report.problems)
    return report


@contextlib.contextmanager
def exclusive_soon(repo: Repository) -> Iterator[None]:
    """Hold the gc lock exclusively for one step. Announced on gc-intent, it waits at most
    ``STEP_WAIT`` for the holders in progress (new creates wait behind the announcement
    meanwhile); if they hold on (a restore, a long read), it lets go for as long, so the
    creates waiting go through, then waits for the holders of that moment until the lock
    timeout (LockTimeout), as an announced gc always did: a stream of creates cannot starve
    it."""
    acquired = False
    with contextlib.ExitStack() as held:
        with repo.gc_intent.exclusive():
            try:
                held.enter_context(repo.gc_lock.exclusive(timeout=STEP_WAIT))
                acquired = True
            except LockTimeout:
                pass
        if acquired:
            yield
            return
    time.sleep(STEP_WAIT)
    with exclusive_with_intent(repo.gc_lock, repo.gc_intent):
        yield


class _Collection:
    """One gc of ``repo``, filling ``report`` (see the module docstring)."""

    def __init__(self, repo: Repository, report: GcReport, *, dry_run: bool) -> None:
        self.repo = repo
        self.report = report
        self.dry_run = dry_run
        self.stepped = repo.sessions.gc_journal.supported
        self.token: str | None = None
        self.marks = Marks()
        self.orphans: list[str] = []

    def _exclusive(self) -> contextlib.AbstractContextManager[None]:
        if self.stepped:
            return exclusive_soon(self.repo)
        return exclusive_with_intent(self.repo.gc_lock, self.repo.gc_intent)

    @contextlib.contextmanager
    def _between_steps(self) -> Iterator[None]:
        """The lock the mark and copy part holds: shared if commits are noted, else none
        more (the whole collection already holds it exclusively)."""
        if self.stepped:
            with self.repo.blobs_in_use():
                yield
        else:
            yield

    def run(self) -> None:
        journal = self.repo.sessions.gc_journal
        if self.stepped:
            try:
                self._collect()
            finally:
                if self.token is not None:
                    journal.clear()
        else:
            with self._exclusive():
                self._collect()

    def _collect(self) -> None:
        self._open()
        with self._between_steps():
            found = self._mark_and_copy()
        if found is None:
            return
        garbage, work = found
        work.orphans = self.orphans
        if self.dry_run:
            self._measure(garbage, work)
            return
        # A deleter killed before its flush (a sweep flushes once per hold) left unlinks
        # the marking did not see past: made durable before any blob they named goes.
        self.repo.backend.flush_deletions(Kind.MANIFEST)
        hold = self._exclusive if self.stepped else contextlib.nullcontext
        commits = gcnoted.NewCommits(self.repo, self.token)
        done = gcsteps.Steps(self.repo, self.marks, work, garbage, hold, commits).run()
        self.report.problems += done.problems
        self.report.blobs_deleted += done.blobs_deleted
        self.report.packs_deleted = done.packs_deleted
        written = sum(index.pack_size for index in work.written)
        self.report.bytes_freed = max(0, done.bytes_freed - written)
        if not done.problems:
            self.repo.catalog.tidy()

    def _open(self) -> None:
        """The opening hold (see the module docstring)."""
        repo = self.repo
        hold = self._exclusive() if self.stepped else contextlib.nullcontext()
        with hold:
            if not self.dry_run:
                repo.require_current_format()
                if self.stepped:
                    self.token = repo.sessions.gc_journal.start()
            self.report.temp_files_removed = clean_temp(repo.backend, self.dry_run)
            if not self.stepped:
                self.orphans = self._orphans()
        if self.token is not None:
            repo.sessions.gc_journal.clear(keep=self.token)  # an earlier gc's, after the hold

    def _orphans(self) -> list[str]:
        """The packs no index names, found with a full view of the packs."""
        self.repo.blobs.refresh(full=True)
        return self.repo.blobs.packs.orphans()

    def _mark_and_copy(self) -> tuple[list[bytes], packgc.PackWork] | None:
        repo, report = self.repo, self.report
        if self.stepped:
            self.orphans = self._orphans()  # candidates: checked again before deletion
        if not self.dry_run:
            conversion = convert_manifests(repo)
            report.manifests_converted = conversion.converted
            report.problems += conversion.problems
        self.marks, corrupt, _ = reachable(repo)
        marks = self.marks
        if corrupt:
            report.skipped = True
            report.problems.append(
                f"{len(corrupt)} corrupt manifest(s) hide which blobs are in use; no blob was "
                f"deleted (run verify): {corrupt[0]}"
            )
            return None
        garbage = [d for d in repo.blobs.loose.iter_digests() if d not in marks.sizes]
        work = packgc.prepare(repo.blobs, marks, dry_run=self.dry_run)
        report.problems += work.problems
        report.packs_written = len(work.written)
        return garbage, work

    def _measure(self, garbage: list[bytes], work: packgc.PackWork) -> None:
        """What a collection would delete, without deleting it (a dry run)."""
        repo, report = self.repo, self.report
        loose = repo.blobs.loose
        freed = sum(loose.size(digest) for digest in garbage + work.packed_loose)
        freed += sum(index.pack_size for index in work.drop)
        freed += sum(repo.blobs.packs.size_of(orphan) for orphan in work.orphans)
        report.blobs_deleted = len(garbage)
        report.blobs_deleted += sum(
            1 for index in work.drop for digest in index.entries if digest not in self.marks.sizes
        )
        report.packs_deleted = len(work.drop)
        report.bytes_freed = max(0, freed - sum(index.pack_size for index in work.written))
