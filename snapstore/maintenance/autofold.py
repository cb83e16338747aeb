"""Small packs folding themselves: after a create commits, a thread of the process runs a
few bounded fold steps (``maintenance.fold``) if its view of the store holds enough small
packs. The create has returned by then (its caller never waits for a fold), and a long-running
server's creates start them the same way, so they run between its requests.

The thread yields to the store's creates (``CreateGate``): after each slice of its copying
(``SLICE_SECONDS``), before each step and before each try at deleting the folded packs it
waits while a create of the same store is in progress in this process, from its first check
to its return (at most ``PAUSE_LIMIT`` at a time and
``PAUSE_BUDGET`` per step, so a store that never stops creating still folds; not at all once
a gc announced itself, which waits for the fold's hold of the gc lock). A fold running
beside a create shared the interpreter lock with it (the create's every system call could
hand it over) and announced its deletion while the create held the gc lock, so that the
next create waited behind the announcement: the slowest creates of a long series were those
that overlapped a fold.

At most one fold thread runs per ``SnapStore``, and one process of a store folds at a time
(the ``fold`` lock, taken only if free: the others skip their run). The thread is not a
daemon thread, so a process that ends finishes its (bounded) step first, and
``SnapStore.close`` waits for it. A step whose
folded packs could not be deleted at once (a gc ran, or the holds of the gc lock in progress
did not end within the barrier's wait) is tried again for a moment, then left for the next
run: until then its blobs are held twice.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from snapstore.errors import LockTimeout
from snapstore.logs import get_logger
from snapstore.maintenance.foldpolicy import FoldPolicy, is_due
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
PAUSE_LIMIT = 0.05
"""Seconds a fold waits at one point for the creates in progress to end."""
PAUSE_BUDGET = 1.0
"""Seconds a fold step waits for creates in all: then it goes on beside them."""
SLICE_SECONDS = 0.0002
"""How long a fold works between two looks at the creates in progress."""

logger = get_logger(__name__)


class CreateGate:
    """The creates of one store in progress in this process, which a fold thread waits for."""

    def __init__(self) -> None:
        self._idle = threading.Condition()
        self._active = 0
        self.waiting = 0
        """Fold threads waiting for the creates now (for tests)."""

    @contextlib.contextmanager
    def creating(self) -> Iterator[None]:
        """Count a create in progress for the block."""
        with self._idle:
            self._active += 1
        try:
            yield
        finally:
            with self._idle:
                self._active -= 1
                if not self._active:
                    self._idle.notify_all()

    @property
    def busy(self) -> bool:
        """Whether a create of the store is in progress in this process."""
        return self._active > 0

    def wait_idle(self, limit: float) -> bool:
        """Wait until no create is in progress, at most ``limit`` seconds; True if none is."""
        with self._idle:
            self.waiting += 1
            try:
                return self._idle.wait_for(lambda: not self._active, timeout=limit)
            finally:
                self.waiting -= 1


class Yielder:
    """What a fold step calls between blobs: after each slice of work, wait while a create
    is in progress (within the limits of the module docstring), unless ``hurry()`` says
    that someone waits for the fold's hold of the gc lock (a gc that announced itself: the
    creates then wait for the gc, which waits for the fold), and from then on never."""

    def __init__(
        self,
        gate: CreateGate,
        hurry: Callable[[], bool] = lambda: False,
        budget: float = PAUSE_BUDGET,
    ) -> None:
        self.gate = gate
        self.hurry = hurry
        self.left = budget
        self.waited = 0.0
        """Seconds this step waited for creates (for tests and benchmarks)."""
        self._slice_end = time.monotonic() + SLICE_SECONDS

    def __call__(self) -> None:
        now = time.monotonic()
        if now < self._slice_end:
            return
        if self.gate.busy and self.left > 0:
            if self.hurry():
                self.left = 0.0
                return
            self.gate.wait_idle(min(PAUSE_LIMIT, self.left))
            spent = time.monotonic() - now
            self.left -= spent
            self.waited += spent
        self._slice_end = time.monotonic() + SLICE_SECONDS


class AutoFold:
    """Starts fold steps for one store after its creates (see the module docstring)."""

    def __init__(self, repo: Repository, policy: FoldPolicy) -> None:
        self.repo = repo
        self.policy = policy
        self.gate = CreateGate()
        """Creates are counted in it (``creating``) from start to return: the fold yields."""
        self.waited = 0.0
        """Seconds the fold steps of this store waited for creates (tests, benchmarks)."""
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

    def creating(self) -> contextlib.AbstractContextManager[None]:
        """Held by a create from its start to its return: a fold of this store waits
        meanwhile (within the limits of the module docstring)."""
        return self.gate.creating()

    def after_commit(self) -> None:
        """Start a fold thread if folding is due and none is running (never blocks)."""
        if not self.applies:
            return
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
        from snapstore.maintenance.fold import write_merged

        self._pending = [fold for fold in self._pending if not self._drop(fold)]
        done = 0
        while done < steps and not self._pending and is_due(self.repo, self.policy):
            pause = Yielder(self.gate, self.gc_announced)
            self.gate.wait_idle(PAUSE_LIMIT)
            fold = write_merged(self.repo, self.policy, pause)
            self.waited += pause.waited
            if fold is None:
                break
            done += 1
            self.steps += 1
            if not self._drop(fold):
                self._pending.append(fold)
        return done

    def gc_announced(self) -> bool:
        """Whether a gc (or another process's fold deletion) announced itself on gc-intent."""
        try:
            with self.repo.gc_intent.shared(timeout=0):
                return False
        except LockTimeout:
            return True

    def _drop(self, fold: Fold) -> bool:
        """Delete the packs ``fold`` folded, trying the exclusive lock a few times."""
        from snapstore.maintenance.fold import drop_sources

        pause = DROP_FIRST_PAUSE
        for _ in range(DROP_TRIES):
            self.gate.wait_idle(PAUSE_LIMIT)
            if drop_sources(self.repo, fold, DROP_WAIT):
                self.longest_hold = max(self.longest_hold, fold.held)
                return True
            time.sleep(pause)
            pause *= 2
        logger.debug("the store stayed busy; the folded packs are deleted later")
        return False
