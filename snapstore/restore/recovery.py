"""Finishing or rolling back a restore that was killed, from the journal it left.

A journal whose restore had committed its undo backup is rolled back from it (and the backup
deleted: as far as the target and the undo history are concerned, the killed restore never
happened), keeping first, in a new backup, whatever was changed in the target since; one that
kept no backup is run again to its end. The temp files it left are removed either way.
Whoever finds a journal holds its target's lock (see ``job``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import warnings
from typing import TYPE_CHECKING

from snapstore.cyclic_gc import gc_paused
from snapstore.errors import (
    CorruptManifestError,
    InterruptedRestoreWarning,
    RestoreError,
    SnapshotNotFound,
    SnapstoreError,
    UnsafePathError,
)
from snapstore.format.names import generated_name
from snapstore.fs.tempnames import RestoreTemps, new_token
from snapstore.logs import get_logger
from snapstore.models import FileEntry
from snapstore.repo.locks import target_key
from snapstore.restore.actions import Action, Plan
from snapstore.restore.apply import DirHandles, NotADirectoryPathError
from snapstore.restore.journal import CorruptJournalError, Journal
from snapstore.restore.plan import make_plan

logger = get_logger(__name__)

if TYPE_CHECKING:
    from snapstore.restore.job import RestoreJob


def _not_written_by_a_restore(action: Action) -> bool:
    """True for a change to something an interrupted restore cannot have left: it renames
    only whole, final files and links into place, and creates directories whose final mode it
    sets last; anything else in the target was there before it, or put there since."""
    if action.current is None:
        return False
    return not (action.operation == "chmod" and action.entry.kind == "dir")


class Recovery:
    """The recovery of the interrupted restores of one restore job's repository."""

    def __init__(self, job: RestoreJob) -> None:
        self.job = job
        self.repo = job.repo
        self.journals = job.journals

    def recover(self, key: str) -> None:
        """Finish or roll back the interrupted restore whose journal is ``key``, if any. The
        caller holds that target's lock. RestoreError if it cannot be done now."""
        repo = self.repo
        try:
            journal = self.journals.read(key)
        except OSError as error:
            raise RestoreError(
                f"could not read the journal of an interrupted restore ({error}); it is kept, "
                "and its target is not restored into until it can be read",
                rolled_back=False,
            ) from error
        except CorruptJournalError as error:
            warnings.warn(
                f"ignoring the damaged journal of an interrupted restore ({error}); its target "
                "may be partly restored",
                InterruptedRestoreWarning,
                stacklevel=2,
            )
            self.journals.remove(key)
            return
        if journal is None:
            return
        _refuse_a_moved_target(journal, key)
        try:
            with repo.blobs_in_use(), gc_paused():
                self._recover(journal, key)
        except (OSError, SnapstoreError) as error:
            raise RestoreError(
                f"a restore of {journal.restoring!r} (session {journal.session!r}) into "
                f"{journal.target} was interrupted, and could not be finished or rolled back "
                f"now: {error}",
                rolled_back=False,
            ) from error
        self.journals.remove(key)

    def _recover(self, journal: Journal, key: str) -> None:
        if not self.remove_temp_files(journal):
            raise RestoreError(
                "temp files it left in the target could not be removed", rolled_back=False
            )
        repo = self.repo
        if journal.backup is None:
            self._finish(journal, key)
            return
        try:
            saved = repo.catalog.read(journal.session, journal.backup)
        except SnapshotNotFound:
            return  # killed before its backup was committed: it had changed nothing
        plan = self.job.plan(saved, journal.target, None, True, replace_parents=True)
        if plan.changes and self._changed_since(journal, plan):
            self._keep_current(journal, plan, journal.backup)
        self.apply_covered(journal, key, plan, keep_special_bits=True)
        repo.delete_backup(journal.session, journal.backup)
        logger.warning(
            "put %s back as it was before an interrupted restore of %r (session %r)",
            journal.target,
            journal.restoring,
            journal.session,
        )

    def _finish(self, journal: Journal, key: str) -> None:
        """Run an interrupted restore that kept no backup again, to its end."""
        repo = self.repo
        try:
            manifest = repo.files_manifest(journal.session, journal.restoring)
        except (SnapshotNotFound, CorruptManifestError):
            warnings.warn(
                f"a restore of {journal.restoring!r} into {journal.target} was interrupted and "
                "that snapshot is gone: the target may be partly restored",
                InterruptedRestoreWarning,
                stacklevel=4,
            )
            return
        paths = None if journal.paths is None else list(journal.paths)
        plan = self.job.plan(manifest, journal.target, paths, journal.keep_special_bits)
        if journal.backups and any(_not_written_by_a_restore(a) for a in plan.changes):
            self._keep_current(journal, plan, journal.restoring)
        self.apply_covered(journal, key, plan, keep_special_bits=journal.keep_special_bits)
        logger.warning(
            "finished an interrupted restore of %r (session %r) into %s",
            journal.restoring,
            journal.session,
            journal.target,
        )

    def _changed_since(self, journal: Journal, rollback: Plan) -> bool:
        """True if some path the rollback would change holds neither its state before the
        interrupted restore nor the one that restore was writing (someone changed it since).

        A directory the rollback removes was made by the interrupted restore: everything in
        it must be what that restore wrote, so its whole subtree is compared, and anything
        else found in it counts as changed."""
        try:
            restoring = self.repo.files_manifest(journal.session, journal.restoring)
        except (SnapshotNotFound, CorruptManifestError):
            return True
        recorded = {entry.path: entry for entry in self.repo.trees.entries(restoring)}
        changed = [action.entry.path for action in rollback.changes]
        if any(
            action.entry.path not in recorded
            and _not_written_by_a_restore(action)
            and os.path.lexists(os.path.join(journal.target, action.entry.path))
            for action in rollback.changes
        ):
            return True
        cleared = tuple(
            action.entry.path + "/"
            for action in rollback.changes
            if action.clears_existing and action.current == "dir"
        )
        to_check = {path for path in changed if path in recorded}
        if cleared:
            to_check.update(path for path in recorded if path.startswith(cleared))
        try:
            check = make_plan(
                [recorded[path] for path in to_check],
                journal.target,
                complete=[
                    path
                    for path in to_check
                    if recorded[path].kind == "dir" and (path + "/").startswith(cleared)
                ],
                keep_special_bits=journal.keep_special_bits,
                links=False,
            )
        except SnapstoreError:
            return True
        before = {action.entry.path: action.entry for action in rollback.changes}
        return any(
            not _still_as_restoring(action)
            and not _still_as_before(before.get(action.entry.path), journal.target)
            for action in check.actions
        )

    def _keep_current(self, journal: Journal, plan: Plan, restoring: str) -> None:
        """Keep what the target holds now at the paths ``plan`` changes, as a new backup
        (taken before restoring ``restoring``)."""
        paths, recursive = plan.backup_paths()
        self.job.commit_backup(
            journal.session, generated_name(), restoring, journal.target, paths, recursive
        )
        self.job.trim_backups(journal.session)

    def cover(self, journal: Journal, key: str, plan: Plan) -> Journal:
        """The journal of a restore about to apply ``plan`` (its rollback, or its finishing):
        with a token (a journal of a version before tokens gets one) and listing every
        directory the plan writes into, written durably first if that changed it, so that
        if this is killed too, the next recovery finds every temp file it leaves."""
        dirs = sorted(set(journal.dirs).union(plan.written_dirs()))
        if journal.token is not None and dirs == sorted(journal.dirs):
            return journal
        covering = dataclasses.replace(
            journal, dirs=tuple(dirs), token=journal.token or new_token()
        )
        self.journals.write(key, covering)
        return covering

    def apply_covered(
        self, journal: Journal, key: str, plan: Plan, *, keep_special_bits: bool
    ) -> Journal:
        """Apply ``plan`` (a rollback or a finishing) once the journal covers it (``cover``);
        returns the journal as it now is."""
        covered = self.cover(journal, key, plan)
        self.job.apply(plan, covered.temps, keep_special_bits)
        return covered

    def remove_temp_files(self, journal: Journal) -> bool:
        """Remove the temp files the journal's restore may have left beside its
        destinations (only its own: see ``snapstore.fs.tempnames``); False if some could not
        be removed, or the target could not be looked at. A journalled path that is no
        directory now (a file, a symlink, a FIFO: the restore had not made it one yet, or it
        was replaced since) holds no temp file of the restore: it is clean."""
        if not os.path.isdir(journal.target):
            return True
        try:
            handles = DirHandles(self.job.fs, journal.target, durable=False)
        except (OSError, UnsafePathError):
            return False
        clean = True
        try:
            for relative_dir in journal.dirs:
                clean = self._remove_temps_in(handles, relative_dir, journal.temps) and clean
        finally:
            handles.close()
        return clean

    def _remove_temps_in(self, handles: DirHandles, relative_dir: str, temps: RestoreTemps) -> bool:
        """Remove the restore's temp files (never a directory) in one directory."""
        try:
            fd = handles.get(relative_dir)
            with os.scandir(fd) as listing:
                found = [
                    entry.name
                    for entry in listing
                    if temps.made(entry.name) and not entry.is_dir(follow_symlinks=False)
                ]
            for name in found:
                with contextlib.suppress(FileNotFoundError):
                    self.job.fs.unlink(name, dir_fd=fd)
        except (FileNotFoundError, NotADirectoryPathError):
            return True
        except OSError:
            return False
        return True

    def recover_all(self, session: str | None = None) -> None:
        """Recover every interrupted restore (of ``session``, if given) whose target is not
        locked by a restore running now; one that cannot be recovered now is left, with a
        warning. At open, and before an undo chooses the backup to restore."""
        for key in self.journals.pending():
            if session is not None and not self._of_session(key, session):
                continue
            with self._target_lock_if_free(key) as free:
                if not free:
                    continue
                try:
                    self.recover(key)
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

    def _target_lock_if_free(self, key: str) -> contextlib.AbstractContextManager[bool]:
        """The locks a restore into the journal's target holds (its directory's lock, and
        its ancestors' shared), taken only if free now. A journal that cannot be read names
        no target: its own lock alone, and ``recover`` reports it."""
        locks = self.repo.target_locks
        try:
            journal = self.journals.read(key)
        except (OSError, CorruptJournalError):
            journal = None
        if journal is not None:
            real = os.path.realpath(journal.target)
            if target_key(real) == key:
                return locks.restoring_if_free(real)
        return locks.lock_of_key(key).exclusive_if_free()


def _refuse_a_moved_target(journal: Journal, key: str) -> None:
    """RestoreError unless the journal's target still leads to the directory its restore
    wrote into (the journal is named for that directory's real path): after a kill, someone
    may have put a symlink at the target or at a directory above it, and a rollback through
    it would write, and remove, outside the directory. The journal and its backup are kept
    until the path leads there again."""
    real = os.path.realpath(journal.target)
    if target_key(real) != key:
        raise RestoreError(
            f"a restore of {journal.restoring!r} (session {journal.session!r}) into "
            f"{journal.target} was interrupted, and that path now leads to {real}, not to "
            "the directory the restore wrote into: nothing is written there; its journal and "
            "undo backup are kept until the path leads to that directory again",
            rolled_back=False,
        )


def _still_as_before(entry: FileEntry | None, target: str) -> bool:
    """Whether a path the rollback changes holds what it held before the interrupted
    restore (``entry``, from its backup): a member of a hard-link group the restore had not
    yet renamed into place is written again by the rollback only to make the group one file."""
    if entry is None:
        return False
    try:
        check = make_plan([entry], target, keep_special_bits=True, links=False)
    except SnapstoreError:
        return False
    return all(action.operation == "unchanged" for action in check.actions)


def _still_as_restoring(action: Action) -> bool:
    """Whether a path holds what the interrupted restore was writing there, or nothing yet
    (it had not got that far; nothing there is nothing to lose). A directory it made but
    had not yet given its mode (modes are set last) counts: a mode holds no data."""
    if action.operation == "chmod" and action.entry.kind == "dir":
        return True
    return action.operation == "unchanged" or action.current is None
