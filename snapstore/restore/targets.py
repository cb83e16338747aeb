"""The one guard of the directories snapstore writes into or records: restore targets and
create bases.

Every create, restore and undo goes through :class:`TargetGuard`, which owns, for each
directory:

- its lock (``targetlocks``): a restore holds its target exclusively and every ancestor
  shared; a create holds its base directory and every ancestor shared;
- the recovery of a restore of it that was killed (``recovery``), run under that lock before
  anything else touches the directory;
- the protocol of a change (``change``): a new target made, with the restore's marker in
  it, and its inode number put in the journal, the journal written durably, then the undo
  backup committed (``backups``), then the plan applied; on failure the target put back
  (``rollback``); the journal removed, then the marker, then the undo history trimmed.

So a killed restore that wrote anything leaves a journal its next user finds under the
lock (one killed before its journal leaves at most the target it made, empty but for the
marker), and no create
records a directory a restore is half-way through.
"""

from __future__ import annotations

import contextlib
import os
import threading
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING

from snapstore.cyclic_gc import gc_paused
from snapstore.errors import (
    InterruptedRestoreWarning,
    LockTimeout,
    RestoreError,
    SnapstoreError,
    UnsafePathError,
)
from snapstore.fs.seam import FileSystem
from snapstore.repo.repository import Repository
from snapstore.restore.journal import CorruptJournalError, Journal, JournalDir
from snapstore.restore.targetlocks import TargetLocks, target_key

if TYPE_CHECKING:
    from snapstore.restore.actions import Plan
    from snapstore.restore.apply import Progress
    from snapstore.restore.backups import UndoBackups
    from snapstore.restore.dirhandles import MadeTarget
    from snapstore.restore.recovery import Recovery
    from snapstore.restore.writer import TargetWriter


class TargetGuard:
    """Locks, journals, undo backups and recovery of the directories one repository's
    restores write into and its creates record."""

    def __init__(self, repo: Repository, fs: FileSystem, *, durable: bool, undo_depth: int) -> None:
        self.repo = repo
        self.locks = TargetLocks(repo.backend)
        self.journals = JournalDir(repo.backend)
        self._fs = fs
        self._durable = durable
        self._undo_depth = undo_depth
        self._writer: TargetWriter | None = None
        self._backups: UndoBackups | None = None
        self._recovery: Recovery | None = None
        self._parts_lock = threading.Lock()

    @property
    def writer(self) -> TargetWriter:
        """Plans and writes into targets under their journals. Made (and the restore code
        imported) on first use: a create whose base has no journal needs only the locks."""
        with self._parts_lock:
            if self._writer is None:
                from snapstore.restore.writer import TargetWriter

                self._writer = TargetWriter(
                    self.repo, self._fs, self.journals, durable=self._durable
                )
            return self._writer

    @property
    def backups(self) -> UndoBackups:
        """The undo history. Made on first use: a restore into a new directory keeps no
        backup, and should not import the create pipeline that takes one."""
        with self._parts_lock:
            if self._backups is None:
                from snapstore.restore.backups import UndoBackups

                self._backups = UndoBackups(self.repo, self.journals, self._undo_depth)
            return self._backups

    @property
    def recovery(self) -> Recovery:
        """Recovers a restore that was killed (made on first use: only a journal left
        behind needs it)."""
        writer, backups = self.writer, self.backups
        with self._parts_lock:
            if self._recovery is None:
                from snapstore.restore.recovery import Recovery

                self._recovery = Recovery(writer, backups)
            return self._recovery

    @contextlib.contextmanager
    def restoring(self, real_target: str) -> Iterator[str]:
        """Hold what a restore into ``real_target`` holds (its lock exclusive, its ancestors
        shared), once an interrupted restore of it is recovered; yields its key (which names
        its journal). RestoreError if that recovery cannot be done now."""
        with self.locks.restoring(real_target):
            key = target_key(real_target)
            if self.journals.exists(key):
                self.recovery.recover(key)
            yield key

    @contextlib.contextmanager
    def snapshotting(self, base: str, *, real_base: str | None = None) -> Iterator[None]:
        """Hold what a create of ``base`` holds: its lock shared and its ancestors' (after
        recovering an interrupted restore of it, under its lock exclusive) and the gc lock
        shared. ``real_base``: ``base`` with its symlinks resolved, if the caller just did."""
        if real_base is None:
            real_base = os.path.realpath(base)
        key = target_key(real_base)
        if self.journals.exists(key):
            with self.locks.restoring(real_base):
                self.recovery.recover(key)
        with (
            self.locks.snapshotting(real_base),
            self.repo.blobs_in_use(),
            gc_paused(),
        ):
            yield

    def change(
        self,
        key: str,
        journal: Journal,
        plan: Plan,
        *,
        existed: bool,
        progress: Progress | None,
    ) -> None:
        """Carry out ``plan``, the restore ``journal`` describes, in the target whose lock
        the caller holds (``restoring``, which gave ``key``, for the plan's real path): a new
        target made (empty) at that real path, the restore's target marker put in it, its
        inode number recorded in the journal; the journal written; the undo backup it names
        committed; the plan applied; the journal removed, then the marker; the undo history
        trimmed. On a failure the target is put back
        (``existed``: whether it was there before; a target the restore made is removed) and
        RestoreError says whether that worked. The gc lock must be held shared. The plan's
        blobs are read ahead from the start: only the target waits for the journal.

        A new target is made before the journal so that the journal names the very
        directory its recovery may write into (another one found there later is not the
        restore's): a kill between the two leaves that directory, empty but for the marker,
        and any parent made for it, and no journal, as ``mkdir -p`` followed by a failure
        would. The marker goes once the journal is gone; a kill just before, or a failure to
        remove it, leaves it there: an empty file that no create, restore plan or undo
        backup records or reads (``snapstore.fs.tempnames``)."""
        from snapstore.restore.apply import stop_reading

        source = self.writer.reads(plan)
        made: MadeTarget | None = None
        try:
            if plan.new_target:
                made = self.writer.make_target(plan)
                journal = journal._replace(target_inode=made.identity[1])
            self._write_journal(key, journal, made)
            if journal.backup is not None:
                self._keep_backup(journal, key, plan)
        except BaseException:
            stop_reading(source)
            if made is not None:
                made.close()
            raise
        try:
            try:
                self.writer.apply(
                    plan,
                    journal.temps,
                    journal.keep_special_bits,
                    progress,
                    source=source,
                    made=made,
                )
                self.journals.remove(key)
            except BaseException as error:
                from snapstore.restore.rollback import after_failure

                assert plan.real_target is not None
                after_failure(
                    self.writer, journal, key, existed, error, plan.real_target, made=made
                )
            if made is not None:
                with contextlib.suppress(OSError, UnsafePathError):
                    made.unmark(self._fs, journal.temps.marker)
        finally:
            if made is not None:
                made.close()
        if journal.backup is not None:
            self.backups.trim(journal.session)

    def _write_journal(self, key: str, journal: Journal, made: MadeTarget | None) -> None:
        """Put the restore's target marker in the new target it ``made`` (``MadeTarget.mark``),
        then write the journal durably; if either fails, that target (empty but for the
        marker: nothing was written in it yet) goes with it."""
        try:
            if made is not None:
                made.mark(self._fs, journal.temps.marker, durable=self.writer.durable)
            self.journals.write(key, journal)
        except BaseException:
            if made is not None:
                with contextlib.suppress(OSError):
                    self.journals.remove(key)
                made.discard(self._fs, journal.temps.marker)
            raise

    def _keep_backup(self, journal: Journal, key: str, plan: Plan) -> None:
        """Commit the undo backup of what the plan is about to change; if that fails, nothing
        was changed and the journal goes."""
        assert journal.backup is not None
        paths, recursive = plan.backup_paths()
        try:
            self.backups.commit(
                journal.session, journal.backup, journal.restoring, plan, paths, recursive
            )
        except BaseException as error:
            self.journals.remove(key)
            if isinstance(error, OSError | SnapstoreError) and not isinstance(error, LockTimeout):
                raise RestoreError(
                    f"could not keep a backup of what restoring {journal.restoring!r} into "
                    f"{journal.target} would change: {error}; nothing was changed",
                    rolled_back=True,
                ) from error
            raise

    def recover_all(self, session: str | None = None) -> None:
        """Recover every interrupted restore (of ``session``, if given) whose target is not
        locked by a restore or create running now; one that cannot be recovered now is
        left, with a warning. At open, and before an undo chooses the backup to restore."""
        for key in self.journals.pending():
            if session is not None and not self._of_session(key, session):
                continue
            with self._locks_if_free(key) as free:
                if not free:
                    continue
                try:
                    self.recovery.recover(key)
                except RestoreError as error:
                    warnings.warn(str(error), InterruptedRestoreWarning, stacklevel=3)

    def _of_session(self, key: str, session: str) -> bool:
        """True if the journal of ``key`` is of a restore in ``session`` (or cannot be read
        now: recovering it reports why)."""
        try:
            journal = self.journals.read(key)
        except (OSError, CorruptJournalError):
            return True
        return journal is not None and journal.session == session

    def _locks_if_free(self, key: str) -> contextlib.AbstractContextManager[bool]:
        """The locks a restore into the journal's target holds (its directory's lock, and
        its ancestors' shared), taken only if free now. A journal that cannot be read names
        no target: its own lock alone, and ``recover`` reports it."""
        try:
            journal = self.journals.read(key)
        except (OSError, CorruptJournalError):
            journal = None
        if journal is not None:
            real = os.path.realpath(journal.target)
            if target_key(real) == key:
                return self.locks.restoring_if_free(real)
        return self.locks.lock_of_key(key).exclusive_if_free()
