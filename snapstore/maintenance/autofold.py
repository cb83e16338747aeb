"""Small packs folding themselves: after a create commits, a thread of the process runs a
few bounded fold steps (``maintenance.fold``) if its view of the store holds enough small
packs. The create has returned by then (its caller never waits for a fold), and a long-running
server's creates start them the same way, so they run between its requests.

At most one fold thread runs per ``SnapStore``, and one process of a store folds at a time
(the ``fold`` lock, taken only if free: the others skip their run). The thread is not a
daemon thread, so a process that ends finishes its (bounded) step first, and
``SnapStore.close`` waits for it. A step whose
folded packs could not be deleted at once (a gc ran, or the holds of the gc lock in progress
did not end within the barrier's wait) is tried again for a moment, then left for the next
run: until then its blobs are held twice.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

from snapstore.logs import get_logger
from snapstore.maintenance.foldpolicy import FoldPolicy
from snapstore.repo.repository import Repository

if TYPE_CHECKING:
    from snapstore.maintenance.fold import Fold

STEPS_PER_RUN = 4
FOLD_LOCK = "fold"
"""Held, only if free, by the one process of a store that folds at a time: others skip
their run instead of copying the same small packs and contending for the gc lock (several
bridges on one root folding at once halved their throughput)."""
DROP_TRIES = 4
DROP_WAIT = 0.05
"""Seconds one try's barrier waits announced, once no free instant of the gc lock came
(``fold.QUIET_WAIT``): creates that start meanwhile wait behind it at most this long."""
DROP_FIRST_PAUSE = 0.02
"""Seconds between the first two tries (doubling after each), when creates go ahead."""

logger = get_logger(__name__)


class AutoFold:
    """Starts fold steps for one store after its creates (see the module docstring)."""

    def __init__(self, repo: Repository, policy: FoldPolicy) -> None:
        self.repo = repo
        self.policy = policy
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._pending: list[Fold] = []
        self.steps = 0
        """Fold steps that published a merged pack (for tests and benchmarks)."""
        self.longest_hold = 0.0
        """The longest a fold's barrier took, in seconds (from its first try for the gc lock
        exclusively to letting it go: at most ``fold.QUIET_WAIT`` plus ``DROP_WAIT``;
        creates wait for it only during its announced part)."""

    @property
    def applies(self) -> bool:
        """Whether this store folds by itself: folding is on, the store is writable, and it
        keeps a pack log (a local store; object storage keeps its packs until gc)."""
        return self.policy.enabled and not self.repo.read_only and self.repo.blobs.packs.has_log

    @property
    def pending(self) -> bool:
        """Whether a fold published its merged packs but could not delete the folded ones
        yet (the store was busy): the next run tries again first."""
        return bool(self._pending)

    def after_commit(self) -> None:
        """Start a fold thread if folding is due and none is running (never blocks)."""
        if not self.applies:
            return
        from snapstore.maintenance.fold import is_due  # deferred: a create rarely folds

        if not (self._pending or is_due(self.repo, self.policy)):
            return
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return
            self._thread = threading.Thread(target=self._run, name="snapstore-fold")
            self._thread.start()

    def join(self) -> None:
        """Wait for the running fold thread, if any."""
        with self._lock:
            thread = self._thread
        if thread is not None:
            thread.join()

    def _run(self) -> None:
        try:
            with self.repo.backend.lock(FOLD_LOCK).exclusive_if_free() as ours:
                if ours:
                    self.run_steps(STEPS_PER_RUN)
        except Exception:  # a failed fold changes nothing a reader relies on
            logger.warning("folding small packs failed", exc_info=True)

    def run_steps(self, steps: int) -> int:
        """Finish folds left pending, then run up to ``steps`` fold steps while folding is
        due; returns the number of merged packs published."""
        from snapstore.maintenance.fold import is_due, write_merged

        self._pending = [fold for fold in self._pending if not self._drop(fold)]
        done = 0
        while done < steps and not self._pending and is_due(self.repo, self.policy):
            fold = write_merged(self.repo, self.policy)
            if fold is None:
                break
            done += 1
            self.steps += 1
            if not self._drop(fold):
                self._pending.append(fold)
        return done

    def _drop(self, fold: Fold) -> bool:
        """Delete the packs ``fold`` folded, trying the exclusive lock a few times."""
        from snapstore.maintenance.fold import drop_sources

        pause = DROP_FIRST_PAUSE
        for _ in range(DROP_TRIES):
            if drop_sources(self.repo, fold, DROP_WAIT):
                self.longest_hold = max(self.longest_hold, fold.held)
                return True
            time.sleep(pause)
            pause *= 2
        logger.debug("the store stayed busy; the folded packs are deleted later")
        return False
