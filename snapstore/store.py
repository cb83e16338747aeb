"""The ``SnapStore`` facade: the public API over blobs, manifests, locks and restore.

Every public method is safe to call from any number of threads sharing one ``SnapStore``, and
from any number of processes sharing one root: each takes the locks docs/concurrency.md lists.
"""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
import os
import re
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime, timedelta
from operator import attrgetter
from types import TracebackType
from typing import Any

from snapstore.compare import diff_entries, history, subtree
from snapstore.cyclic_gc import gc_paused
from snapstore.errors import (
    CorruptManifestError,
    InvalidNameError,
    InvalidValueError,
    LockTimeout,
    MissingPathError,
    NotAStateSnapshotError,
    ReadOnlyStoreError,
    SnapshotNotFound,
)
from snapstore.format.manifest import Manifest, encode, expiry_ns, ns_to_time, time_to_ns
from snapstore.format.names import encode_name, generated_name
from snapstore.format.paths import check_relative_path
from snapstore.fs.seam import LOCAL, FileSystem
from snapstore.maintenance import checks as maintenance
from snapstore.maintenance import packgc
from snapstore.maintenance.sweep import choose_victims, future_stamped
from snapstore.models import (
    DiffReport,
    GcReport,
    PathVersion,
    RestoreReport,
    Snapshot,
    SnapshotInfo,
    SweepReport,
    VerifyReport,
)
from snapstore.repo.backend import Backend, Handle, Kind
from snapstore.repo.blobs import Blobs
from snapstore.repo.catalog import Catalog, ManifestFile, manifest_name
from snapstore.repo.local import LocalBackend
from snapstore.repo.locks import (
    TargetLocks,
    exclusive_with_intent,
    filesystem_type,
    is_untrusted_lock_filesystem,
    shared_behind,
    target_key,
)
from snapstore.restore import PathNotInSnapshotError, select_entries
from snapstore.restore.job import RestoreJob, refuse_store_directory
from snapstore.restore.journal import JournalDir
from snapstore.restore.plan import Excluded
from snapstore.worktree.create import Request, take_snapshot
from snapstore.worktree.excludes import Matcher, check_patterns
from snapstore.worktree.scan import relative_to_base

Progress = Callable[[int, int], None]
Duration = float | int | timedelta
LATEST = "latest"
_LATEST_N = re.compile(r"latest~(\d+)")
DEFAULT_UNDO_DEPTH = 10


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
    faults or record operations. ``undo_depth``: how many undo backups each session keeps.
    Opening a store finishes or rolls back any restore that was killed part-way (see
    ``restore``). Use it as a context manager, or call ``close``, to release open files.
    """

    def __init__(
        self,
        root: str | os.PathLike[str] | Backend,
        *,
        lock_timeout: float = 30.0,
        durable: bool = True,
        fs: FileSystem | None = None,
        undo_depth: int = DEFAULT_UNDO_DEPTH,
    ) -> None:
        if isinstance(undo_depth, bool) or not isinstance(undo_depth, int) or undo_depth < 1:
            raise InvalidValueError(f"undo_depth must be a positive int, got {undo_depth!r}")
        self.lock_timeout = lock_timeout
        self.durable = durable
        self.undo_depth = undo_depth
        self.fs = fs or LOCAL
        if isinstance(root, str | os.PathLike):
            root = LocalBackend(
                os.fspath(root), fs=self.fs, durable=durable, lock_timeout=lock_timeout
            )
        self.backend: Backend = root
        self.root = root.properties.local_root or root.describe(Handle(Kind.MARKER, ""))
        self.read_only = not root.open(create=True)
        self.blobs = Blobs(root)
        self.catalog = Catalog(root)
        self.namespace_lock = root.lock("namespace")
        self.gc_lock = root.lock("gc")
        self.gc_intent = root.lock("gc-intent")
        self.target_locks = TargetLocks(root)
        self.journals = JournalDir(root)
        self._restores = RestoreJob(self)
        local_root = root.properties.local_root
        fs_type = None if local_root is None else filesystem_type(local_root)
        if is_untrusted_lock_filesystem(fs_type):
            warnings.warn(
                f"snapstore root {self.root} is on a {fs_type} filesystem, whose locks are not "
                "trustworthy: do not share it between processes on different machines",
                UnreliableLockWarning,
                stacklevel=2,
            )
        if not self.read_only:
            self._restores.recover_all()

    def __repr__(self) -> str:
        return f"SnapStore({self.root!r})"

    def own_roots(self) -> frozenset[tuple[int, int]]:
        """The store's own directory by device and inode, if it is on this machine: a scan
        leaves it out, a restore leaves it alone."""
        local_root = self.backend.properties.local_root
        if local_root is None:
            return frozenset()
        info = os.stat(local_root)
        return frozenset({(info.st_dev, info.st_ino)})

    def _check_writable(self, what: str) -> None:
        """ReadOnlyStoreError, before anything starts, if this process cannot write the store."""
        if self.read_only:
            raise ReadOnlyStoreError(
                f"cannot {what}: the store at {self.root} is read-only for this process"
            )

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
        """Release the files this object keeps open (pack descriptors). Safe to call more than
        once; the store stays usable (it reopens what it needs)."""
        self.backend.close()

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
        gitignore: bool = False,
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
        ``.jj``; ``default_excludes=False`` keeps them) and, with ``gitignore``, the rules of
        every ``.gitignore`` met; the rules are recorded, and a restore leaves what they match
        alone. ``if_exists="error"`` refuses to replace a snapshot of the same name
        (SnapshotExistsError); ``missing="error"`` refuses paths that do not exist
        (MissingPathError) instead of recording them as absent. ``rehash``: read every file,
        trusting no cached digest. ``progress(done, total)`` counts the files that must be read.

        Blobs are ingested before the namespace lock is taken; the manifest is committed last,
        atomically. On any failure nothing is committed and the previous snapshot of
        (session, name), if any, stays as it was. Waits for a restore into ``base_dir`` (or a
        directory holding it) to finish. ``SnapshotInfo.replaced`` says whether it replaced one.
        """
        encode_name(session, "session")
        name = generated_name() if name is None else name
        encode_name(name, "snapshot name")
        self._check_writable("create a snapshot")
        if paths is None:
            raise InvalidValueError("create needs the paths to snapshot")
        if isinstance(paths, str | os.PathLike):
            paths = [paths]
        if if_exists not in ("replace", "error"):
            raise InvalidValueError(f"if_exists must be 'replace' or 'error', not {if_exists!r}")
        if missing not in ("absent", "error"):
            raise InvalidValueError(f"missing must be 'absent' or 'error', not {missing!r}")
        base = os.path.abspath(os.fspath(base_dir))
        if not os.path.isdir(base):
            raise InvalidValueError(f"base_dir {base} is not a directory")
        real_base = os.path.realpath(base)
        refuse_store_directory(self.backend.properties.local_root, real_base, "base_dir")
        relative = [relative_to_base(base, path) for path in paths]
        if missing == "error":
            absent = [p for p in relative if not os.path.lexists(os.path.join(base, p))]
            if absent:
                raise MissingPathError(f"no such path under {base}: {', '.join(absent[:5])}")
        request = Request(
            session,
            name,
            base,
            relative,
            dict(meta or {}),
            ttl=ttl_seconds(ttl),
            skip_unreadable=skip_unreadable,
            rehash=rehash,
            exclude=tuple(check_patterns(exclude)),
            default_excludes=default_excludes,
            gitignore=gitignore,
            if_exists=if_exists,
        )
        expiry_ns(0, request.ttl)
        key = target_key(real_base)
        if self.journals.exists(key):
            with self.target_locks.restoring(real_base):
                self._restores.recover(key)
        with (
            self.target_locks.snapshotting(real_base),
            self.blobs_in_use(),
            gc_paused(),
        ):
            info, replaced = take_snapshot(self, request, progress=progress)
        return dataclasses.replace(info, replaced=True) if replaced else info

    @contextlib.contextmanager
    def blobs_in_use(self) -> Iterator[None]:
        """Hold the gc lock shared, so no blob disappears, and see the packs on disk now."""
        with shared_behind(self.gc_lock, self.gc_intent):
            self.blobs.refresh()
            yield

    def get(self, session: str, name: str) -> Snapshot:
        """The snapshot's header and entries; loads no blob. ``name`` may be a selector
        (``latest``, ``latest~N``, a unique prefix: see ``resolve``)."""
        manifest = self.catalog.read(session, self.resolve(session, name))
        return Snapshot(manifest.info, manifest.entries)

    def list(self, session: str | None = None) -> list[SnapshotInfo]:
        """Every valid checkpoint and state value (of one session, or all), oldest first;
        corrupt ones warn. Undo backups are not listed here (see ``backups``)."""
        return [m.header.info for m in self._listing(session) if not m.header.info.is_backup]

    def _listing(self, session: str | None) -> builtins.list[ManifestFile]:
        """Every valid manifest (backups too), oldest first by ``Header.order_ns``."""
        if session is not None:
            encode_name(session, "session")
        with gc_paused():
            found = self.catalog.headers(session, cached=True)
        found.sort(key=attrgetter("header.order_ns", "header.info.session", "header.info.name"))
        return found

    def latest(self, session: str) -> SnapshotInfo:
        """The newest file checkpoint of a session (never an undo backup, never a state
        value); SnapshotNotFound if it has none."""
        checkpoints = self._checkpoints(session)
        if not checkpoints:
            raise SnapshotNotFound(session, LATEST)
        return checkpoints[-1]

    def _checkpoints(self, session: str) -> builtins.list[SnapshotInfo]:
        return [info for info in self.list(session) if info.kind == "files"]

    def backups(self, session: str) -> builtins.list[SnapshotInfo]:
        """The session's undo backups, oldest first: each restore keeps the state it
        replaced as one (``backup_of`` names what was restored). ``undo`` restores them."""
        return [m.header.info for m in self._listing(session) if m.header.info.is_backup]

    def resolve(self, session: str, selector: str, *, prefix: bool = False) -> str:
        """The snapshot name a selector means: an existing name (checkpoint or backup) as
        is; else ``latest`` (the newest file checkpoint) or ``latest~N`` (the Nth before it);
        with ``prefix``, also the start of exactly one checkpoint's name (InvalidNameError if
        it starts several). SnapshotNotFound otherwise.

        Methods that take a snapshot name accept selectors, but never prefixes: a name given
        for a snapshot deleted meanwhile must not come to mean another one."""
        encode_name(selector, "snapshot name")
        if self.catalog.exists(session, selector):
            return selector
        if selector == LATEST or _LATEST_N.fullmatch(selector):
            back = 0 if selector == LATEST else int(selector[len(LATEST) + 1 :])
            checkpoints = self._checkpoints(session)
            if back >= len(checkpoints):
                raise SnapshotNotFound(session, selector)
            return checkpoints[-1 - back].name
        if not prefix:
            raise SnapshotNotFound(session, selector)
        matches = [i.name for i in self._checkpoints(session) if i.name.startswith(selector)]
        if not matches:
            raise SnapshotNotFound(session, selector)
        if len(matches) > 1:
            shown = ", ".join(repr(match) for match in sorted(matches)[:5])
            raise InvalidNameError(
                f"{selector!r} is the start of {len(matches)} snapshot names in session "
                f"{session!r} ({shown}); give more of the name"
            )
        return matches[0]

    def sessions(self) -> builtins.list[str]:
        """The sessions that hold at least one valid checkpoint or state value, sorted."""
        headers = self.catalog.headers(cached=True)
        return sorted({m.header.info.session for m in headers if not m.header.info.is_backup})

    def read(self, session: str, name: str, path: str) -> bytes:
        """One file's bytes from a snapshot, verified against its digest."""
        with self.blobs_in_use():
            manifest = self.files_manifest(session, name)
            (entry,) = select_entries(manifest.entries, [path])[:1]
            if entry.kind != "file" or entry.digest is None:
                raise PathNotInSnapshotError(
                    f"{entry.path!r} is a {entry.kind} in snapshot {name!r}, not a file"
                )
            return self.blobs.read(entry.digest, entry.size)

    def files_manifest(self, session: str, name: str) -> Manifest:
        """The decoded manifest of a file snapshot (``name`` may be a selector)."""
        manifest = self.catalog.read(session, self.resolve(session, name))
        if manifest.info.kind != "files":
            raise NotAStateSnapshotError(
                f"snapshot {name!r} in session {session!r} holds a state value, not files"
            )
        return manifest

    def exclusion_of(self, info: SnapshotInfo) -> Excluded | None:
        """What a restore of the snapshot ``info`` must leave alone as excluded: what its
        recorded exclude rules match."""
        return Matcher(info.excludes) if info.excludes else None

    # ----------------------------------------------------------------- restore and undo

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
            paths=None if paths is None else [os.fspath(p) for p in paths],
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
        SnapshotNotFound if the session has no undo backup."""
        if backup is None:
            found = self.backups(session)
            if not found:
                raise SnapshotNotFound(session, "(undo backup)")
            backup = found[-1].name
        return self.restore(
            session, backup, target, dry_run=dry_run, keep_special_bits=True, progress=progress
        )

    def commit_backup(
        self,
        session: str,
        name: str,
        restoring: str,
        target_dir: str,
        paths: builtins.list[str],
        recursive: set[str],
    ) -> SnapshotInfo:
        """Commit the undo backup ``name``: the current state of ``paths`` in ``target_dir``
        (those in ``recursive`` with everything below), kept before restoring ``restoring``.
        The gc lock must be held shared."""
        request = Request(
            session,
            name,
            target_dir,
            paths,
            {},
            shallow=frozenset(set(paths) - recursive),
            backup_of=restoring,
        )
        info, _ = take_snapshot(self, request)
        return info

    def delete_backup(self, session: str, name: str) -> None:
        """Delete one undo backup durably (if it exists)."""
        with self.namespace_lock.exclusive(), contextlib.suppress(FileNotFoundError):
            self.catalog.remove(manifest_name(session, name))

    def trim_backups(self, session: str) -> None:
        """Delete the session's oldest undo backups beyond ``undo_depth``, under the namespace
        lock. The cached listing only proposes: each one is read again from its manifest before
        it is deleted (a cache never decides a deletion)."""
        with self.namespace_lock.exclusive():
            found = [
                item
                for item in self.catalog.manifests(session, cached=True)
                if isinstance(item, ManifestFile) and item.header.info.is_backup
            ]
            found.sort(key=attrgetter("header.order_ns", "header.info.name"))
            for item in found[: max(0, len(found) - self.undo_depth)]:
                with contextlib.suppress(FileNotFoundError, CorruptManifestError):
                    if self.catalog.read_header(item.name).info.is_backup:
                        self.catalog.remove(item.name)

    def diff(
        self,
        session: str,
        name: str,
        other: str | None = None,
        *,
        target: str | os.PathLike[str] | None = None,
    ) -> DiffReport:
        """What changed: from snapshot ``name`` to snapshot ``other`` of the same session, or,
        without ``other``, what a restore of ``name`` into ``target`` (default: its base dir)
        would change. Every path is listed on its own: a directory added or removed comes with
        everything in it."""
        if isinstance(other, os.PathLike):
            raise InvalidValueError("diff compares two snapshots; pass a directory as target=")
        if other is not None:
            old, new = self.files_manifest(session, name), self.files_manifest(session, other)
            return diff_entries(old.entries, new.entries)
        plan = self._restores.dry_plan(session, name, None if target is None else os.fspath(target))
        report = DiffReport()
        for action in plan.changes:
            path = action.entry.path
            if action.operation == "remove":
                report.removed.append(path)
                if action.current == "dir":
                    report.removed.extend(subtree(os.path.join(plan.target, path), path))
            elif action.operation == "create":
                report.added.append(path)
            else:
                report.modified.append(path)
        return report

    def history(self, session: str, path: str) -> builtins.list[PathVersion]:
        """The checkpoints of a session (oldest first) in which ``path`` changed: where it first
        appears, and each where its kind, mode, size, digest or link target differs from the
        checkpoint before (an entry of None: gone from that one on). Reads manifests only."""
        wanted = check_relative_path(path)
        versions = []
        for info in self._checkpoints(session):
            try:
                manifest = self.catalog.read(session, info.name)
            except SnapshotNotFound:
                continue  # deleted since the listing
            found = next((e for e in manifest.entries if e.path == wanted), None)
            versions.append((manifest.info, found))
        return history(versions)

    # ----------------------------------------------------------------- delete and sweep

    def delete(self, session: str, name: str) -> bool:
        """Delete one snapshot durably; False if it did not exist. Errors are raised."""
        object_name = manifest_name(session, name)
        with self.namespace_lock.exclusive():
            try:
                self.catalog.remove(object_name)
            except FileNotFoundError:
                return False
            return True

    def delete_session(self, session: str) -> int:
        """Delete every snapshot of a session, undo backups included; returns how many."""
        encode_name(session, "session")
        with self.namespace_lock.exclusive():
            count = 0
            for object_name in self.catalog.names(session):
                with contextlib.suppress(FileNotFoundError):
                    self.catalog.remove(object_name)
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
        snapshots (resume values) are removed only by their own expiry; undo backups only by
        their own retention (``undo_depth``). Ages and order go by ``Header.order_ns``, which
        a clock running ahead cannot push into the future; snapshots whose recorded time is
        ahead of their file's are reported in ``SweepReport.future_stamped``.
        """
        seconds = ttl_seconds(ttl)
        if seconds is not None and seconds < 0:
            raise InvalidValueError(f"ttl must not be negative, got {seconds}")
        if keep_last is not None and (isinstance(keep_last, bool) or keep_last < 0):
            raise InvalidValueError(f"keep_last must be a non-negative int, got {keep_last!r}")
        now_ns = time_to_ns(now) if now is not None else time.time_ns()
        report = SweepReport()
        with self.namespace_lock.exclusive():
            found = self.catalog.headers()
            report.future_stamped = future_stamped(found)
            for victim in choose_victims(found, ttl=seconds, keep_last=keep_last, now_ns=now_ns):
                if not dry_run:
                    self.catalog.remove(victim.name)
                report.deleted.append((victim.header.info.session, victim.header.info.name))
        return report

    # ----------------------------------------------------------------- gc and verify

    def gc(self, *, dry_run: bool = False) -> GcReport:
        """Delete blobs no manifest on disk references, and stale temp files.

        Waits up to ``lock_timeout`` for writers and readers to finish (new ones wait behind
        it meanwhile), then reports that it was skipped. A corrupt manifest stops blob
        deletion (its references are unknown).
        """
        report = GcReport()
        try:
            with exclusive_with_intent(self.gc_lock, self.gc_intent):
                referenced, corrupt = maintenance.referenced_digests(self.catalog)
                report.temp_files_removed = maintenance.clean_temp(self.backend, dry_run)
                if corrupt:
                    report.skipped = True
                    report.reason = (
                        f"{len(corrupt)} corrupt manifest(s) hide which blobs are in use; no blob "
                        f"was deleted (run verify): {corrupt[0]}"
                    )
                    return report
                self.blobs.refresh()
                loose = self.blobs.loose
                for digest in builtins.list(loose.iter_digests()):
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
                    with self.namespace_lock.exclusive():
                        self.catalog.tidy()
        except LockTimeout as error:
            report.skipped = True
            report.reason = f"the store is busy: {error}"
        return report

    def verify(self, *, deep: bool = False, progress: Progress | None = None) -> VerifyReport:
        """Check every committed snapshot (undo backups too): manifests decode, referenced
        blobs exist (and, with ``deep``, hash right). Temp files and unreferenced blobs are
        listed as garbage."""
        report = VerifyReport()
        with self.blobs_in_use():
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
            report.garbage.extend(self.backend.stale_temps())
            loose = self.blobs.loose
            report.garbage.extend(
                loose.path(d) for d in loose.iter_digests() if d not in referenced
            )
            report.garbage.extend(packs.pack_path(pack_id) for pack_id in packs.orphans())
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
        with shared_behind(self.gc_lock, self.gc_intent), self.namespace_lock.exclusive():
            created_ns = time.time_ns()
            expires_ns = expiry_ns(created_ns, seconds)
            info = SnapshotInfo(
                session=session,
                name=name,
                kind="state",
                created_at=ns_to_time(created_ns),
                expires_at=None if expires_ns is None else ns_to_time(expires_ns),
                file_count=0,
                total_bytes=0,
                meta={},
                base_dir="",
            )
            data = encode(info, created_ns=created_ns, expires_ns=expires_ns, value=value)
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
