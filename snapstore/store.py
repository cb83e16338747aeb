"""The ``SnapStore`` facade: the public API, its argument checks and its lock choreography.

Each operation delegates to the module that owns it (docs/architecture.md): the create
pipeline to ``worktree.create``, restores and undos to ``restore.job``, sweeps, gc and verify
to ``maintenance``, reads and listings to ``repo.repository``. Every public method is safe to
call from any number of threads sharing one ``SnapStore``, and from any number of processes
sharing one root: each takes the locks docs/concurrency.md lists.

Those modules are imported when an operation first needs them, so a process that only lists
or reads (a command line run) does not load the create, restore and gc code.
"""

from __future__ import annotations

import builtins
import dataclasses
import os
import threading
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any

from snapstore.backend.opening import open_backend
from snapstore.backend.seam import Backend
from snapstore.compare import diff_entries, diff_plan, path_history
from snapstore.errors import InvalidValueError, PathNotInSnapshotError
from snapstore.format.paths import check_relative_path
from snapstore.format.times import time_to_ns, ttl_seconds
from snapstore.fs.seam import LOCAL, FileSystem
from snapstore.maintenance.autofold import AutoFold
from snapstore.maintenance.foldpolicy import fold_policy
from snapstore.maintenance.sweep import sweep
from snapstore.models import (
    DiffReport,
    FileSlice,
    GcReport,
    PathVersion,
    RestoreReport,
    Snapshot,
    SnapshotInfo,
    SweepReport,
    VerifyReport,
)
from snapstore.patch import DEFAULT_CONTEXT, DEFAULT_MAX_BYTES, DEFAULT_MAX_FILE_BYTES, Patch
from snapstore.repo.repository import Repository
from snapstore.restore.journal import JournalDir

if TYPE_CHECKING:
    from snapstore.maintenance.stats import StoreStats
    from snapstore.restore.job import RestoreJob
    from snapstore.worktree.incremental import ChangeSource, IncrementalReport

Progress = Callable[[int, int], None]
Duration = float | int | timedelta
DEFAULT_UNDO_DEPTH = 10


class SnapStore:
    """A storage root shared by several processes: snapshots of file sets and resume values.

    ``root`` is a directory (created if missing), an object storage URL
    (``s3://bucket/prefix``, docs/object-storage.md), or a backend (``snapstore.repo``).
    Every call reads the store as it is now; nothing is cached as authority. ``durable=False``
    skips fsync (tests and scratch stores only). ``fs`` is the I/O seam tests wrap to inject
    faults or record operations. ``undo_depth``: how many undo backups each session keeps.
    ``create=False`` opens only an existing store (StoreNotFoundError otherwise) and creates
    nothing. ``fold_threshold``: how many small packs make a create start folding them in
    the background (None: ``SNAPSTORE_FOLD_THRESHOLD`` or 32; 0: never; see
    docs/performance.md). Opening a store finishes or rolls back any restore that was killed
    part-way (see ``restore``). Use it as a context manager, or call ``close``, to release
    open files at once (and wait for a fold step in progress); a store dropped without
    either releases them when it is collected, once no thread uses it and its fold step
    has finished.
    """

    def __init__(
        self,
        root: str | os.PathLike[str] | Backend,
        *,
        lock_timeout: float = 30.0,
        durable: bool = True,
        fs: FileSystem | None = None,
        undo_depth: int = DEFAULT_UNDO_DEPTH,
        create: bool = True,
        fold_threshold: int | None = None,
    ) -> None:
        if isinstance(undo_depth, bool) or not isinstance(undo_depth, int) or undo_depth < 1:
            raise InvalidValueError(f"undo_depth must be a positive int, got {undo_depth!r}")
        self.lock_timeout = lock_timeout
        self.durable = durable
        self.undo_depth = undo_depth
        self.fs = fs or LOCAL
        root = open_backend(root, fs=self.fs, durable=durable, lock_timeout=lock_timeout)
        self.repo = Repository(root, create=create)
        self.autofold = AutoFold(self.repo, fold_policy(fold_threshold))
        self._restore_job: RestoreJob | None = None
        self._restore_job_lock = threading.Lock()
        # The parts, for tools and tests that look inside.
        self.backend, self.root, self.read_only = root, self.repo.root, self.repo.read_only
        self.blobs, self.catalog = self.repo.blobs, self.repo.catalog
        self.gc_lock = self.repo.gc_lock
        self.target_locks, self.journals = self.repo.target_locks, JournalDir(root)
        self.blobs_in_use = self.repo.blobs_in_use
        if not self.repo.read_only and self.journals.pending():
            self._restores.recovery.recover_all()

    @property
    def _restores(self) -> RestoreJob:
        """Restores, undos and their recovery (made on first use)."""
        with self._restore_job_lock:
            if self._restore_job is None:
                from snapstore.restore.job import RestoreJob

                self._restore_job = RestoreJob(
                    self.repo, self.fs, durable=self.durable, undo_depth=self.undo_depth
                )
            return self._restore_job

    def __repr__(self) -> str:
        return f"SnapStore({self.root!r})"

    def __enter__(self) -> SnapStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Release the files this object keeps open. Safe to call more than once; the store
        stays usable (it reopens what it needs). Waits for a running fold step."""
        self.autofold.join()
        self.repo.backend.close()

    # ----------------------------------------------------------------- create and read

    def create(
        self,
        session: str,
        name: str | None = None,
        paths: Iterable[str | os.PathLike[str]] | str | os.PathLike[str] | None = None,
        *,
        base_dir: str | os.PathLike[str] = ".",
        meta: Mapping[str, Any] | None = None,
        ttl: Duration | None = None,
        exclude: Iterable[str] = (),
        default_excludes: bool = True,
        gitignore: bool = True,
        if_exists: str = "replace",
        missing: str = "absent",
        skip_unreadable: bool = False,
        rehash: bool = False,
        progress: Progress | None = None,
    ) -> SnapshotInfo:
        """Snapshot ``paths`` (files or directories under ``base_dir``) as (session, name).

        ``name``: None generates a unique name that sorts by time. ``exclude``: gitignore
        patterns (relative to ``base_dir``) to leave out, besides the base dir's
        ``.snapstoreignore``, the built-in VCS directories (``.git``, ``.hg``, ``.svn``,
        ``.jj``; ``default_excludes=False`` keeps them) and, unless ``gitignore=False``, what
        git ignores (the ``.gitignore`` files from the work tree's top down to each path, and
        ``.git/info/exclude``); the rules are recorded, and a restore leaves what they match
        alone. A path asked for that the rules leave out is refused (InvalidValueError).
        ``if_exists="error"`` refuses to replace a snapshot of the same name
        (SnapshotExistsError); ``missing="error"`` refuses paths that do not exist
        (MissingPathError) instead of recording them as absent. ``rehash``: read every file,
        trusting no cached digest. ``progress(done, total)`` counts the files that must be read.

        Blobs are ingested before the session's lock is taken; the manifest is committed last,
        atomically, numbered after every snapshot the session holds. On any failure nothing is
        committed and the previous snapshot of (session, name), if any, stays as it was. Waits
        for a restore into ``base_dir`` (or a directory holding it) to finish.
        ``SnapshotInfo.replaced`` says whether it replaced one.
        """
        from snapstore.worktree.create import checkpoint_request, take_snapshot

        request = checkpoint_request(
            self.repo,
            session,
            name,
            paths,
            base_dir=base_dir,
            meta=meta,
            ttl=ttl_seconds(ttl),
            exclude=exclude,
            default_excludes=default_excludes,
            gitignore=gitignore,
            if_exists=if_exists,
            missing=missing,
            skip_unreadable=skip_unreadable,
            rehash=rehash,
        )
        with self._restores.snapshotting(request.base):
            info, replaced = take_snapshot(self.repo, request, progress=progress)
        self.autofold.after_commit()
        return dataclasses.replace(info, replaced=True) if replaced else info

    def create_incremental(
        self,
        session: str,
        name: str | None = None,
        paths: Iterable[str | os.PathLike[str]] | str | os.PathLike[str] | None = None,
        *,
        parent: SnapshotInfo | None,
        changes: ChangeSource,
        base_dir: str | os.PathLike[str] = ".",
        meta: Mapping[str, Any] | None = None,
        ttl: Duration | None = None,
        exclude: Iterable[str] = (),
        default_excludes: bool = True,
        gitignore: bool = True,
        if_exists: str = "replace",
        missing: str = "absent",
        skip_unreadable: bool = False,
        rehash: bool = False,
        progress: Progress | None = None,
    ) -> IncrementalReport:
        """``create``, scanning only what changed since ``parent``, the checkpoint of the same
        session, base directory, paths and exclude rules that this process's previous
        ``create_incremental`` committed. ``changes()`` is called once, with the base
        directory locked, before anything is read: it returns every path changed since
        (``ChangedPaths``), or None if that is not known. Any doubt makes it a full create
        (``IncrementalReport.scan`` and ``reason`` say so); what it commits is what ``create``
        would. See ``worktree.incremental`` for why it never records a stale file."""
        from snapstore.worktree.create import checkpoint_request
        from snapstore.worktree.incremental import take_incremental

        request = checkpoint_request(
            self.repo,
            session,
            name,
            paths,
            base_dir=base_dir,
            meta=meta,
            ttl=ttl_seconds(ttl),
            exclude=exclude,
            default_excludes=default_excludes,
            gitignore=gitignore,
            if_exists=if_exists,
            missing=missing,
            skip_unreadable=skip_unreadable,
            rehash=rehash,
        )
        with self._restores.snapshotting(request.base):
            report, replaced = take_incremental(
                self.repo, request, parent, changes, progress=progress
            )
        self.autofold.after_commit()
        if replaced:
            return dataclasses.replace(report, info=dataclasses.replace(report.info, replaced=True))
        return report

    def get(self, session: str, name: str) -> Snapshot:
        """The snapshot's header and entries; loads no blob. ``name`` may be a selector
        (``latest``, ``latest~N``: see ``resolve``)."""
        with self.repo.blobs_in_use():
            manifest = self.repo.catalog.read(session, self.resolve(session, name))
            return Snapshot(manifest.info, self.repo.trees.entries(manifest))

    def list(self, session: str | None = None) -> list[SnapshotInfo]:
        """Every valid checkpoint and state value (of one session, or all), oldest first;
        corrupt ones warn. Undo backups are not listed here (see ``backups``)."""
        return [m.header.info for m in self.repo.listing(session) if not m.header.info.is_backup]

    def latest(self, session: str) -> SnapshotInfo:
        """The newest file checkpoint of a session (the last committed: never an undo backup,
        never a state value); SnapshotNotFound if it has none."""
        return self.repo.latest(session)

    def backups(self, session: str) -> builtins.list[SnapshotInfo]:
        """The session's undo backups, oldest first: each restore keeps the state it
        replaced as one (``backup_of`` names what was restored). ``undo`` restores them."""
        return self.repo.backups(session)

    def resolve(self, session: str, selector: str, *, prefix: bool = False) -> str:
        """The snapshot name a selector means: an existing name (checkpoint or backup) as
        is; else ``latest`` (the newest file checkpoint) or ``latest~N`` (the Nth before it);
        with ``prefix``, also the start of exactly one checkpoint's name (InvalidNameError if
        it starts several). SnapshotNotFound otherwise.

        Methods that take a snapshot name accept selectors, but never prefixes: a name given
        for a snapshot deleted meanwhile must not come to mean another one."""
        return self.repo.resolve(session, selector, prefix=prefix)

    def sessions(self) -> builtins.list[str]:
        """The sessions that hold at least one valid checkpoint or state value, sorted."""
        headers = self.repo.catalog.headers(cached=True)
        return sorted({m.header.info.session for m in headers if not m.header.info.is_backup})

    def read(self, session: str, name: str, path: str) -> bytes:
        """One file's bytes from a snapshot, verified against its digest."""
        return self.repo.read_file(session, name, path)

    def read_slice(
        self, session: str, name: str, path: str, *, offset: int = 0, length: int | None = None
    ) -> FileSlice:
        """Part of one file of a snapshot: at most ``length`` bytes (None: to the end) from
        ``offset``, with the file's size and whether it is binary (a NUL in its first 8 KiB).
        The file is read in one streaming pass and verified against its digest; only the part
        asked for is kept in memory."""
        from snapstore.patch import BINARY_PROBE_BYTES, is_binary
        from snapstore.repo.contents import read_range

        if offset < 0 or (length is not None and length < 0):
            raise InvalidValueError("offset and length must not be negative")
        repo = self.repo
        with repo.blobs_in_use():
            entry = repo.trees.lookup(repo.files_manifest(session, name), path)
            if entry.kind != "file" or entry.digest is None:
                raise PathNotInSnapshotError(
                    f"{entry.path!r} is a {entry.kind} in snapshot {name!r}, not a file"
                )
            head, data = read_range(repo.blobs, entry, offset, length, BINARY_PROBE_BYTES)
        return FileSlice(entry.path, entry.size, min(offset, entry.size), data, is_binary(head))

    # ----------------------------------------------------------------- restore and undo

    def restore(
        self,
        session: str,
        name: str,
        target: str | os.PathLike[str] | None = None,
        *,
        paths: Iterable[str | os.PathLike[str]] | str | os.PathLike[str] | None = None,
        dry_run: bool = False,
        backup: bool = True,
        keep_special_bits: bool = False,
        progress: Progress | None = None,
    ) -> RestoreReport:
        """Make ``target`` (default: the snapshot's base dir) match the snapshot.

        Only paths that differ are written. Unless ``backup=False``, what is about to be
        replaced or removed is first kept as an undo backup of the session (``undo`` puts
        it back); if any step fails the target is put back from it and RestoreError says
        whether that rollback succeeded. A journal written first lets whoever comes next
        finish or roll back a restore that was killed. Restores into one target run one at
        a time. Storage roots in the target, and paths the snapshot could not record, are
        never touched (``RestoreReport.kept``).
        """
        return self._restores.run(
            session,
            name,
            None if target is None else os.fspath(target),
            paths=_path_list(paths),
            dry_run=dry_run,
            backup=backup,
            keep_special_bits=keep_special_bits,
            progress=progress,
        )

    def undo(
        self,
        session: str,
        *,
        backup: str | None = None,
        target: str | os.PathLike[str] | None = None,
        dry_run: bool = False,
        progress: Progress | None = None,
    ) -> RestoreReport:
        """Put back what the session's newest restore replaced (or the undo backup named
        ``backup``), into the directory it was taken from unless ``target`` is given. The
        undo keeps its own backup first, so undoing twice returns to where you were.
        SnapshotNotFound if the session has no undo backup, or none named ``backup`` (a full
        name: selectors and checkpoints name no undo backup). Interrupted restores of the
        session are recovered first: the backup of a killed restore goes with its rollback."""
        return self._restores.undo(
            session,
            backup,
            None if target is None else os.fspath(target),
            dry_run=dry_run,
            progress=progress,
        )

    def diff(
        self,
        session: str,
        name: str,
        other: str | None = None,
        *,
        target: str | os.PathLike[str] | None = None,
    ) -> DiffReport:
        """What changed: from snapshot ``name`` to snapshot ``other`` of the same session, or,
        without ``other``, from ``name`` to the directory ``target`` (default: its base dir),
        as ``git diff <commit>`` reads: ``added`` is in the directory and not in the snapshot
        (a restore would remove it), ``removed`` the reverse (a restore would put it back).
        Every path is listed on its own: a directory added or removed comes with everything
        in it. ``patch`` gives the contents' unified diff."""
        if isinstance(other, os.PathLike):
            raise InvalidValueError("diff compares two snapshots; pass a directory as target=")
        if other is not None:
            return diff_entries(
                self.repo.entries(session, name)[1], self.repo.entries(session, other)[1]
            )
        target_dir = None if target is None else os.fspath(target)
        return diff_plan(self._restores.dry_plan(session, name, target_dir))

    def patch(
        self,
        session: str,
        name: str,
        other: str | None = None,
        *,
        target: str | os.PathLike[str] | None = None,
        paths: Iterable[str] | None = None,
        context: int = DEFAULT_CONTEXT,
        max_bytes: int | None = DEFAULT_MAX_BYTES,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    ) -> Patch:
        """The unified diff of what ``diff`` reports, read the same way: from snapshot
        ``name`` to snapshot ``other``, or, without ``other``, from ``name`` to the directory
        ``target`` (default: its base dir). ``paths``: only these paths (and below).

        Text files get hunks with ``context`` lines around each change; binary files (a NUL
        in the first 8 KiB) and files over ``max_file_bytes`` are named, not diffed. The
        text is bounded by ``max_bytes`` (None: unbounded): what does not fit is left out
        and ``Patch.truncated`` and a marker line say so. Files in the directory are read
        through real directories only, never through a symlink."""
        from snapstore.compare import snapshot_patch

        if context < 0 or (max_bytes is not None and max_bytes < 0) or max_file_bytes < 0:
            raise InvalidValueError("context, max_bytes and max_file_bytes must not be negative")
        return snapshot_patch(
            self.repo,
            self._restores.dry_plan,
            session,
            name,
            other,
            target=None if target is None else os.fspath(target),
            paths=None if paths is None else [check_relative_path(p.strip("/")) for p in paths],
            context=context,
            max_bytes=max_bytes,
            max_file_bytes=max_file_bytes,
        )

    def history(self, session: str, path: str) -> builtins.list[PathVersion]:
        """The checkpoints of a session (oldest first) in which ``path`` changed: where it first
        appears, and each where its kind, mode, size, digest or link target differs from the
        checkpoint before (an entry of None: gone from that one on). Reads manifests only."""
        return path_history(self.repo, session, path)

    # ----------------------------------------------------------------- delete and sweep

    def delete(self, session: str, name: str) -> bool:
        """Delete one snapshot durably; False if it did not exist. Errors are raised."""
        return self.repo.delete(session, name)

    def delete_session(self, session: str) -> int:
        """Delete every snapshot of a session, undo backups included; returns how many."""
        return self.repo.delete_session(session)

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
        now_ns = time_to_ns(now) if now is not None else None
        return sweep(
            self.repo,
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

        now_ns = time_to_ns(now) if now is not None else self.repo.backend.now_ns()
        return collect_stats(
            self.repo, session=session, ttl=ttl_seconds(ttl), keep_last=keep_last, now_ns=now_ns
        )

    # ----------------------------------------------------------------- gc and verify

    def gc(self, *, dry_run: bool = False) -> GcReport:
        """Delete blobs no manifest in the store references, and stale temp files.

        Waits up to ``lock_timeout`` for writers and readers to finish (new ones wait behind
        it meanwhile), then reports that it was skipped. A corrupt manifest stops blob
        deletion (its references are unknown).
        """
        from snapstore.maintenance.gc import collect

        return collect(self.repo, dry_run=dry_run)

    def upgrade(self) -> GcReport:
        """Convert a store of an older format to the current one: a gc that also rewrites
        every format 1 manifest and pack (every gc does so as it goes; this is the way to
        do it now). Crash-safe at every step; a run that is stopped is taken up by the next
        (see docs/format.md, "Converting a format 1 store")."""
        return self.gc()

    @property
    def format_version(self) -> int:
        """The major format the store's FORMAT marker names now."""
        return self.repo.format_major

    def verify(self, *, deep: bool = False, progress: Progress | None = None) -> VerifyReport:
        """Check every committed snapshot (undo backups too): manifests decode, referenced
        blobs exist (and, with ``deep``, hash right). Temp files and unreferenced blobs are
        listed as garbage."""
        from snapstore.maintenance.verify import verify

        return verify(self.repo, deep=deep, progress=progress)

    # ----------------------------------------------------------------- state values

    def put_state(
        self, session: str, name: str, value: Any, *, ttl: Duration | None = None
    ) -> SnapshotInfo:
        """Durably store one msgpack-encodable value (a resume position) as (session, name);
        its maps and lists may nest at most 64 deep (InvalidValueError)."""
        return self.repo.put_state(session, name, value, ttl_seconds(ttl))

    def get_state(self, session: str, name: str, default: Any = None) -> Any:
        """The stored value, or ``default`` if there is none; a corrupt one raises."""
        return self.repo.get_state(session, name, default)


def _path_list(
    paths: Iterable[str | os.PathLike[str]] | str | os.PathLike[str] | None,
) -> list[str] | None:
    """Paths as a list of strings; one path given alone is one path, not its characters."""
    if paths is None:
        return None
    if isinstance(paths, str | os.PathLike):
        return [os.fspath(paths)]
    return [os.fspath(path) for path in paths]
