"""A session's snapshots as one unit of change: its commit lock, its numbers, its head.

Every change to a session's snapshots (a commit, a delete, a sweep or a trim of it, gc's
tidy-up of it) holds that session's lock (``sessions/<session-dir>``) exclusively, and only
for the change itself: changes to different sessions never wait for each other. A commit
numbers its snapshot with the session's next sequence number, taken under that lock, so the
order of a session's snapshots is the order of their commits whatever the writers' clocks
say. The highest number and the newest names are kept in the session's head (``heads``),
which spares a commit, ``latest`` and ``latest~N`` a listing of the session.
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from itertools import count, repeat
from operator import attrgetter, itemgetter

from snapstore.backend.seam import Backend, Handle, Kind, Lock, Version
from snapstore.errors import ConcurrentWriteError
from snapstore.format.header import (
    ROW_BACKUP_OF,
    ROW_NAME,
    ROW_SEQ,
    infos_of_rows,
    row_order_ns,
)
from snapstore.format.names import dir_name
from snapstore.models import SnapshotInfo
from snapstore.repo.catalog import Catalog, ManifestFile, SessionRows, manifest_name
from snapstore.repo.gcjournal import GcJournal
from snapstore.repo.heads import Head, HeadStore


def session_dir_of(object_name: str) -> str:
    """The session directory of a manifest's object name (``<session-dir>/<name-dir>``)."""
    return object_name.partition("/")[0]


_BY_TIME = attrgetter("header.order_ns", "header.info.session", "header.info.name")
_BY_COMMIT = attrgetter("header.seq", "header.order_ns", "header.info.name")
"""``Header.session_order`` of a manifest, read in C (a listing sorts 10,000 of them)."""
_SESSION = attrgetter("header.info.session")


def in_order(found: list[ManifestFile]) -> list[ManifestFile]:
    """Manifests oldest first: snapshots of different sessions by time (``order_ns``), those of
    one session in the order of their commits (``Header.session_order``), which a clock
    running behind cannot invert: the places of each session's snapshots in the order by
    time are filled with them in the order of their commits."""
    by_time = sorted(found, key=_BY_TIME)
    sessions = list(map(_SESSION, by_time))
    groups: dict[str, list[ManifestFile]] = defaultdict(list)
    for item, session in zip(by_time, sessions, strict=True):
        groups[session].append(item)
    reordered: dict[str, Iterator[ManifestFile]] = {}
    for session, items in groups.items():
        keys = list(map(_BY_COMMIT, items))
        if keys != sorted(keys):
            reordered[session] = iter(sorted(items, key=_BY_COMMIT))
    if not reordered:
        return by_time
    return [
        next(reordered[session]) if session in reordered else item
        for item, session in zip(by_time, sessions, strict=True)
    ]


_FIRST, _SECOND, _LAST = itemgetter(0), itemgetter(1), itemgetter(-1)


def infos_in_order(groups: Iterable[SessionRows], *, backups: bool) -> list[SnapshotInfo]:
    """The infos of the rows of ``groups`` (undo backups only with ``backups``, else the
    others), in the order of ``in_order``: each session's places in the order by time
    (creation time, session, name) are filled with its snapshots (undo backups too) in the
    order of their commits, then the ones not asked for leave theirs. Built in bulk
    (``header.infos_of_rows``) and sorted once, on tuples whose leading fields never tie:
    a listing of 10,000 snapshots makes no call per row."""
    decorated: list[tuple[int, str, str, int, SnapshotInfo]] = []
    places = count()
    for _, session, rows in groups:
        orders = row_order_ns(rows)
        names = list(map(ROW_NAME, rows))
        by_time = list(zip(orders, names, strict=True))
        by_commit = list(zip(map(ROW_SEQ, rows), orders, names, strict=True))
        slots = sorted(by_time)
        if slots == by_time and by_commit == sorted(by_commit):
            placed = list(rows)  # the usual case: rows by name are in time and commit order
        else:
            by_place = sorted(range(len(rows)), key=by_commit.__getitem__)
            placed = list(map(rows.__getitem__, by_place))
        marks = list(map(ROW_BACKUP_OF, placed))
        if marks.count(None) != (0 if backups else len(marks)):  # not all of them wanted
            wanted = [
                (slot, row)
                for slot, row, mark in zip(slots, placed, marks, strict=True)
                if (mark is not None) is backups
            ]
            slots, placed = [slot for slot, _ in wanted], [row for _, row in wanted]
        if not placed:
            continue
        infos = infos_of_rows(session, placed)
        decorated += zip(map(_FIRST, slots), repeat(session), map(_SECOND, slots), places, infos)
    decorated.sort()
    return list(map(_LAST, decorated))


class SessionChange:
    """One hold of a session's lock: the session's head as far as it is known, and the
    changes made under it, each of which the head follows (see ``Sessions.changing``)."""

    def __init__(self, sessions: Sessions, session_dir: str, head: Head | None) -> None:
        self._sessions = sessions
        self.session_dir = session_dir
        self.head = head
        self._changed = False
        self._in_doubt = False

    def _built_head(self) -> Head:
        """The head, listing the session (with the header cache) if it was not known."""
        if self.head is None:
            catalog = self._sessions.catalog
            found = catalog.headers(session_dir=self.session_dir, cached=True)
            self.head = Head.of(item.header for item in found)
        return self.head

    @property
    def next_seq(self) -> int:
        """The number the next commit into the session takes."""
        return self._built_head().seq + 1

    def _start(self) -> None:
        if not self._changed:
            self._sessions.before_change()
            self._sessions.heads.forget(self.session_dir)
            self._changed = True
        self._in_doubt = True

    def commit(
        self, session: str, name: str, data: bytes, seq: int, *, checkpoint: bool, backup: bool
    ) -> bool:
        """Install ``data`` (a manifest numbered ``seq``, from ``next_seq``) as the snapshot
        ``name``; True if it replaced one. ``Repository.commit_snapshot`` is its one caller."""
        self._start()
        self._sessions.gc_journal.note(manifest_name(session, name))
        replaced = self._sessions.catalog.commit(session, name, data)
        head = self._built_head()
        self.head = head.committed(seq, name, checkpoint=checkpoint, backup=backup)
        self._in_doubt = False
        return replaced

    def remove(
        self, object_name: str, name: str, version: Version | None = None, *, durable: bool = True
    ) -> None:
        """Delete the manifest ``object_name`` of snapshot ``name`` (see ``Catalog.remove``)."""
        self._start()
        try:
            self._sessions.catalog.remove(object_name, version, durable=durable)
        except (FileNotFoundError, NotADirectoryError, ConcurrentWriteError):
            self._in_doubt = False  # nothing was removed
            raise
        if self.head is not None:
            self.head = self.head.removed([name])
        self._in_doubt = False

    def rewrite(self, object_name: str, data: bytes) -> None:
        """Replace a manifest by another encoding of the same snapshot (same name, number and
        header: a format conversion), which the head does not see. No new snapshot, so not
        through ``Repository.commit_snapshot`` (its docstring says why)."""
        self._start()
        self._sessions.gc_journal.note(object_name)
        self._sessions.backend.write(Handle(Kind.MANIFEST, object_name), data)
        self._in_doubt = False

    def finish(self) -> None:
        """Write the head the changes led to (none if a change failed half-way, or the head
        was never known: the next change lists the session)."""
        if self._changed and not self._in_doubt and self.head is not None:
            self._sessions.heads.write(self.session_dir, self.head)


class Sessions:
    """The sessions of one store: their locks and heads.

    ``before_change`` runs before the first write of every change (a commit, a removal, a
    rewrite, and the removal of the head that precedes them): the repository marks an older
    store as the current format there, so no change of a session reaches a store an older
    version still accepts. A change that only looks (a dry run) never calls it."""

    def __init__(
        self, backend: Backend, catalog: Catalog, before_change: Callable[[], None]
    ) -> None:
        self.backend = backend
        self.catalog = catalog
        self.before_change = before_change
        self.heads = HeadStore(backend)
        self.gc_journal = GcJournal(backend)

    def lock(self, session: str) -> Lock:
        """The lock of a session."""
        return self.lock_of_dir(dir_name(session, "session"), f"session {session!r}")

    def lock_of_dir(self, session_dir: str, label: str | None = None) -> Lock:
        """The lock of the session stored in ``session_dir``."""
        return self.backend.lock(f"sessions/{session_dir}", label or f"session {session_dir}")

    @contextlib.contextmanager
    def changing(self, session: str) -> Iterator[SessionChange]:
        """Hold the session's lock for a change (waits up to the lock timeout)."""
        with self.changing_dir(dir_name(session, "session"), f"session {session!r}") as change:
            yield change

    @contextlib.contextmanager
    def changing_dir(self, session_dir: str, label: str | None = None) -> Iterator[SessionChange]:
        """``changing``, for the session stored in ``session_dir``."""
        with self.lock_of_dir(session_dir, label).exclusive():
            change = SessionChange(self, session_dir, self.heads.read(session_dir))
            try:
                yield change
            finally:
                change.finish()

    def head(self, session: str) -> Head | None:
        """The session's head, if one can be believed now (no lock taken)."""
        return self.heads.read(dir_name(session, "session"))
