"""The ``SnapStore`` facade: the public API over blobs, manifests, locks and restore."""

from __future__ import annotations

import builtins
import contextlib
import os
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime, timedelta
from operator import attrgetter, itemgetter
from typing import Any

from snapstore import maintenance, packgc
from snapstore import restore as restoring
from snapstore.batch import BlobBatch
from snapstore.catalog import Catalog
from snapstore.errors import (
    CorruptManifestError,
    InvalidValueError,
    LockTimeout,
    MissingBlobError,
    NotAStateSnapshotError,
    RestoreError,
    SnapshotNotFound,
)
from snapstore.fsio import LOCAL, FileSystem
from snapstore.gcpause import gc_paused
from snapstore.ingest import ingest_scan
from snapstore.layout import open_layout
from snapstore.lock import FileLock, filesystem_type, is_untrusted_lock_filesystem
from snapstore.manifest import Manifest, encode, expiry_ns, ns_to_time, time_to_ns
from snapstore.models import (
    DiffReport,
    GcReport,
    RestoreReport,
    Snapshot,
    SnapshotInfo,
    SweepReport,
    VerifyReport,
)
from snapstore.naming import encode_name
from snapstore.scan import Scanner, relative_to_base
from snapstore.statcache import StatCache
from snapstore.storage import BlobStorage
from snapstore.sweep import choose_victims

PRE_RESTORE = "pre-restore"
Progress = Callable[[int, int], None]
Duration = float | int | timedelta


class UnreliableLockWarning(UserWarning):
    """The store lives on a network or FUSE filesystem whose locks may not be honoured."""


def ttl_seconds(ttl: Duration | None) -> float | None:
    """A TTL given as seconds or a timedelta, as seconds."""
    if ttl is None:
        return None
    if isinstance(ttl, timedelta):
        return ttl.total_seconds()
    if isinstance(ttl, bool) or not isinstance(ttl, int | float):
        raise InvalidValueError(f"ttl must be seconds or a timedelta, not {type(ttl).__name__}")
    return float(ttl)


class SnapStore:
    """A storage root shared by several processes: snapshots of file sets and resume values.

    Every call reads the disk as it is now; nothing is cached as authority. ``durable=False``
    skips fsync (tests and scratch stores only). ``fs`` is the I/O seam tests wrap to inject
    faults or record operations.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        lock_timeout: float = 30.0,
        durable: bool = True,
        fs: FileSystem | None = None,
    ) -> None:
        self.root = os.path.abspath(os.fspath(root))
        self.lock_timeout = lock_timeout
        self.durable = durable
        self.fs = fs or LOCAL
        self._tmp_dir = os.path.join(self.root, "tmp")
        self._cache_dir = os.path.join(self.root, "cache")
        self.read_only = not open_layout(self.root, self.fs, durable=durable)
        self.blobs = BlobStorage(self.root, self._tmp_dir, self.fs, durable=durable)
        self.catalog = Catalog(
            os.path.join(self.root, "sessions"), self._tmp_dir, self.fs, durable=durable
        )
        locks = os.path.join(self.root, "locks")
        self._namespace_lock = FileLock(os.path.join(locks, "namespace"), "namespace", lock_timeout)
        self._gc_lock = FileLock(os.path.join(locks, "gc"), "gc", lock_timeout)
        fs_type = filesystem_type(self.root)
        if is_untrusted_lock_filesystem(fs_type):
            warnings.warn(
                f"snapstore root {self.root} is on a {fs_type} filesystem, whose locks are not "
                "trustworthy: do not share it between processes on different machines",
                UnreliableLockWarning,
                stacklevel=2,
            )

    def __repr__(self) -> str:
        return f"SnapStore({self.root!r})"

    # ----------------------------------------------------------------- create and read

    def create(
        self,
        session: str,
        name: str,
        paths: Iterable[str | os.PathLike[str]] | str | os.PathLike[str],
        *,
        base_dir: str | os.PathLike[str] = ".",
        meta: Mapping[str, Any] | None = None,
        ttl: Duration | None = None,
        skip_unreadable: bool = False,
        progress: Progress | None = None,
    ) -> SnapshotInfo:
        """Snapshot ``paths`` (files or directories under ``base_dir``) as (session, name).

        Blobs are ingested before the namespace lock is taken; the manifest is committed last,
        atomically. Paths that do not exist are recorded as absent. On any failure nothing is
        committed and the previous snapshot of (session, name), if any, stays as it was.
        ``progress(done, total)`` counts the files that must be read (the stat cache vouches
        for the others).
        """
        encode_name(session, "session")
        encode_name(name, "snapshot name")
        if isinstance(paths, str | os.PathLike):
            paths = [paths]
        base = os.path.abspath(os.fspath(base_dir))
        if not os.path.isdir(base):
            raise InvalidValueError(f"base_dir {base} is not a directory")
        relative = [relative_to_base(base, path) for path in paths]
        meta_dict = dict(meta or {})
        seconds = ttl_seconds(ttl)
        expiry_ns(0, seconds)
        with self._blobs_in_use(), gc_paused():
            return self._create_locked(
                session,
                name,
                base,
                relative,
                meta=meta_dict,
                ttl=seconds,
                skip_unreadable=skip_unreadable,
                progress=progress,
            )

    @contextlib.contextmanager
    def _blobs_in_use(self) -> Iterator[None]:
        """Hold the gc lock shared, so no blob disappears, and see the packs on disk now."""
        with self._gc_lock.shared():
            self.blobs.refresh()
            yield

    def _create_locked(
        self,
        session: str,
        name: str,
        base: str,
        relative_paths: list[str],
        *,
        meta: dict[str, Any],
        ttl: float | None,
        skip_unreadable: bool = False,
        shallow: frozenset[str] = frozenset(),
        progress: Progress | None = None,
        save_stat_cache: bool = True,
    ) -> SnapshotInfo:
        """Scan, ingest and commit, with the gc lock already held shared."""
        scan_start_ns = time.time_ns()
        root_info = os.stat(self.root)
        cache = StatCache(self._cache_dir, self._tmp_dir, self.fs, base, scan_start_ns)
        batch = BlobBatch(self.blobs)
        scanner = Scanner(
            base,
            exclude_dirs=[(root_info.st_dev, root_info.st_ino)],
            skip_unreadable=skip_unreadable,
            reuse=cache.reuse_hook(batch.claim),
        )
        try:
            for path in relative_paths:
                scanner.add(path, recursive=path not in shallow)
            scanned = scanner.result
            rows = ingest_scan(
                scanned, batch, cache, skip_unreadable=skip_unreadable, progress=progress
            )
            batch.finish()
        except BaseException:
            batch.abort()
            raise
        file_rows = [row for row in rows if row[1] == "file"]
        with self._namespace_lock.exclusive():
            missing = self.blobs.first_missing(file_rows)
            if missing is not None:
                path, _, _, _, _, digest, _ = missing
                assert digest is not None
                raise MissingBlobError(f"blob {digest.hex()} for {path!r} vanished before commit")
            created_ns = time.time_ns()
            info = SnapshotInfo(
                session=session,
                name=name,
                kind="files",
                created_at=ns_to_time(created_ns),
                expires_at=_optional_time(expiry_ns(created_ns, ttl)),
                file_count=len(file_rows),
                total_bytes=sum(map(itemgetter(3), file_rows)),
                meta=meta,
                base_dir=base,
                skipped=tuple(sorted(scanned.skipped, key=lambda s: s.path)),
                roots=tuple(sorted({p for p in relative_paths if p not in shallow})),
            )
            data = encode(
                info, created_ns=created_ns, expires_ns=expiry_ns(created_ns, ttl), rows=rows
            )
            self.catalog.commit(session, name, data)
        if save_stat_cache:
            cache.save(keep_unseen=relative_paths != ["."] or bool(shallow))
        return info

    def get(self, session: str, name: str) -> Snapshot:
        """The snapshot's header and entries; loads no blob."""
        manifest = self.catalog.read(session, name)
        return Snapshot(manifest.info, manifest.entries)

    def list(self, session: str | None = None) -> list[SnapshotInfo]:
        """Every valid snapshot (of one session, or all), oldest first; corrupt ones warn."""
        if session is not None:
            encode_name(session, "session")
        with gc_paused():
            found = self.catalog.headers(session, cached=True)
        found.sort(key=attrgetter("header.created_ns", "header.info.session", "header.info.name"))
        return [m.header.info for m in found]

    def sessions(self) -> builtins.list[str]:
        """The sessions that hold at least one valid snapshot, sorted."""
        return sorted({m.header.info.session for m in self.catalog.headers(cached=True)})

    def read(self, session: str, name: str, path: str) -> bytes:
        """One file's bytes from a snapshot, verified against its digest."""
        with self._blobs_in_use():
            manifest = self._files_manifest(session, name)
            (entry,) = restoring.select_entries(manifest.entries, [path])[:1]
            if entry.kind != "file" or entry.digest is None:
                raise restoring.PathNotInSnapshotError(
                    f"{entry.path!r} is a {entry.kind} in snapshot {name!r}, not a file"
                )
            return self.blobs.read(entry.digest)

    def _files_manifest(self, session: str, name: str) -> Manifest:
        manifest = self.catalog.read(session, name)
        if manifest.info.kind != "files":
            raise NotAStateSnapshotError(
                f"snapshot {name!r} in session {session!r} holds a state value, not files"
            )
        return manifest

    # ----------------------------------------------------------------- restore

    def restore(
        self,
        session: str,
        name: str,
        target: str | os.PathLike[str] | None = None,
        *,
        paths: Iterable[str] | None = None,
        dry_run: bool = False,
        backup: bool = True,
        keep_special_bits: bool = False,
        progress: Progress | None = None,
    ) -> RestoreReport:
        """Make ``target`` (default: the snapshot's base dir) match the snapshot.

        Only paths that differ are written. Unless ``backup=False``, what is about to be
        replaced or removed is first kept as the snapshot ``pre-restore`` of the same session,
        so the restore can be undone; if any step fails the target is put back from it and
        RestoreError says whether that rollback succeeded.
        """
        with self._blobs_in_use(), gc_paused():
            manifest = self._files_manifest(session, name)
            target_dir = os.path.abspath(os.fspath(target or manifest.info.base_dir))
            plan = self._plan(manifest, target_dir, paths, keep_special_bits)
            report = _restore_report(plan, dry_run)
            if dry_run or not plan.changes:
                return report
            backup_name = None
            target_existed = os.path.isdir(target_dir)
            if backup and target_existed:
                backup_paths, recursive = plan.backup_paths()
                shallow = frozenset(set(backup_paths) - recursive)
                self._create_locked(
                    session,
                    PRE_RESTORE,
                    target_dir,
                    backup_paths,
                    meta={"snapstore.pre_restore_of": name},
                    ttl=None,
                    shallow=shallow,
                    save_stat_cache=False,  # these files are about to be replaced
                )
                backup_name = report.backup = PRE_RESTORE
            try:
                restoring.apply_plan(
                    plan,
                    self.blobs,
                    self.fs,
                    durable=self.durable,
                    keep_special_bits=keep_special_bits,
                    progress=progress,
                )
            except BaseException as error:
                if not target_existed:
                    self._remove_new_target(session, name, target_dir, error)
                self._roll_back(session, name, target_dir, backup_name, error)
                raise
            return report

    def _plan(
        self,
        manifest: Manifest,
        target_dir: str,
        paths: Iterable[str] | None,
        keep_special_bits: bool,
    ) -> restoring.Plan:
        """What restoring (part of) a snapshot into ``target_dir`` changes; writes nothing."""
        selected = restoring.select_entries(manifest.entries, paths)
        root_info = os.stat(self.root)
        cache = StatCache(self._cache_dir, self._tmp_dir, self.fs, target_dir, time.time_ns())
        return restoring.make_plan(
            selected,
            target_dir,
            complete=restoring.complete_dirs(
                selected, manifest.info.roots, whole_snapshot=paths is None
            ),
            keep_out=[(root_info.st_dev, root_info.st_ino)],
            keep_special_bits=keep_special_bits,
            known_digest=cache.lookup,
        )

    def _remove_new_target(
        self, session: str, name: str, target_dir: str, error: BaseException
    ) -> None:
        """Undo a failed restore into a directory it created: remove that directory."""
        failed = f"restore of {name!r} (session {session!r}) into {target_dir} failed: {error}"
        if not os.path.lexists(target_dir):
            raise RestoreError(
                f"{failed}; it had not created the target directory yet", rolled_back=True
            ) from error
        parent = os.path.dirname(target_dir)
        try:
            parent_fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                restoring.remove_tree(self.fs, parent_fd, os.path.basename(target_dir))
            finally:
                os.close(parent_fd)
        except OSError as cleanup_error:
            raise RestoreError(
                f"{failed}; removing the partly restored new directory also failed "
                f"({cleanup_error})",
                rolled_back=False,
            ) from error
        raise RestoreError(
            f"{failed}; the directory it had created was removed", rolled_back=True
        ) from error

    def _roll_back(
        self,
        session: str,
        name: str,
        target_dir: str,
        backup_name: str | None,
        error: BaseException,
    ) -> None:
        """Put the target back from the pre-restore backup and raise RestoreError."""
        failed = f"restore of {name!r} (session {session!r}) into {target_dir} failed: {error}"
        if backup_name is None:
            raise RestoreError(
                f"{failed}; no backup was kept (backup=False), so the target may be partly "
                "restored",
                rolled_back=False,
            ) from error
        try:
            saved = self.catalog.read(session, backup_name)
            rollback = self._plan(saved, target_dir, None, True)
            restoring.apply_plan(rollback, self.blobs, self.fs, durable=self.durable)
        except BaseException as rollback_error:
            raise RestoreError(
                f"{failed}; rolling back also failed ({rollback_error}); the previous state is "
                f"kept in snapshot {backup_name!r} of session {session!r}",
                rolled_back=False,
            ) from error
        raise RestoreError(f"{failed}; the target was put back as it was", rolled_back=True) from (
            error
        )

    def diff(
        self, session: str, name: str, target: str | os.PathLike[str] | None = None
    ) -> DiffReport:
        """What a restore into ``target`` would change: added, modified and removed paths."""
        manifest = self._files_manifest(session, name)
        target_dir = os.path.abspath(os.fspath(target or manifest.info.base_dir))
        plan = self._plan(manifest, target_dir, None, False)
        report = DiffReport()
        for action in plan.changes:
            path = action.entry.path
            if action.operation == "remove":
                report.removed.append(path)
            elif action.operation == "create":
                report.added.append(path)
            else:
                report.modified.append(path)
        return report

    # ----------------------------------------------------------------- delete and sweep

    def delete(self, session: str, name: str) -> bool:
        """Delete one snapshot durably; False if it did not exist. Errors are raised."""
        path = self.catalog.manifest_path(session, name)
        with self._namespace_lock.exclusive():
            if not os.path.lexists(path):
                return False
            self.catalog.remove(path)
            return True

    def delete_session(self, session: str) -> int:
        """Delete every snapshot of a session; returns how many were deleted."""
        encode_name(session, "session")
        with self._namespace_lock.exclusive():
            count = 0
            for path in list(self.catalog.manifest_paths(session)):
                self.catalog.remove(path)
                count += 1
            return count

    def sweep(
        self,
        *,
        ttl: Duration | None = None,
        keep_last: int | None = None,
        now: datetime | None = None,
        dry_run: bool = False,
    ) -> SweepReport:
        """Delete expired snapshots, deciding from the manifests on disk under the lock.

        ``ttl``: file snapshots created more than ``ttl`` before ``now`` go; ``keep_last``:
        only the N newest file snapshots of each session stay (with both, a snapshot stays if
        either keeps it). Any snapshot whose own ``expires_at`` has passed goes. State
        snapshots (resume values) are removed only by their own expiry.
        """
        seconds = ttl_seconds(ttl)
        if seconds is not None and seconds < 0:
            raise InvalidValueError(f"ttl must not be negative, got {seconds}")
        if keep_last is not None and (isinstance(keep_last, bool) or keep_last < 0):
            raise InvalidValueError(f"keep_last must be a non-negative int, got {keep_last!r}")
        now_ns = time_to_ns(now) if now is not None else time.time_ns()
        report = SweepReport()
        with self._namespace_lock.exclusive():
            found = self.catalog.headers()
            for victim in choose_victims(found, ttl=seconds, keep_last=keep_last, now_ns=now_ns):
                if not dry_run:
                    self.catalog.remove(victim.path)
                report.deleted.append((victim.header.info.session, victim.header.info.name))
        return report

    # ----------------------------------------------------------------- gc and verify

    def gc(self, *, dry_run: bool = False) -> GcReport:
        """Delete blobs no manifest on disk references, and stale temp files.

        Waits up to ``lock_timeout`` for writers and readers to finish, then reports that it
        was skipped. A corrupt manifest stops blob deletion (its references are unknown).
        """
        report = GcReport()
        try:
            with self._gc_lock.exclusive():
                referenced, corrupt = maintenance.referenced_digests(self.catalog)
                report.temp_files_removed = maintenance.clean_temp(self.fs, self._tmp_dir, dry_run)
                if corrupt:
                    report.skipped = True
                    report.reason = (
                        f"{len(corrupt)} corrupt manifest(s) hide which blobs are in use; no blob "
                        f"was deleted (run verify): {corrupt[0]}"
                    )
                    return report
                self.blobs.refresh()
                loose = self.blobs.loose
                for digest in list(loose.iter_digests()):
                    if digest in referenced:
                        continue
                    if dry_run:
                        report.bytes_freed += loose.size(digest)
                    else:
                        report.bytes_freed += loose.delete(digest)
                    report.blobs_deleted += 1
                packed = packgc.collect(self.blobs, referenced, dry_run=dry_run)
                report.blobs_deleted += packed.blobs_deleted
                report.bytes_freed += packed.bytes_freed
                report.packs_deleted = packed.packs_deleted
                report.packs_written = packed.packs_written
                if packed.problems:
                    report.reason = "; ".join(packed.problems)
                if not dry_run:
                    with self._namespace_lock.exclusive():
                        self.catalog.tidy()
        except LockTimeout as error:
            report.skipped = True
            report.reason = f"the store is busy: {error}"
        return report

    def verify(self, *, deep: bool = False, progress: Progress | None = None) -> VerifyReport:
        """Check every committed snapshot: manifests decode, referenced blobs exist (and, with
        ``deep``, hash right). Temp files and unreferenced blobs are listed as garbage."""
        report = VerifyReport()
        with self._blobs_in_use():
            referenced: dict[bytes, int] = {}
            for manifest in maintenance.committed_manifests(self.catalog):
                report.snapshots_checked += 1
                if isinstance(manifest, CorruptManifestError):
                    report.problems.append(str(manifest))
                    continue
                for entry in manifest.entries:
                    if entry.digest is not None:
                        referenced[entry.digest] = entry.size
            for done, (digest, size) in enumerate(sorted(referenced.items()), 1):
                report.blobs_checked += 1
                problem = maintenance.check_blob(self.blobs, digest, size, deep=deep)
                if problem:
                    report.problems.append(problem)
                if progress is not None:
                    progress(done, len(referenced))
            packs = self.blobs.packs
            report.problems.extend(packs.broken().values())
            report.problems.extend(packs.check_sizes())
            report.garbage.extend(maintenance.temp_files(self._tmp_dir))
            loose = self.blobs.loose
            report.garbage.extend(
                loose.path(d) for d in loose.iter_digests() if d not in referenced
            )
            report.garbage.extend(packs.orphans())
            dead: dict[str, int] = {}
            for pack_id, _, _ in packgc.plan(packs.indexes(), set(referenced)).dead(
                set(referenced)
            ):
                dead[pack_id] = dead.get(pack_id, 0) + 1
            report.garbage.extend(
                f"{packs.pack_path(pack_id)} ({count} unreferenced blobs)"
                for pack_id, count in sorted(dead.items())
            )
        report.ok = not report.problems
        return report

    # ----------------------------------------------------------------- state values

    def put_state(
        self, session: str, name: str, value: Any, *, ttl: Duration | None = None
    ) -> SnapshotInfo:
        """Durably store one msgpack-encodable value (a resume position) as (session, name)."""
        encode_name(session, "session")
        encode_name(name, "snapshot name")
        seconds = ttl_seconds(ttl)
        expiry_ns(0, seconds)
        with self._gc_lock.shared(), self._namespace_lock.exclusive():
            created_ns = time.time_ns()
            info = SnapshotInfo(
                session=session,
                name=name,
                kind="state",
                created_at=ns_to_time(created_ns),
                expires_at=_optional_time(expiry_ns(created_ns, seconds)),
                file_count=0,
                total_bytes=0,
                meta={},
                base_dir="",
            )
            data = encode(
                info, created_ns=created_ns, expires_ns=expiry_ns(created_ns, seconds), value=value
            )
            self.catalog.commit(session, name, data)
        return info

    def get_state(self, session: str, name: str, default: Any = None) -> Any:
        """The stored value, or ``default`` if there is none; a corrupt one raises."""
        try:
            manifest = self.catalog.read(session, name)
        except SnapshotNotFound:
            return default
        if manifest.info.kind != "state":
            raise NotAStateSnapshotError(
                f"snapshot {name!r} in session {session!r} holds files, not a state value"
            )
        return manifest.value


def _optional_time(ns: int | None) -> datetime | None:
    return None if ns is None else ns_to_time(ns)


def _restore_report(plan: restoring.Plan, dry_run: bool) -> RestoreReport:
    report = RestoreReport(dry_run=dry_run, target=plan.target)
    for action in plan.actions:
        path = action.entry.path
        if action.operation == "unchanged":
            report.unchanged.append(path)
        elif action.operation == "remove":
            report.removed.append(path)
        else:
            report.written.append(path)
    return report
