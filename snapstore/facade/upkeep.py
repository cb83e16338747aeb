"""Deleting snapshots and sessions, sweeping, collecting garbage, verifying and measuring."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from snapstore.facade.base import Duration, Progress, StoreBase
from snapstore.format.times import time_to_ns, ttl_seconds
from snapstore.models import GcReport, SweepReport, VerifyReport

if TYPE_CHECKING:
    from snapstore.maintenance.stats import StoreStats


class UpkeepMethods(StoreBase):
    """``delete``, ``delete_session``, ``sweep``, ``stats``, ``gc``, ``upgrade`` and ``verify``
    of ``SnapStore``."""

    def delete(self, session: str, name: str) -> bool:
        """Delete one snapshot durably; False if it did not exist. Errors are raised."""
        return self._repository.delete(session, name)

    def delete_session(self, session: str) -> int:
        """Delete every snapshot of a session, undo backups included; returns how many."""
        return self._repository.delete_session(session)

    def sweep(
        self,
        *,
        ttl: Duration | None = None,
        keep_last: int | None = None,
        now: datetime | None = None,
        dry_run: bool = False,
        allow_emptying: bool = True,
    ) -> SweepReport:
        """Delete expired snapshots, deciding from the manifests in the store under the lock.

        ``ttl``: file snapshots created more than ``ttl`` before ``now`` go; ``keep_last``:
        only the N newest file snapshots of each session stay (with both, a snapshot stays if
        either keeps it). Any snapshot whose own ``expires_at`` has passed goes. State
        snapshots (resume values) are removed only by their own expiry; undo backups only by
        their own retention (``undo_depth``). The N newest are the N last committed (each
        session numbers its snapshots as they are committed); ages go by ``Header.age_ns``,
        which a clock running ahead or behind cannot move far from when the manifest was
        written; snapshots whose recorded time is ahead of their file's are reported in
        ``SweepReport.future_stamped``. With ``allow_emptying=False``, a ``ttl`` or
        ``keep_last`` that would delete every file checkpoint of a session deletes nothing
        and raises SweepRefusedError. ``now`` defaults to the store's clock: this host's for a
        local store, the server's on object storage (a host whose clock runs ahead does not
        sweep early).
        """
        from snapstore.maintenance.sweep import sweep

        now_ns = time_to_ns(now) if now is not None else None
        return sweep(
            self._repository,
            ttl=ttl_seconds(ttl),
            keep_last=keep_last,
            now_ns=now_ns,
            dry_run=dry_run,
            allow_emptying=allow_emptying,
        )

    def stats(
        self,
        session: str | None = None,
        *,
        ttl: Duration | None = None,
        keep_last: int | None = None,
        now: datetime | None = None,
    ) -> StoreStats:
        """What the store holds and costs: store-wide (format, packs, blobs, stored and
        on-disk bytes, garbage) and per session (only ``session``'s if given): checkpoints,
        logical size, stored size, the bytes only it holds, and what a sweep with ``ttl`` and
        ``keep_last`` followed by a gc would free. Reads every manifest and its trees under
        the shared gc lock; changes nothing."""
        from snapstore.maintenance.stats import collect_stats

        now_ns = time_to_ns(now) if now is not None else self._repository.backend.now_ns()
        return collect_stats(
            self._repository,
            session=session,
            ttl=ttl_seconds(ttl),
            keep_last=keep_last,
            now_ns=now_ns,
        )

    def gc(self, *, dry_run: bool = False) -> GcReport:
        """Delete blobs no manifest in the store references, and stale temp files.

        Waits up to ``lock_timeout`` for writers and readers to finish (new ones wait behind
        it meanwhile), then reports that it was skipped. A corrupt manifest stops blob
        deletion (its references are unknown).
        """
        from snapstore.maintenance.gc import collect

        return collect(self._repository, dry_run=dry_run)

    def upgrade(self) -> GcReport:
        """Convert a store of an older format to the current one: a gc that also rewrites
        every format 1 manifest and pack (every gc does so as it goes; this is the way to
        do it now). Crash-safe at every step; a run that is stopped is taken up by the next
        (see docs/format.md, "Converting a format 1 store")."""
        return self.gc()

    def verify(self, *, deep: bool = False, progress: Progress | None = None) -> VerifyReport:
        """Check every committed snapshot (undo backups too): manifests decode, referenced
        blobs exist (and, with ``deep``, hash right). Temp files and unreferenced blobs are
        listed as garbage."""
        from snapstore.maintenance.verify import verify

        return verify(self._repository, deep=deep, progress=progress)
