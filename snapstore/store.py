"""The ``SnapStore`` facade: the public API, its argument checks and its lock choreography.

Each operation delegates to the module that owns it (docs/architecture.md): the create
pipeline to ``worktree.create``, restores and undos to ``restore.job``, sweeps, gc and verify
to ``maintenance``, reads and listings to ``repo.repository``. Every public method is safe to
call from any number of threads sharing one ``SnapStore``, and from any number of processes
sharing one root: each takes the locks docs/concurrency.md lists. The methods are grouped by
concern in ``snapstore.facade``: opening (``base``), restores and diffs (``restoring``),
deletion and maintenance (``upkeep``); creates, reads and state values are here.

Those modules are imported when an operation first needs them, so a process that only lists
or reads (a command line run) does not load the create, restore and gc code.
"""

from __future__ import annotations

import builtins
import dataclasses
import os
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from snapstore.errors import InvalidValueError, PathNotInSnapshotError
from snapstore.facade.base import DEFAULT_UNDO_DEPTH, Duration, Progress
from snapstore.facade.keys import KeyMethods
from snapstore.facade.restoring import RestoringMethods
from snapstore.facade.upkeep import UpkeepMethods
from snapstore.format.times import ttl_seconds
from snapstore.models import FileSlice, PathVersion, Snapshot, SnapshotInfo
from snapstore.worktree.options import CreateOptions

if TYPE_CHECKING:
    from snapstore.worktree.create import Request
    from snapstore.worktree.incremental import ChangeSource, IncrementalReport

_Taken = TypeVar("_Taken")

__all__ = ["DEFAULT_UNDO_DEPTH", "SnapStore"]


class SnapStore(RestoringMethods, UpkeepMethods, KeyMethods):
    """A storage root shared by several processes: snapshots of file sets and resume values.

    ``root`` is a directory (created if missing), an object storage URL
    (``s3://bucket/prefix``, docs/object-storage.md), or a backend (``snapstore.backend``).
    Every call reads the store as it is now; nothing is cached as authority. ``durable=False``
    skips fsync (tests and scratch stores only). ``fs`` is the I/O seam tests wrap to inject
    faults or record operations. ``lock_timeout``: how many seconds a call waits for a lock
    another process holds before it raises LockTimeout (``math.inf``: no limit; a negative,
    NaN or non-number one is an InvalidValueError). ``undo_depth``: how many undo backups
    each session keeps.
    ``create=False`` opens only an existing store (StoreNotFoundError otherwise) and creates
    nothing. ``fold_threshold``: how many small packs make a create start folding them in
    the background (None: ``SNAPSTORE_FOLD_THRESHOLD`` or 32; 0: never; see
    docs/performance.md). Opening a store finishes or rolls back any restore that was killed
    part-way (see ``restore``). Use it as a context manager, or call ``close``, to release
    open files at once (and wait for a fold step in progress); a store dropped without
    either releases them when it is collected, once no thread uses it and its fold step
    has finished. ``password`` or ``key_file`` (a file whose first line is the password)
    opens an encrypted store, and makes a new store encrypted; ``encrypt=True`` insists on
    one (docs/encryption.md).
    """

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
        from snapstore.worktree.create import take_snapshot

        options = CreateOptions(
            base_dir,
            meta,
            ttl_seconds(ttl),
            exclude,
            default_excludes,
            gitignore,
            if_exists,
            missing,
            skip_unreadable,
            rehash,
        )
        info, replaced = self._checkpoint(
            session,
            name,
            paths,
            options,
            lambda request: take_snapshot(self._repository, request, progress=progress),
        )
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
        from snapstore.worktree.incremental import take_incremental

        options = CreateOptions(
            base_dir,
            meta,
            ttl_seconds(ttl),
            exclude,
            default_excludes,
            gitignore,
            if_exists,
            missing,
            skip_unreadable,
            rehash,
        )
        report, replaced = self._checkpoint(
            session,
            name,
            paths,
            options,
            lambda request: take_incremental(
                self._repository, request, parent, changes, progress=progress
            ),
        )
        if replaced:
            return dataclasses.replace(report, info=dataclasses.replace(report.info, replaced=True))
        return report

    def _checkpoint(
        self,
        session: str,
        name: str | None,
        paths: Iterable[str | os.PathLike[str]] | str | os.PathLike[str] | None,
        options: CreateOptions,
        take: Callable[[Request], tuple[_Taken, bool]],
    ) -> tuple[_Taken, bool]:
        """What ``create`` and ``create_incremental`` share: the request checked, the base
        directory guarded (its interrupted restore recovered, its locks and the gc lock
        held) while ``take`` scans and commits, then a fold started if one is due."""
        from snapstore.worktree.create import checkpoint_request

        with self._autofold.creating():
            request = checkpoint_request(self._repository, session, name, paths, options)
            with self._guard.snapshotting(request.base, real_base=request.real_base):
                taken = take(request)
            self._autofold.after_commit()
        return taken

    def get(self, session: str, name: str) -> Snapshot:
        """The snapshot's header and entries; loads no blob. ``name`` may be a selector
        (``latest``, ``latest~N``: see ``resolve``)."""
        with self._repository.blobs_in_use():
            manifest = self._repository.catalog.read(session, self.resolve(session, name))
            return Snapshot(manifest.info, self._repository.trees.entries(manifest))

    def list(self, session: str | None = None) -> list[SnapshotInfo]:
        """Every valid checkpoint and state value (of one session, or all), oldest first;
        corrupt ones warn. Undo backups are not listed here (see ``backups``)."""
        return self._repository.infos(session)

    def latest(self, session: str) -> SnapshotInfo:
        """The newest file checkpoint of a session (the last committed: never an undo backup,
        never a state value); SnapshotNotFound if it has none."""
        return self._repository.latest(session)

    def backups(self, session: str) -> builtins.list[SnapshotInfo]:
        """The session's undo backups, oldest first: each restore keeps the state it
        replaced as one (``backup_of`` names what was restored). ``undo`` restores them."""
        return self._repository.backups(session)

    def resolve(self, session: str, selector: str, *, prefix: bool = False) -> str:
        """The snapshot name a selector means: an existing name (checkpoint or backup) as
        is; else ``latest`` (the newest file checkpoint) or ``latest~N`` (the Nth before it);
        with ``prefix``, also the start of exactly one checkpoint's name (InvalidNameError if
        it starts several). SnapshotNotFound otherwise.

        Methods that take a snapshot name accept selectors, but never prefixes: a name given
        for a snapshot deleted meanwhile must not come to mean another one."""
        return self._repository.resolve(session, selector, prefix=prefix)

    def sessions(self) -> builtins.list[str]:
        """The sessions that hold at least one valid checkpoint or state value, sorted."""
        headers = self._repository.catalog.headers(cached=True)
        return sorted({m.header.info.session for m in headers if not m.header.info.is_backup})

    def read(self, session: str, name: str, path: str) -> bytes:
        """One file's bytes from a snapshot, verified against its digest."""
        return self._repository.read_file(session, name, path)

    def read_slice(
        self, session: str, name: str, path: str, *, offset: int = 0, length: int | None = None
    ) -> FileSlice:
        """Part of one file of a snapshot: at most ``length`` bytes (None: to the end) from
        ``offset``, with the file's size and whether it is binary (a NUL in its first 8 KiB).
        A file stored as one blob is read in one streaming pass, verified against its digest;
        of a file stored as an extent map (a large file, or one with holes) only the pieces
        holding the part asked for (and the first 8 KiB) are read, each verified. Only those
        bytes are kept in memory."""
        from snapstore.patch import BINARY_PROBE_BYTES, is_binary
        from snapstore.repo.contents import read_range

        if offset < 0 or (length is not None and length < 0):
            raise InvalidValueError("offset and length must not be negative")
        repo = self._repository
        with repo.blobs_in_use():
            entry = repo.trees.lookup(repo.files_manifest(session, name), path)
            if entry.kind != "file" or entry.digest is None:
                raise PathNotInSnapshotError(
                    f"{entry.path!r} is a {entry.kind} in snapshot {name!r}, not a file"
                )
            head, data = read_range(repo.blobs, entry, offset, length, BINARY_PROBE_BYTES)
        return FileSlice(entry.path, entry.size, min(offset, entry.size), data, is_binary(head))

    def history(self, session: str, path: str) -> builtins.list[PathVersion]:
        """The checkpoints of a session (oldest first) in which ``path`` changed: where it first
        appears, and each where its kind, mode, size, digest or link target differs from the
        checkpoint before (an entry of None: gone from that one on). Reads manifests only."""
        from snapstore.compare import path_history

        return path_history(self._repository, session, path)

    def put_state(
        self, session: str, name: str, value: Any, *, ttl: Duration | None = None
    ) -> SnapshotInfo:
        """Durably store one msgpack-encodable value (a resume position) as (session, name);
        its maps and lists may nest at most 64 deep (InvalidValueError)."""
        return self._repository.put_state(session, name, value, ttl_seconds(ttl))

    def get_state(self, session: str, name: str, default: Any = None) -> Any:
        """The stored value, or ``default`` if there is none; a corrupt one raises."""
        return self._repository.get_state(session, name, default)
