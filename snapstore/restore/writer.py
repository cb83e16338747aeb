"""Writing into one target directory under a journal: plan, apply, clean up temp files.

What a restore, its rollback after a failure and its recovery after a kill all do to a
target, and do the same way: plan a snapshot into it (``plan``), carry the plan out through
the I/O seam with the journal's temp names (``apply``), first making the journal list every
directory the plan writes into (``apply_covered``), and remove the temp files a journalled
restore left (``remove_temp_files``). When and under which lock is the guard's
(``snapstore.restore.targets``).
"""

from __future__ import annotations

import contextlib
import os
import time

from snapstore.errors import UnsafePathError
from snapstore.format.manifest import Manifest
from snapstore.fs.seam import FileSystem
from snapstore.fs.tempnames import RestoreTemps, new_token
from snapstore.models import SnapshotInfo
from snapstore.repo.loose import BlobSource
from snapstore.repo.repository import Repository
from snapstore.restore.actions import Excluded, Keep, KnownDigest, Plan
from snapstore.restore.apply import Progress, apply_plan, plan_reads
from snapstore.restore.dirhandles import (
    DirHandles,
    MadeTarget,
    NotADirectoryPathError,
    make_target,
)
from snapstore.restore.flushes import RestoreFlushes
from snapstore.restore.journal import Journal, JournalDir
from snapstore.restore.plan import complete_dirs, make_plan
from snapstore.worktree.excludes import Matcher


def exclusion_of(info: SnapshotInfo) -> Excluded | None:
    """What a restore of the snapshot ``info`` must leave alone as excluded: what its
    recorded exclude rules match."""
    return Matcher(info.excludes) if info.excludes else None


def _known_digests(repo: Repository, target_dir: str) -> KnownDigest | None:
    """The digests the stat cache of ``target_dir`` vouches for (so that unchanged files
    are not hashed again); None for a target that is not there, which holds no file to
    vouch for (nor is the cache read, or its code imported)."""
    if not os.path.isdir(target_dir):
        return None
    from snapstore.worktree.statcache import StatCache

    return StatCache(repo.backend, target_dir, time.time_ns()).lookup


class TargetWriter:
    """Plans and writes into target directories from one repository, through one I/O seam."""

    def __init__(
        self, repo: Repository, fs: FileSystem, journals: JournalDir, *, durable: bool
    ) -> None:
        self.repo = repo
        self.fs = fs
        self.journals = journals
        self.durable = durable

    def plan(
        self,
        manifest: Manifest,
        target_dir: str,
        paths: list[str] | None,
        keep_special_bits: bool,
        *,
        real_target: str,
        replace_parents: bool = False,
    ) -> Plan:
        """What restoring (part of) a snapshot into ``target_dir`` changes; writes nothing.
        ``real_target``: its real path, as locked (``Plan.real_target``); ``replace_parents``:
        see ``make_plan`` (a recovery's rollback)."""
        repo = self.repo
        info = manifest.info
        selected = repo.trees.select(manifest, paths)
        return make_plan(
            selected,
            target_dir,
            complete=complete_dirs(selected, info.roots, whole_snapshot=paths is None),
            keep=Keep(
                store_roots=repo.own_roots(),
                skipped=frozenset(skipped.path for skipped in info.skipped),
                excluded=exclusion_of(info),
            ),
            keep_special_bits=keep_special_bits,
            known_digest=_known_digests(repo, target_dir),
            replace_parents=replace_parents,
            real_target=real_target,
        )

    def make_target(self, plan: Plan) -> MadeTarget:
        """Make the new target ``plan`` was made for, at its real path (``make_target``),
        its new entries flushed now unless the restore's last flush covers them."""
        assert plan.real_target is not None
        flushes = RestoreFlushes(self.fs, durable=self.durable)
        durable = self.durable and not flushes.new_entries_flushed_later(plan.target)
        return make_target(self.fs, plan.real_target, durable=durable)

    def reads(self, plan: Plan) -> BlobSource:
        """Start reading the blobs ``plan`` writes (``plan_reads``): pass the result to
        ``apply``, or stop it with ``snapstore.restore.apply.stop_reading``."""
        return plan_reads(plan, self.repo.blobs)

    def apply(
        self,
        plan: Plan,
        temps: RestoreTemps,
        keep_special_bits: bool,
        progress: Progress | None = None,
        *,
        source: BlobSource | None = None,
        made: MadeTarget | None = None,
    ) -> None:
        """Carry out ``plan`` in its target through this writer's I/O seam, with the temp
        names ``temps`` (what a restore, its rollback and its recovery all write through),
        reading its blobs from ``source`` (from ``reads``, stopped once done) if given; a
        new target is the one the restore ``made``, else made now (``apply_plan``)."""
        apply_plan(
            plan,
            self.repo.blobs,
            self.fs,
            durable=self.durable,
            temps=temps,
            keep_special_bits=keep_special_bits,
            progress=progress,
            source=source,
            made=made,
        )

    def cover(self, journal: Journal, key: str, plan: Plan) -> Journal:
        """The journal of a restore about to apply ``plan`` (its rollback, or its finishing):
        with a token (a journal of a version before tokens gets one) and listing every
        directory the plan writes into, written durably first if that changed it, so that
        if this is killed too, the next recovery finds every temp file it leaves."""
        dirs = sorted(set(journal.dirs).union(plan.written_dirs()))
        if journal.token is not None and dirs == sorted(journal.dirs):
            return journal
        covering = journal._replace(dirs=tuple(dirs), token=journal.token or new_token())
        self.journals.write(key, covering)
        return covering

    def apply_covered(
        self,
        journal: Journal,
        key: str,
        plan: Plan,
        *,
        keep_special_bits: bool,
        made: MadeTarget | None = None,
    ) -> Journal:
        """Apply ``plan`` (a rollback or a finishing) once the journal covers it (``cover``),
        in the directory the restore ``made`` if given; returns the journal as it now is."""
        covered = self.cover(journal, key, plan)
        self.apply(plan, covered.temps, keep_special_bits, made=made)
        return covered

    def remove_temp_files(
        self, journal: Journal, real_target: str, *, made: MadeTarget | None = None
    ) -> bool:
        """Remove the temp files the journal's restore may have left beside its
        destinations (only its own: see ``snapstore.fs.tempnames``), in the target at its
        real path ``real_target`` reached without following links; False if some could not
        be removed, or the target could not be looked at. A journalled path that is no
        directory now (a file, a symlink, a FIFO: the restore had not made it one yet, or it
        was replaced since) holds no temp file of the restore: it is clean; so does a target
        that is not there. ``made``: the directory the restore made, written through its
        held descriptor (if the name does not lead to it now: False)."""
        try:
            handles = DirHandles(
                self.fs,
                journal.target,
                real_target=real_target,
                durable=False,
                made=made,
            )
        except (FileNotFoundError, NotADirectoryPathError):
            return True
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
                    self.fs.unlink(name, dir_fd=fd)
        except (FileNotFoundError, NotADirectoryPathError):
            return True
        except OSError:
            return False
        return True
