"""A whole restore: target lock, undo backup, journal, apply, rollback, recovery, undo history.

The order, and why:

1. Take the target's lock (one restore into a target at a time; creates of it wait).
2. Recover an interrupted restore of the same target, if its journal is there.
3. Under the shared gc lock (no blob may vanish), read the snapshot and plan.
4. Write the journal (durably) naming the undo backup about to be taken.
5. Commit the undo backup: the current state of every path the plan changes.
6. Apply the plan. On failure, put the target back from the backup and drop the backup.
7. Trim the session's undo history to its depth, and remove the journal (durably).

A restore killed at any point leaves its journal. Recovery then puts the target back from
the backup, if one was committed (a killed restore never happened, as far as the target and
the undo history are concerned), keeping first whatever was changed in the target since in a
new backup; a restore that took no backup (a new target, or ``backup=False``) is finished.
"""

from __future__ import annotations

import contextlib
import os
import time
import warnings
from typing import TYPE_CHECKING

from snapstore.cyclic_gc import gc_paused
from snapstore.errors import (
    CorruptManifestError,
    InterruptedRestoreWarning,
    ReadOnlyStoreError,
    RestoreError,
    SnapshotNotFound,
    SnapstoreError,
    UnsafePathError,
)
from snapstore.format.manifest import Manifest
from snapstore.format.names import generated_name
from snapstore.fs.durable import TEMP_PREFIX
from snapstore.models import RestoreReport
from snapstore.repo.layout import is_store_root
from snapstore.repo.locks import target_key
from snapstore.restore.apply import DirHandles, Progress, apply_plan, remove_tree
from snapstore.restore.journal import CorruptJournalError, Journal
from snapstore.restore.plan import Action, Keep, Plan, complete_dirs, make_plan, select_entries
from snapstore.worktree.statcache import StatCache

if TYPE_CHECKING:
    from snapstore.store import SnapStore


def restore_report(plan: Plan, dry_run: bool) -> RestoreReport:
    """What a plan writes, removes and leaves alone, as the caller sees it."""
    report = RestoreReport(dry_run=dry_run, target=plan.target, kept=list(plan.kept))
    for action in plan.actions:
        path = action.entry.path
        if action.operation == "unchanged":
            report.unchanged.append(path)
        elif action.operation == "remove":
            report.removed.append(path)
        else:
            report.written.append(path)
    return report


def refuse_store_directory(store_root: str | None, real_dir: str, what: str) -> None:
    """UnsafePathError if ``real_dir`` is, or lies in, a storage root (this store's, if it
    is on this machine, or any other directory holding a snapstore FORMAT marker)."""
    if store_root is not None:
        own = os.path.realpath(store_root)
        if real_dir == own or real_dir.startswith(own + os.sep):
            raise UnsafePathError(f"{what} {real_dir} lies in the snapstore root {own}")
    directory = real_dir
    while True:
        if is_store_root(directory):
            raise UnsafePathError(f"{what} {real_dir} lies in the snapstore root {directory}")
        parent = os.path.dirname(directory)
        if parent == directory:
            return
        directory = parent


def _not_written_by_a_restore(action: Action) -> bool:
    """True for a change to something an interrupted restore cannot have left: it renames
    only whole, final files and links into place, and creates directories whose final mode it
    sets last; anything else in the target was there before it, or put there since."""
    if action.current is None:
        return False
    return not (action.operation == "chmod" and action.entry.kind == "dir")


class RestoreJob:
    """Restores, undos and the recovery of interrupted restores, for one store."""

    def __init__(self, store: SnapStore) -> None:
        self.store = store

    # ------------------------------------------------------------------ planning

    def plan(
        self,
        manifest: Manifest,
        target_dir: str,
        paths: list[str] | None,
        keep_special_bits: bool,
    ) -> Plan:
        """What restoring (part of) a snapshot into ``target_dir`` changes; writes nothing."""
        store = self.store
        info = manifest.info
        selected = select_entries(manifest.entries, paths)
        cache = StatCache(store.backend, target_dir, time.time_ns())
        return make_plan(
            selected,
            target_dir,
            complete=complete_dirs(selected, info.roots, whole_snapshot=paths is None),
            keep=Keep(
                store_roots=store.own_roots(),
                skipped=frozenset(skipped.path for skipped in info.skipped),
                excluded=store.exclusion_of(info),
            ),
            keep_special_bits=keep_special_bits,
            known_digest=cache.lookup,
        )

    def _planned(
        self,
        session: str,
        name: str,
        target_dir: str,
        paths: list[str] | None,
        keep_special_bits: bool,
    ) -> Plan:
        """Read the snapshot (under the gc lock: its blobs cannot go) and plan; an I/O error
        while planning is a RestoreError (nothing was changed)."""
        manifest = self.store.files_manifest(session, name)
        try:
            return self.plan(manifest, target_dir, paths, keep_special_bits)
        except OSError as error:
            raise RestoreError(
                f"could not plan the restore of {name!r} (session {session!r}) into "
                f"{target_dir}: {error}; nothing was changed",
                rolled_back=True,
            ) from error

    def _target(self, session: str, name: str, target: str | None) -> tuple[str, str]:
        """The target directory (default: the snapshot's base dir) and its real path, which
        must not be or lie in a storage root."""
        if target is None:
            target = self.store.files_manifest(session, name).info.base_dir
        target_dir = os.path.abspath(target)
        real = os.path.realpath(target_dir)
        local_root = self.store.backend.properties.local_root
        refuse_store_directory(local_root, real, "restore target")
        return target_dir, real

    def dry_plan(
        self,
        session: str,
        name: str,
        target: str | None,
        paths: list[str] | None = None,
        keep_special_bits: bool = False,
    ) -> Plan:
        """The plan a restore would carry out now; writes nothing and takes no target lock."""
        target_dir, _ = self._target(session, name, target)
        with self.store.blobs_in_use(), gc_paused():
            return self._planned(session, name, target_dir, paths, keep_special_bits)

    # ------------------------------------------------------------------ restore

    def run(
        self,
        session: str,
        name: str,
        target: str | None,
        *,
        paths: list[str] | None,
        dry_run: bool,
        backup: bool,
        keep_special_bits: bool,
        progress: Progress | None,
    ) -> RestoreReport:
        """Restore (session, name) into ``target`` (default: the snapshot's base dir)."""
        store = self.store
        if dry_run:
            plan = self.dry_plan(session, name, target, paths, keep_special_bits)
            return restore_report(plan, dry_run=True)
        target_dir, real = self._target(session, name, target)
        if store.read_only:
            return self._run_unrecorded(
                session, name, target_dir, paths, backup, keep_special_bits, progress
            )
        with store.target_locks.restoring(real):
            key = target_key(real)
            self.recover(key)
            with store.blobs_in_use(), gc_paused():
                plan = self._planned(session, name, target_dir, paths, keep_special_bits)
                report = restore_report(plan, dry_run=False)
                if not plan.changes:
                    return report
                existed = os.path.isdir(target_dir)
                journal = Journal(
                    target=target_dir,
                    session=session,
                    restoring=name,
                    backup=generated_name() if backup and existed else None,
                    backups=backup,
                    paths=None if paths is None else tuple(paths),
                    dirs=tuple(plan.written_dirs()),
                    keep_special_bits=keep_special_bits,
                    started_ns=time.time_ns(),
                )
                store.journals.write(key, journal)
                if journal.backup is not None:
                    self._keep_backup(journal, key, plan)
                    report.backup = journal.backup
                try:
                    apply_plan(
                        plan,
                        store.blobs,
                        store.fs,
                        durable=store.durable,
                        keep_special_bits=keep_special_bits,
                        progress=progress,
                    )
                    store.journals.remove(key)
                except BaseException as error:
                    self._after_failure(journal, key, existed, error)
                if journal.backup is not None:
                    store.trim_backups(session)
                return report

    def _run_unrecorded(
        self,
        session: str,
        name: str,
        target_dir: str,
        paths: list[str] | None,
        backup: bool,
        keep_special_bits: bool,
        progress: Progress | None,
    ) -> RestoreReport:
        """A restore from a store this process can only read: no backup can be kept, no
        journal written and no target lock created there, so only ``backup=False`` is
        allowed, and a restore killed part-way is neither finished nor rolled back."""
        if backup:
            raise ReadOnlyStoreError(
                f"cannot keep an undo backup: the store at {self.store.root} is read-only for "
                "this process (restore with backup=False to write the target anyway)"
            )
        with self.store.blobs_in_use(), gc_paused():
            plan = self._planned(session, name, target_dir, paths, keep_special_bits)
            report = restore_report(plan, dry_run=False)
            if not plan.changes:
                return report
            try:
                apply_plan(
                    plan,
                    self.store.blobs,
                    self.store.fs,
                    durable=self.store.durable,
                    keep_special_bits=keep_special_bits,
                    progress=progress,
                )
            except OSError as error:
                raise RestoreError(
                    f"restore of {name!r} (session {session!r}) into {target_dir} failed: "
                    f"{error}; no backup was kept (read-only store), so the target may be "
                    "partly restored",
                    rolled_back=False,
                ) from error
            return report

    def _keep_backup(self, journal: Journal, key: str, plan: Plan) -> None:
        """Commit the undo backup of what the plan is about to change; if that fails, nothing
        was changed and the journal goes."""
        assert journal.backup is not None
        paths, recursive = plan.backup_paths()
        try:
            self.store.commit_backup(
                journal.session, journal.backup, journal.restoring, journal.target, paths, recursive
            )
        except BaseException as error:
            self.store.journals.remove(key)
            if isinstance(error, OSError):
                raise RestoreError(
                    f"could not keep a backup of what restoring {journal.restoring!r} into "
                    f"{journal.target} would change: {error}; nothing was changed",
                    rolled_back=True,
                ) from error
            raise

    def _after_failure(
        self, journal: Journal, key: str, existed: bool, error: BaseException
    ) -> None:
        """After the plan failed part-way: put the target back and raise RestoreError."""
        store = self.store
        failed = (
            f"restore of {journal.restoring!r} (session {journal.session!r}) into "
            f"{journal.target} failed: {error}"
        )
        if not existed:
            self._remove_new_target(journal.target, failed, error)
            self._drop_journal(key)
            raise RestoreError(
                f"{failed}; the directory it had created was removed", rolled_back=True
            ) from error
        if journal.backup is None:
            self._drop_journal(key)
            raise RestoreError(
                f"{failed}; no backup was kept (backup=False), so the target may be partly "
                "restored",
                rolled_back=False,
            ) from error
        try:
            self._roll_back(journal)
            clean = self._remove_temp_files(journal)
        except BaseException as rollback_error:
            with contextlib.suppress(OSError):  # the failure may have been its removal
                store.journals.write(key, journal)
            raise RestoreError(
                f"{failed}; rolling back also failed ({rollback_error}); the previous state is "
                f"kept in the undo backup {journal.backup!r} of session {journal.session!r}, and "
                "the next restore into this target (or opening the store) tries again",
                rolled_back=False,
            ) from error
        if clean:  # else the journal stays, so that the next recovery removes them
            self._drop_journal(key)
        raise RestoreError(f"{failed}; the target was put back as it was", rolled_back=True) from (
            error
        )

    def _drop_journal(self, key: str) -> None:
        """Remove the journal of a restore that failed and was dealt with. If that fails too
        (a second fault), the journal stays for the next recovery: after a rollback it finds
        the backup gone and only removes the journal."""
        with contextlib.suppress(OSError):
            self.store.journals.remove(key)

    def _remove_new_target(self, target_dir: str, failed: str, error: BaseException) -> None:
        if not os.path.lexists(target_dir):
            return
        try:
            parent_fd = os.open(os.path.dirname(target_dir), os.O_RDONLY | os.O_DIRECTORY)
            try:
                remove_tree(self.store.fs, parent_fd, os.path.basename(target_dir))
            finally:
                os.close(parent_fd)
        except OSError as cleanup_error:
            raise RestoreError(
                f"{failed}; removing the partly restored new directory also failed "
                f"({cleanup_error})",
                rolled_back=False,
            ) from error

    def _roll_back(self, journal: Journal) -> None:
        """Put the target back from the journal's backup, then drop that backup (the target
        holds its state again, so the undo history is as it was before the restore)."""
        assert journal.backup is not None
        store = self.store
        saved = store.catalog.read(journal.session, journal.backup)
        plan = self.plan(saved, journal.target, None, True)
        apply_plan(plan, store.blobs, store.fs, durable=store.durable, keep_special_bits=True)
        store.delete_backup(journal.session, journal.backup)

    # ------------------------------------------------------------------ recovery

    def recover(self, key: str) -> None:
        """Finish or roll back the interrupted restore whose journal is ``key``, if any. The
        caller holds that target's lock. RestoreError if it cannot be done now."""
        store = self.store
        try:
            journal = store.journals.read(key)
        except CorruptJournalError as error:
            warnings.warn(
                f"ignoring the damaged journal of an interrupted restore ({error}); its target "
                "may be partly restored",
                InterruptedRestoreWarning,
                stacklevel=2,
            )
            store.journals.remove(key)
            return
        if journal is None:
            return
        try:
            with store.blobs_in_use(), gc_paused():
                self._recover(journal)
        except (OSError, SnapstoreError) as error:
            raise RestoreError(
                f"a restore of {journal.restoring!r} (session {journal.session!r}) into "
                f"{journal.target} was interrupted, and could not be finished or rolled back "
                f"now: {error}",
                rolled_back=False,
            ) from error
        store.journals.remove(key)

    def _recover(self, journal: Journal) -> None:
        if not self._remove_temp_files(journal):
            raise RestoreError(
                "temp files it left in the target could not be removed", rolled_back=False
            )
        store = self.store
        if journal.backup is None:
            self._finish(journal)
            return
        try:
            saved = store.catalog.read(journal.session, journal.backup)
        except SnapshotNotFound:
            return  # killed before its backup was committed: it had changed nothing
        plan = self.plan(saved, journal.target, None, True)
        if plan.changes and self._changed_since(journal, plan):
            self._keep_current(journal, plan, journal.backup)
        apply_plan(plan, store.blobs, store.fs, durable=store.durable, keep_special_bits=True)
        store.delete_backup(journal.session, journal.backup)

    def _finish(self, journal: Journal) -> None:
        """Run an interrupted restore that kept no backup again, to its end."""
        store = self.store
        try:
            manifest = store.files_manifest(journal.session, journal.restoring)
        except (SnapshotNotFound, CorruptManifestError):
            warnings.warn(
                f"a restore of {journal.restoring!r} into {journal.target} was interrupted and "
                "that snapshot is gone: the target may be partly restored",
                InterruptedRestoreWarning,
                stacklevel=4,
            )
            return
        paths = None if journal.paths is None else list(journal.paths)
        plan = self.plan(manifest, journal.target, paths, journal.keep_special_bits)
        if journal.backups and any(_not_written_by_a_restore(a) for a in plan.changes):
            self._keep_current(journal, plan, journal.restoring)
        apply_plan(
            plan,
            store.blobs,
            store.fs,
            durable=store.durable,
            keep_special_bits=journal.keep_special_bits,
        )

    def _changed_since(self, journal: Journal, rollback: Plan) -> bool:
        """True if some path the rollback would change holds neither its state before the
        interrupted restore nor the one that restore was writing (someone changed it since)."""
        try:
            restoring = self.store.files_manifest(journal.session, journal.restoring)
        except (SnapshotNotFound, CorruptManifestError):
            return True
        recorded = {entry.path: entry for entry in restoring.entries}
        changed = [action.entry.path for action in rollback.changes]
        if any(
            path not in recorded and os.path.lexists(os.path.join(journal.target, path))
            for path in changed
        ):
            return True
        check = make_plan(
            [recorded[path] for path in changed if path in recorded],
            journal.target,
            keep_special_bits=journal.keep_special_bits,
        )
        return any(action.operation != "unchanged" for action in check.actions)

    def _keep_current(self, journal: Journal, plan: Plan, restoring: str) -> None:
        """Keep what the target holds now at the paths ``plan`` changes, as a new backup
        (taken before restoring ``restoring``)."""
        paths, recursive = plan.backup_paths()
        store = self.store
        store.commit_backup(
            journal.session, generated_name(), restoring, journal.target, paths, recursive
        )
        store.trim_backups(journal.session)

    def _remove_temp_files(self, journal: Journal) -> bool:
        """Remove the temp files a restore may have left beside its destinations; False if
        some could not be removed."""
        if not os.path.isdir(journal.target):
            return True
        clean = True
        handles = DirHandles(self.store.fs, journal.target, durable=False)
        try:
            for relative_dir in journal.dirs:
                try:
                    fd = handles.get(relative_dir)
                    for name in os.listdir(fd):
                        if name.startswith(TEMP_PREFIX):
                            self.store.fs.unlink(name, dir_fd=fd)
                except FileNotFoundError:
                    continue
                except OSError:
                    clean = False
        finally:
            handles.close()
        return clean

    def recover_all(self) -> None:
        """At open: recover every interrupted restore whose target is not locked by a restore
        running now; one that cannot be recovered now is left, with a warning."""
        store = self.store
        for key in store.journals.pending():
            with store.target_locks.lock_of_key(key).exclusive_if_free() as free:
                if not free:
                    continue
                try:
                    self.recover(key)
                except RestoreError as error:
                    warnings.warn(str(error), InterruptedRestoreWarning, stacklevel=3)
