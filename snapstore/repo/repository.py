"""A repository: one store's objects and locks, and the reads every operation shares.

It receives its backend (the local directory, memory, ...) rather than building one, so
tests and other backends plug in. The work tree, restore and maintenance sides use a
repository; none of them knows where or how its objects are kept.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import Any

from snapstore.backend.layout import (
    FORMAT_MAJOR,
    FORMAT_TEXT,
    MARKER_MAX_BYTES,
    PACK_LOG_MAJOR,
    marker_major,
)
from snapstore.backend.seam import Backend, Handle, Kind
from snapstore.cyclic_gc import gc_paused
from snapstore.errors import (
    CorruptManifestError,
    MissingBlobError,
    NotAStateSnapshotError,
    PathNotInSnapshotError,
    ReadOnlyStoreError,
    SnapshotExistsError,
    SnapshotNotFound,
)
from snapstore.format.manifest import EntryRow, Manifest
from snapstore.format.names import encode_name
from snapstore.fs.stamps import FileId, file_id
from snapstore.models import FileEntry, SnapshotInfo
from snapstore.repo import selectors
from snapstore.repo.blobs import Blobs
from snapstore.repo.catalog import Catalog, ManifestFile, manifest_name
from snapstore.repo.commits import Draft
from snapstore.repo.contents import read_content
from snapstore.repo.heads import Head
from snapstore.repo.locks import shared_behind
from snapstore.repo.sessions import Sessions, in_order, infos_in_order
from snapstore.repo.trees import Trees


class Repository:
    """The objects (blobs, manifests, journals) and locks of one store, over ``backend``."""

    def __init__(self, backend: Backend, *, create: bool = True) -> None:
        self.backend = backend
        self.read_only = not backend.open(create=create)
        self.blobs = Blobs(backend)
        self.trees = Trees(self.blobs)
        self.catalog = Catalog(backend)
        self.sessions = Sessions(backend, self.catalog, self.require_current_format)
        self.gc_lock = backend.lock("gc")
        self.gc_intent = backend.lock("gc-intent")
        self.format_major = self._stored_format()
        self.blobs.packs.follow_log = self.format_major >= PACK_LOG_MAJOR
        self._real_root: str | None = None

    def _stored_format(self) -> int:
        """The major format the store's marker names (a backend with no marker object, such
        as memory, holds only what this version wrote)."""
        try:
            data, _ = self.backend.read(Handle(Kind.MARKER, ""), max_bytes=MARKER_MAX_BYTES)
        except FileNotFoundError:
            return FORMAT_MAJOR
        return marker_major(data)

    def require_current_format(self) -> None:
        """Mark a store of an older format as the current one before anything of the current
        format is written into it: from then on an older version refuses the store instead
        of taking its new packs for garbage or committing under locks this version does not
        take. What is left of format 1 is read as it is, and converted by gc or ``upgrade``.
        Only from then on does this process follow the pack log (an older version's gc
        deletes packs without starting a new one)."""
        if self.format_major < FORMAT_MAJOR:
            self.backend.write(Handle(Kind.MARKER, ""), FORMAT_TEXT.encode())
            self.format_major = FORMAT_MAJOR
            self.blobs.packs.follow_log = True

    @property
    def root(self) -> str:
        """The store's directory, or how its backend names it when it is not one here."""
        return self.backend.properties.local_root or self.backend.describe(Handle(Kind.MARKER, ""))

    @property
    def real_root(self) -> str | None:
        """The store's directory with every symlink resolved, if it is on this machine
        (resolved once: a check that a directory lies outside the store also looks for the
        FORMAT marker of every directory above it, which finds the store wherever its
        path now leads)."""
        local_root = self.backend.properties.local_root
        if local_root is None:
            return None
        if self._real_root is None:
            self._real_root = os.path.realpath(local_root)
        return self._real_root

    def own_roots(self) -> frozenset[FileId]:
        """The store's own directory by device and inode, if it is on this machine: a scan
        leaves it out, a restore leaves it alone."""
        local_root = self.backend.properties.local_root
        if local_root is None:
            return frozenset()
        return frozenset({file_id(os.stat(local_root))})

    def check_writable(self, what: str) -> None:
        """ReadOnlyStoreError, before anything starts, if this process cannot write the store."""
        if self.read_only:
            raise ReadOnlyStoreError(
                f"cannot {what}: the store at {self.root} is read-only for this process"
            )

    @contextlib.contextmanager
    def blobs_in_use(self) -> Iterator[None]:
        """Hold the gc lock shared, so no blob disappears, and see the packs stored now."""
        with shared_behind(self.gc_lock, self.gc_intent):
            self.blobs.refresh()
            yield

    # ------------------------------------------------------------------ listings

    def listing(self, session: str | None) -> list[ManifestFile]:
        """Every valid manifest (undo backups too), oldest first (``sessions.in_order``)."""
        if session is not None:
            encode_name(session, "session")
        with gc_paused():
            return in_order(self.catalog.headers(session, cached=True))

    def checkpoints(self, session: str) -> list[SnapshotInfo]:
        """The session's file checkpoints (no backup, no state value), oldest first."""
        return [
            m.header.info
            for m in self.listing(session)
            if m.header.info.kind == "files" and not m.header.info.is_backup
        ]

    def infos(self, session: str | None, *, backups: bool = False) -> list[SnapshotInfo]:
        """``listing``'s checkpoints and state values (or with ``backups``, its undo backups
        only) as infos, built from the header cache's rows in bulk (``infos_in_order``).
        The cyclic collector stays paused until the rows are gone: its one pass then visits
        the infos alone."""
        if session is not None:
            encode_name(session, "session")
        with gc_paused():
            return infos_in_order(self.catalog.listed_rows(session), backups=backups)

    def backups(self, session: str) -> list[SnapshotInfo]:
        """The session's undo backups, oldest first."""
        return self.infos(session, backups=True)

    def latest(self, session: str, back: int = 0) -> SnapshotInfo:
        """The ``back``-th file checkpoint of the session before its newest (0: the newest);
        SnapshotNotFound if there is none (see ``selectors``)."""
        return selectors.latest(self, session, back)

    def resolve(self, session: str, selector: str, *, prefix: bool = False) -> str:
        """The snapshot name a selector means (see ``SnapStore.resolve`` and ``selectors``)."""
        return selectors.resolve(self, session, selector, prefix=prefix)

    def files_header(self, session: str, name: str) -> SnapshotInfo:
        """The header of a file snapshot (``name`` may be a selector), read alone."""
        resolved = self.resolve(session, name)
        object_name = manifest_name(session, resolved)
        try:
            info = self.catalog.read_header(object_name).info
        except (FileNotFoundError, NotADirectoryError):
            raise SnapshotNotFound(session, name) from None
        except CorruptManifestError as error:
            where = self.backend.describe(Handle(Kind.MANIFEST, object_name))
            raise CorruptManifestError(
                f"snapshot {resolved!r} in session {session!r} is corrupt ({where}): {error}"
            ) from None
        if info.kind != "files":
            raise NotAStateSnapshotError(
                f"snapshot {name!r} in session {session!r} holds a state value, not files"
            )
        return info

    def files_manifest(self, session: str, name: str) -> Manifest:
        """The decoded manifest of a file snapshot (``name`` may be a selector)."""
        manifest = self.catalog.read(session, self.resolve(session, name))
        if manifest.info.kind != "files":
            raise NotAStateSnapshotError(
                f"snapshot {name!r} in session {session!r} holds a state value, not files"
            )
        return manifest

    def entries(self, session: str, name: str) -> tuple[SnapshotInfo, tuple[FileEntry, ...]]:
        """A file snapshot's header and every entry (its trees read under the gc lock)."""
        with self.blobs_in_use():
            manifest = self.files_manifest(session, name)
            return manifest.info, self.trees.entries(manifest)

    def read_file(self, session: str, name: str, path: str) -> bytes:
        """One file's verified bytes from a snapshot (under the shared gc lock); only the
        directories on the way to it are read."""
        with self.blobs_in_use():
            manifest = self.files_manifest(session, name)
            entry = self.trees.lookup(manifest, path)
            if entry.kind != "file" or entry.digest is None:
                raise PathNotInSnapshotError(
                    f"{entry.path!r} is a {entry.kind} in snapshot {name!r}, not a file"
                )
            return read_content(self.blobs, entry)

    # ------------------------------------------------------------------ state values

    def commit_snapshot(
        self,
        draft: Draft,
        *,
        if_exists: str = "replace",
        unverified: Sequence[EntryRow] = (),
        committed: Callable[[SnapshotInfo], None] | None = None,
    ) -> tuple[SnapshotInfo, bool]:
        """Commit ``draft`` as the snapshot (session, name): the one place a new manifest is
        written, whether it holds a checkpoint, an undo backup or a state value. Returns its
        header and whether it replaced a snapshot of that name.

        First every blob of ``unverified`` (rows whose blobs the snapshot counts on: files,
        extent maps and their pieces, trees) must be stored (MissingBlobError otherwise).
        Then, under the session's lock and only for the commit, it refuses an existing name
        if ``if_exists="error"`` (SnapshotExistsError), numbers the snapshot after every
        snapshot of the session, takes its times, writes the manifest atomically and durably
        and moves the session's head; ``committed(header)`` runs last, still under the lock
        (the manifest is the one just written). The gc lock must be held shared by the
        caller, from before its blobs were written or claimed.

        Maintenance writes no new snapshot and so never comes here: a format conversion
        (``maintenance.upgrade``) replaces a manifest by another encoding of the same one,
        keeping its times and number and leaving the head as it is, and only if the object
        is still the version it read (``SessionChange.rewrite``)."""
        missing = self.blobs.first_missing(unverified, relist=True)
        if missing is not None:
            path, digest = missing[0], missing[5]
            assert digest is not None
            raise MissingBlobError(f"blob {digest.hex()} for {path!r} vanished before commit")
        with self.sessions.changing(draft.session) as change:
            if if_exists == "error" and self.catalog.exists(draft.session, draft.name):
                raise SnapshotExistsError(draft.session, draft.name)
            seq = change.next_seq
            info, data = draft.manifest(time.time_ns(), seq)
            checkpoint = draft.kind == "files" and draft.backup_of is None
            backup = draft.backup_of is not None
            replaced = change.commit(
                draft.session, draft.name, data, seq, checkpoint=checkpoint, backup=backup
            )
            if committed is not None:
                committed(info)
        return info, replaced

    def put_state(self, session: str, name: str, value: Any, ttl: float | None) -> SnapshotInfo:
        """Durably store one value as (session, name) (see ``SnapStore.put_state``)."""
        encode_name(session, "session")
        encode_name(name, "snapshot name")
        draft = Draft(session, name, "state", ttl=ttl, value=value)
        draft.check()
        self.check_writable("store a state value")
        with shared_behind(self.gc_lock, self.gc_intent):
            self.require_current_format()
            return self.commit_snapshot(draft)[0]

    def get_state(self, session: str, name: str, default: Any) -> Any:
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

    # ------------------------------------------------------------------ deletions

    def delete(self, session: str, name: str) -> bool:
        """Delete one snapshot durably under its session's lock; False if it was not there."""
        encode_name(session, "session")
        encode_name(name, "snapshot name")
        self.check_writable("delete a snapshot")
        with self.sessions.changing(session) as change:
            try:
                change.remove(manifest_name(session, name), name)
            except FileNotFoundError:
                return False
            return True

    def delete_session(self, session: str) -> int:
        """Delete every manifest of a session under one hold of its lock; returns how many
        were deleted."""
        encode_name(session, "session")
        self.check_writable("delete a session")
        deleted = 0
        with self.sessions.changing(session) as change:
            for object_name in self.catalog.names(session):
                with contextlib.suppress(FileNotFoundError):
                    change.remove(object_name, "")
                    deleted += 1
            change.head = Head()
        return deleted

    def delete_backup(self, session: str, name: str) -> None:
        """Delete one undo backup durably (if it exists)."""
        self.delete(session, name)

    def trim_backups(
        self, session: str, depth: int, in_use: Callable[[], Collection[str] | None]
    ) -> None:
        """Delete the session's oldest undo backups beyond ``depth``, under the session's
        lock, except those ``in_use()`` names (asked under the lock; None: it cannot tell,
        and nothing is deleted). The session's head or a cached listing only proposes: each
        one is read again from its manifest before it is deleted (a cache never decides a
        deletion)."""
        with self.sessions.changing(session) as change:
            keep = in_use()
            if keep is None:
                return
            head = change.head
            if head is not None and head.backups_all:
                names = list(head.backups)
            else:
                found = [
                    item
                    for item in self.catalog.manifests(session, cached=True)
                    if isinstance(item, ManifestFile) and item.header.info.is_backup
                ]
                found.sort(key=lambda item: item.header.session_order)
                names = [item.header.info.name for item in found]
            for name in names[: max(0, len(names) - depth)]:
                if name in keep:
                    continue
                object_name = manifest_name(session, name)
                gone = (FileNotFoundError, NotADirectoryError, CorruptManifestError)
                with contextlib.suppress(*gone):
                    header, version = self.catalog.read_versioned_header(object_name)
                    if header.info.is_backup:
                        change.remove(object_name, name, version)
