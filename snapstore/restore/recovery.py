"""Finishing or rolling back a restore that was killed, from the journal it left.

A journal whose restore had committed its undo backup is rolled back from it (and the backup
deleted: as far as the target and the undo history are concerned, the killed restore never
happened), keeping first, in a new backup, whatever was changed in the target since; one that
kept no backup is run again to its end. The temp files it left are removed either way.
A restore into a new directory records that directory's inode number in its journal and
puts its target marker in it: if the target's real path does not lead to a directory with
that number holding that marker any more (it is gone, another took its place, or the path
leads elsewhere), nothing is written there and the journal is dropped, with a warning.
Whoever finds a journal holds its target's lock (the guard: ``targets``).
"""

from __future__ import annotations

import contextlib
import os
import stat
import warnings

from snapstore.cyclic_gc import gc_paused
from snapstore.errors import (
    CorruptManifestError,
    InterruptedRestoreWarning,
    RestoreError,
    SnapshotNotFound,
    SnapstoreError,
)
from snapstore.format.names import generated_name
from snapstore.logs import get_logger
from snapstore.models import FileEntry
from snapstore.restore.actions import Action, Plan
from snapstore.restore.backups import UndoBackups
from snapstore.restore.dirhandles import MadeTarget, NotADirectoryPathError, open_made
from snapstore.restore.journal import CorruptJournalError, Journal
from snapstore.restore.plan import make_plan
from snapstore.restore.targetlocks import target_key
from snapstore.restore.writer import TargetWriter

logger = get_logger(__name__)


def _not_written_by_a_restore(action: Action) -> bool:
    """True for a change to something an interrupted restore cannot have left: it renames
    only whole, final files and links into place, and creates directories whose final mode it
    sets last; anything else in the target was there before it, or put there since."""
    if action.current is None:
        return False
    return not (action.operation == "chmod" and action.entry.kind == "dir")


class Recovery:
    """The recovery of interrupted restores: what to do with one journal left behind. The
    caller (the guard, ``snapstore.restore.targets``) holds the target's lock."""

    def __init__(self, writer: TargetWriter, backups: UndoBackups) -> None:
        self.writer = writer
        self.backups = backups
        self.repo = writer.repo
        self.journals = writer.journals

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
        made: MadeTarget | None = None
        if journal.target_inode is None:
            real = _refuse_a_moved_target(journal, key)
        else:
            real = os.path.realpath(journal.target)
            made = _made_target(journal, key, real)
            if made is None:
                warnings.warn(
                    f"a restore of {journal.restoring!r} (session {journal.session!r}) into "
                    f"{journal.target} was interrupted, and the directory it had made is not "
                    "there any more, or no longer holds the restore's marker file (it is "
                    "gone, another took its place, or the path leads elsewhere now): nothing "
                    "is written there, and the interrupted restore is dropped",
                    InterruptedRestoreWarning,
                    stacklevel=2,
                )
                self.journals.remove(key)
                return
        try:
            try:
                with repo.blobs_in_use(), gc_paused():
                    self._recover(journal, key, real, made)
            except (OSError, SnapstoreError) as error:
                raise RestoreError(
                    f"a restore of {journal.restoring!r} (session {journal.session!r}) into "
                    f"{journal.target} was interrupted, and could not be finished or rolled "
                    f"back now: {error}",
                    rolled_back=False,
                ) from error
            self.journals.remove(key)
            if made is not None:  # if this fails or is killed, the marker stays: unread
                with contextlib.suppress(OSError):
                    made.unmark(self.writer.fs, journal.temps.marker)
        finally:
            if made is not None:
                made.close()

    def _recover(self, journal: Journal, key: str, real: str, made: MadeTarget | None) -> None:
        """Roll back or finish the journal's restore in its target, at its real path
        ``real`` (whose key is ``key``): the directory the restore made, held as ``made``,
        if it made one."""
        if not self.writer.remove_temp_files(journal, real, made=made):
            raise RestoreError(
                "temp files it left in the target could not be removed", rolled_back=False
            )
        repo = self.repo
        if journal.backup is None:
            self._finish(journal, key, real, made)
            return
        try:
            saved = repo.catalog.read(journal.session, journal.backup)
        except SnapshotNotFound:
            return  # killed before its backup was committed: it had changed nothing
        plan = self.writer.plan(
            saved, journal.target, None, True, real_target=real, replace_parents=True
        )
        if plan.changes and self._changed_since(journal, plan):
            self._keep_current(journal, plan, journal.backup)
        self.writer.apply_covered(journal, key, plan, keep_special_bits=True)
        repo.delete_backup(journal.session, journal.backup)
        logger.warning(
            "put %s back as it was before an interrupted restore of %r (session %r)",
            journal.target,
            journal.restoring,
            journal.session,
        )

    def _finish(self, journal: Journal, key: str, real: str, made: MadeTarget | None) -> None:
        """Run an interrupted restore that kept no backup again, to its end, in the
        directory it made (``made``, written through its held descriptor) if it made one
        (a target that a restore of an earlier version had not made yet is made now, at
        ``real``, without following links)."""
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
        plan = self.writer.plan(
            manifest, journal.target, paths, journal.keep_special_bits, real_target=real
        )
        if made is not None and plan.target_id != made.identity:
            raise RestoreError(
                "the directory it had made was replaced while it was being finished",
                rolled_back=False,
            )
        if journal.backups and any(_not_written_by_a_restore(a) for a in plan.changes):
            self._keep_current(journal, plan, journal.restoring)
        self.writer.apply_covered(
            journal, key, plan, keep_special_bits=journal.keep_special_bits, made=made
        )
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
        self.backups.commit(journal.session, generated_name(), restoring, plan, paths, recursive)
        self.backups.trim(journal.session)


def _refuse_a_moved_target(journal: Journal, key: str) -> str:
    """The real path of the journal's target; RestoreError unless it still leads to the
    directory its restore wrote into (the journal is named for that real path): after a
    kill, someone may have put a symlink at the target or at a directory above it, and a
    rollback through it would write, and remove, outside the directory. The journal and its
    backup are kept until the path leads there again. (A symlink planted after this look is
    refused when the target is opened: that walks the real path without following links.)"""
    real = os.path.realpath(journal.target)
    if target_key(real) != key:
        raise RestoreError(
            f"a restore of {journal.restoring!r} (session {journal.session!r}) into "
            f"{journal.target} was interrupted, and that path now leads to {real}, not to "
            "the directory the restore wrote into: nothing is written there; its journal and "
            "undo backup are kept until the path leads to that directory again",
            rolled_back=False,
        )
    return real


def _made_target(journal: Journal, key: str, real: str) -> MadeTarget | None:
    """The directory a restore into a new target made, held (``open_made``: its inode
    number cannot be handed out again while it is held), if it is still at the target's
    real path ``real`` (which must still be the one named ``key``), reached without
    following links: a directory with the journal's inode number that holds the restore's
    target marker (looked for through its descriptor). None if it is not there.
    RestoreError if that cannot be looked at now (the journal is kept for the next attempt)."""
    if target_key(real) != key:
        return None
    try:
        made = open_made(real)
    except (FileNotFoundError, NotADirectoryPathError):
        return None
    except OSError as error:
        raise _cannot_look(journal, error) from error
    try:
        if made.identity[1] == journal.target_inode:
            marker = os.stat(journal.temps.marker, dir_fd=made.fd, follow_symlinks=False)
            if stat.S_ISREG(marker.st_mode):
                return made
    except FileNotFoundError:
        pass
    except OSError as error:
        made.close()
        raise _cannot_look(journal, error) from error
    made.close()
    return None


def _cannot_look(journal: Journal, error: OSError) -> RestoreError:
    return RestoreError(
        f"a restore of {journal.restoring!r} (session {journal.session!r}) into "
        f"{journal.target} was interrupted, and the directory it made could not be looked "
        f"at now ({error}); its journal is kept",
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
