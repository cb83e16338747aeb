"""A whole restore, and an undo: the target, the plan, and the journal that describes it,
carried out under the guard of target directories (``targets``: lock, recovery, undo
backup, rollback).

The order, and why (steps 1 and 2 are the guard's ``restoring``, 4 to 7 its ``change``):

1. Take the target's lock (one restore into a target at a time; creates of it wait).
2. Recover an interrupted restore of the same target, if its journal is there.
3. Under the shared gc lock (no blob may vanish), read the snapshot and plan.
4. Write the journal (durably) naming the undo backup about to be taken. A target that is
   not there is made just before, with the restore's target marker in it (flushed), and
   the journal records its inode number: a recovery writes only into that directory.
5. Commit the undo backup: the current state of every path the plan changes.
6. Apply the plan. On failure, put the target back from the backup and drop the backup.
7. Remove the journal (durably), then trim the session's undo history to its depth (never
   deleting a backup that a pending journal of another target names).

A restore killed at any point leaves its journal. Recovery then puts the target back from
the backup, if one was committed (a killed restore never happened, as far as the target and
the undo history are concerned), keeping first whatever was changed in the target since in a
new backup; a restore that took no backup (a new target, or ``backup=False``) is finished
(a new target only if it is still the directory the restore made). Killed between making a
new target and writing its journal, a restore leaves that directory, empty but for its
marker, and no journal.
"""

from __future__ import annotations

import os
import time

from snapstore.backend.layout import refuse_store_directory
from snapstore.cyclic_gc import gc_paused
from snapstore.errors import (
    ReadOnlyStoreError,
    RestoreError,
    SnapshotNotFound,
    UnsafePathError,
)
from snapstore.format.names import generated_name
from snapstore.fs.seam import FileSystem
from snapstore.fs.tempnames import RestoreTemps, new_token
from snapstore.models import RestoreReport
from snapstore.repo.repository import Repository
from snapstore.restore.actions import Plan
from snapstore.restore.apply import Progress
from snapstore.restore.journal import Journal
from snapstore.restore.rollback import remove_made_target
from snapstore.restore.targets import TargetGuard

UNDO_CHOICES = 3
"""How many times an undo chooses the newest backup again when the one it chose went."""


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


class RestoreJob:
    """Restores and undos into the work tree from one repository, through one guard of
    target directories (``guard``, which creates share)."""

    def __init__(
        self,
        repo: Repository,
        fs: FileSystem,
        *,
        durable: bool,
        undo_depth: int,
        guard: TargetGuard | None = None,
    ) -> None:
        self.repo = repo
        self.guard = guard or TargetGuard(repo, fs, durable=durable, undo_depth=undo_depth)

    # ------------------------------------------------------------------ planning

    def _planned(
        self,
        session: str,
        name: str,
        target_dir: str,
        real: str,
        paths: list[str] | None,
        keep_special_bits: bool,
    ) -> Plan:
        """Read the snapshot (under the gc lock: its blobs cannot go) and plan, to be applied
        at the target's real path ``real``; an I/O error while planning is a RestoreError
        (nothing was changed)."""
        manifest = self.repo.files_manifest(session, name)
        try:
            return self.guard.writer.plan(
                manifest, target_dir, paths, keep_special_bits, real_target=real
            )
        except OSError as error:
            raise RestoreError(
                f"could not plan the restore of {name!r} (session {session!r}) into "
                f"{target_dir}: {error}; nothing was changed",
                rolled_back=True,
            ) from error

    def _target(self, session: str, name: str, target: str | None) -> tuple[str, str]:
        """The target directory (default: the snapshot's base dir) and its real path, which
        must not be or lie in a storage root. UnsafePathError, before anything is written,
        for a path that is there but no directory (a file, a dangling symlink) or that is
        not valid UTF-8 (the journal could not name it)."""
        if target is None:
            target = self.repo.files_header(session, name).base_dir
        target_dir = os.path.abspath(target)
        try:
            target_dir.encode("utf-8")
        except UnicodeEncodeError:
            raise UnsafePathError(f"restore target {target_dir!r} is not valid UTF-8") from None
        if "\x00" in target_dir:
            raise UnsafePathError(f"restore target {target_dir!r} contains a NUL byte")
        if os.path.lexists(target_dir) and not os.path.isdir(target_dir):
            raise UnsafePathError(f"restore target {target_dir} is there but is no directory")
        real = os.path.realpath(target_dir)
        local_root = self.repo.backend.properties.local_root
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
        target_dir, real = self._target(session, name, target)
        with self.repo.blobs_in_use(), gc_paused():
            return self._planned(session, name, target_dir, real, paths, keep_special_bits)

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
        repo = self.repo
        if dry_run:
            plan = self.dry_plan(session, name, target, paths, keep_special_bits)
            return restore_report(plan, dry_run=True)
        target_dir, real = self._target(session, name, target)
        if repo.read_only:
            return self._run_unrecorded(
                session, name, target_dir, real, paths, backup, keep_special_bits, progress
            )
        with self.guard.restoring(real) as key, repo.blobs_in_use(), gc_paused():
            plan = self._planned(session, name, target_dir, real, paths, keep_special_bits)
            report = restore_report(plan, dry_run=False)
            if not plan.changes:
                return report
            existed = plan.target_id is not None  # the directory the plan looked at
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
                token=new_token(),
            )
            self.guard.change(key, journal, plan, existed=existed, progress=progress)
            report.backup = journal.backup
            return report

    def undo(
        self,
        session: str,
        backup: str | None,
        target: str | None,
        *,
        dry_run: bool,
        progress: Progress | None,
    ) -> RestoreReport:
        """Restore the session's newest undo backup (or the one named ``backup``): see
        ``SnapStore.undo``. The session's interrupted restores are recovered before the
        backup is chosen (a killed restore's backup is deleted by its rollback, and an undo
        must never pick it); if the chosen backup still goes before it is read (a restore
        running in another process failed and rolled back), the newest is chosen again."""
        if not self.repo.read_only and not dry_run:
            self.guard.recover_all(session)
        attempts = 0
        while True:
            found = [info.name for info in self.repo.backups(session)]
            if backup is not None and backup not in found:  # never a selector, a checkpoint
                raise SnapshotNotFound(session, backup, what="undo backup")
            if not found:
                raise SnapshotNotFound(session, "", what="undo backup")
            chosen = backup or found[-1]
            try:
                return self.run(
                    session,
                    chosen,
                    target,
                    paths=None,
                    dry_run=dry_run,
                    backup=True,
                    keep_special_bits=True,
                    progress=progress,
                )
            except SnapshotNotFound:
                attempts += 1
                gone = chosen not in {info.name for info in self.repo.backups(session)}
                if backup is not None or not gone or attempts == UNDO_CHOICES:
                    raise

    def _run_unrecorded(
        self,
        session: str,
        name: str,
        target_dir: str,
        real: str,
        paths: list[str] | None,
        backup: bool,
        keep_special_bits: bool,
        progress: Progress | None,
    ) -> RestoreReport:
        """A restore from a store this process can only read: no backup can be kept, no
        journal written and no target lock created there, so only ``backup=False`` is
        allowed, and a restore killed part-way is neither finished nor rolled back. A new
        target is made at ``real`` as by any restore, without following links (a failure
        to make it is raised as it is: nothing was written), and removed again whatever
        makes the restore fail part-way (then RestoreError, or the interrupt itself)."""
        if backup:
            raise ReadOnlyStoreError(
                f"cannot keep an undo backup: the store at {self.repo.root} is read-only for "
                "this process (restore with backup=False to write the target anyway)"
            )
        with self.repo.blobs_in_use(), gc_paused():
            plan = self._planned(session, name, target_dir, real, paths, keep_special_bits)
            report = restore_report(plan, dry_run=False)
            if not plan.changes:
                return report
            writer = self.guard.writer
            made = writer.make_target(plan) if plan.new_target else None
            try:
                temps = RestoreTemps(new_token())
                writer.apply(plan, temps, keep_special_bits, progress, made=made)
            except BaseException as error:
                failed = (
                    f"restore of {name!r} (session {session!r}) into {target_dir} failed: {error}"
                )
                if made is not None:
                    remove_made_target(
                        writer, made, failed, error, left=lambda: "it may be partly restored"
                    )
                    if not isinstance(error, Exception):  # Ctrl-C: the target is gone; go on
                        raise
                    raise RestoreError(
                        f"{failed}; the directory it had created was removed", rolled_back=True
                    ) from error
                if not isinstance(error, OSError):
                    raise
                raise RestoreError(
                    f"{failed}; no backup was kept (read-only store), so the target may be "
                    "partly restored",
                    rolled_back=False,
                ) from error
            finally:
                if made is not None:
                    made.close()
            return report
