"""A cache of manifest headers, so a listing need not open and decode every manifest.

The cache keeps, per session directory, one packed entry: the session's raw name, the
session's listing stamp when the entry was made (if it could be trusted), the headers of its
manifests as rows, and the version each manifest object had. A listing uses an entry in one
of two ways (docs/format.md, "Header cache"):

- **by stamp**: if the backend's settled listing stamp of the session (``listing_stamps``:
  a value that changes whenever a manifest of the session is added, replaced or removed) is
  the one recorded, nothing of the session changed since the entry was made: its rows are
  the session's headers, and the session is not even listed. The stamp is recorded only
  after a listing of the session found every entry a valid manifest, and is the one read
  before that listing: a change during it leaves another stamp;
- **by version**: otherwise the session is listed, and a row is used only while its manifest
  keeps the recorded version (a manifest is never changed in place, only replaced whole).

Either way a manifest committed or deleted by another process after the entry was made
changes the listing, never the cache's word. Loading a session's rows is one C call, however
many snapshots it holds. The cache lives in the cache object ``headers`` (each ``HeaderCache``
reads it once and keeps each session's packed bytes), written atomically and not flushed; a
missing, torn, corrupt or foreign one only costs speed. It is never used to decide what to
delete: sweep and gc read the manifests.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Hashable, Mapping
from operator import attrgetter, itemgetter
from typing import Any

import msgpack

from snapstore.backend.seam import Backend, Handle, Kind, ObjectInfo
from snapstore.format.envelope import seal, unseal
from snapstore.format.header import ROW_TIMESTAMPS, Header, Row, header_row, rows_valid
from snapstore.format.names import dir_name

MAGIC = b"SNAPHDC\x07"
CACHE = Handle(Kind.CACHE, "headers")
MAX_CACHE_BYTES = 256 << 20


class _Entry:
    """One session's cache entry: unpacked when first needed, packed again when changed."""

    __slots__ = ("blob", "dirty", "rows", "session", "stamp", "stored", "versions", "versions_blob")

    def __init__(self, blob: object) -> None:
        self.blob = blob
        self.session = ""
        self.stamp: Any = None
        self.stored: tuple[Row, ...] | None = None
        """The rows as the cache object holds them, in name order (once unpacked)."""
        self.rows: dict[str, Row] | None = None
        """Rows by snapshot directory name, in name order: once built, what the entry holds."""
        self.versions: dict[str, Hashable] | None = None
        """The version of each row's manifest, by snapshot directory name."""
        self.versions_blob = b""
        self.dirty = False

    def unpacked(self, session_dir: str) -> tuple[Row, ...]:
        """The entry's rows (not checked one by one: see ``rows_valid``), unpacked from the
        cache object's entry of ``session_dir`` once: none if the entry is not one, or names
        a session that does not map to that directory."""
        if self.rows is not None:
            return tuple(self.rows.values())
        if self.stored is None:
            self.stored = ()
            try:
                session, stamp, rows, versions = msgpack.unpackb(
                    self.blob, use_list=False, raw=False, timestamp=ROW_TIMESTAMPS
                )
                if type(session) is not str or type(versions) is not bytes:
                    return self.stored
                if type(rows) is not tuple or not set(map(type, rows)) <= {tuple}:
                    return self.stored
                if dir_name(session, "session") != session_dir:
                    return self.stored
                self.session, self.stamp, self.versions_blob = session, stamp, versions
                self.stored = rows
            except Exception:  # anything else is only a cache miss
                pass
        return self.stored

    def decoded(self, session_dir: str) -> dict[str, Row]:
        """The rows by snapshot directory name (none if a name is no string, or twice)."""
        if self.rows is None:
            stored = self.unpacked(session_dir)
            rows = {row[0]: row for row in stored if row and type(row[0]) is str}
            self.rows = rows if len(rows) == len(stored) else {}
        return self.rows

    def release(self) -> None:
        """Keep only the packed bytes (all a later listing needs), unless changed since."""
        if not self.dirty:
            self.stored = self.rows = self.versions = None

    def row_versions(self) -> dict[str, Hashable]:
        """The versions of the rows' manifests (decoded only for a listing by version)."""
        if self.versions is None:
            self.versions = {}
            rows = self.rows or {}
            try:
                versions = msgpack.unpackb(self.versions_blob, use_list=False, raw=False)
                if len(versions) == len(rows):
                    self.versions = dict(zip(rows, versions, strict=True))
            except Exception:  # a damaged list of versions only costs speed
                pass
        return self.versions

    def packed(self) -> bytes | None:
        """The entry packed again (None: no rows, or rows msgpack cannot hold)."""
        rows = self.rows or {}
        versions = self.row_versions()
        names = sorted(n for n in rows if n in versions)
        if not names:
            return None
        try:
            packed_versions = msgpack.packb([versions[n] for n in names], use_bin_type=True)
            packed = msgpack.packb(
                (self.session, self.stamp, [rows[n] for n in names], packed_versions),
                use_bin_type=True,
                datetime=True,
            )
        except (TypeError, ValueError, OverflowError):
            return None
        assert isinstance(packed, bytes)
        return packed


def _every_row_current(
    entry: _Entry, session_dir: str, listed: Mapping[str, ObjectInfo | None]
) -> dict[str, Row] | None:
    """``by_version``'s answer when the entry, as the cache object holds it, has a row for
    every manifest ``listed`` and no other, each at the version listed (the rows' names
    and versions compared as whole lists, in C: a session just listed again after a
    change elsewhere, or touched, costs no call per manifest); None otherwise."""
    if entry.rows is not None:
        return None  # changed by this process: its rows are no longer in the stored order
    stored = entry.unpacked(session_dir)
    if not stored or len(stored) != len(listed):
        return None
    try:
        versions = msgpack.unpackb(entry.versions_blob, use_list=False, raw=False)
        names = list(map((session_dir + "/").__add__, map(_NAME_DIR, stored)))
        if names != list(listed) or list(versions) != list(map(_VERSION, listed.values())):
            return None
    except Exception:  # names that are no strings, a manifest that is no object, damage
        return None
    if not rows_valid(stored):
        return None
    return dict(zip(names, stored, strict=True))


_NAME_DIR = itemgetter(0)
_VERSION = attrgetter("version")
"""An ``ObjectInfo``'s version (AttributeError for None: no object)."""


class HeaderCache:
    """Headers by manifest, kept while the session, or the manifest, stays as it was."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self._loaded = False
        self._entries: dict[str, _Entry] = {}
        self._dirty = False
        self._lock = threading.RLock()

    def _load(self) -> None:
        """Read the cache object once (under ``_lock``)."""
        self._loaded = True
        try:
            data, _ = self.backend.read(CACHE, max_bytes=MAX_CACHE_BYTES)
        except (OSError, ValueError):
            return
        stored = unseal(MAGIC, data)
        if not isinstance(stored, dict):
            return
        for session_dir, blob in stored.items():
            if type(session_dir) is str and type(blob) is bytes:
                self._entries.setdefault(session_dir, _Entry(blob))

    def _entry(self, session_dir: str) -> _Entry | None:
        if not self._loaded:
            self._load()
        return self._entries.get(session_dir)

    def keep_only(self, session_dirs: Mapping[str, object]) -> None:
        """After a listing of the whole store: forget the sessions it did not find."""
        with self._lock:
            if not self._loaded:
                self._load()
            for session_dir in [s for s in self._entries if s not in session_dirs]:
                del self._entries[session_dir]
                self._dirty = True

    def by_stamp(self, session_dir: str, stamp: Hashable) -> tuple[str, tuple[Row, ...]] | None:
        """The session's raw name and the rows of every manifest of it, in name order, if
        the entry was recorded at listing stamp ``stamp`` (the session's settled stamp now)
        and its rows are all ones a listing can read; else None."""
        with self._lock:
            entry = self._entry(session_dir)
            if entry is None:
                return None
            rows = entry.unpacked(session_dir)
            if not rows or entry.stamp is None or entry.stamp != stamp or not rows_valid(rows):
                return None
            session = entry.session
            entry.release()
            return session, rows

    def by_version(
        self, session_dir: str, listed: Mapping[str, ObjectInfo | None]
    ) -> tuple[str, dict[str, Row]]:
        """The session's raw name and the rows recorded for the manifests ``listed`` (every
        manifest of the session: object name -> its info, None for no object) that still
        have those versions, by object name. Rows of manifests gone or replaced, and rows a
        listing cannot read, are dropped, and the entry's stamp with them."""
        found: dict[str, Row] = {}
        with self._lock:
            entry = self._entry(session_dir)
            if entry is None:
                return "", found
            every = _every_row_current(entry, session_dir, listed)
            if every is not None:
                entry.release()
                return entry.session, every
            rows = entry.decoded(session_dir)
            versions = entry.row_versions()
            cut = len(session_dir) + 1
            for object_name, info in listed.items():
                name_dir = object_name[cut:]
                row = rows.get(name_dir)
                if row is not None and info is not None and versions.get(name_dir) == info.version:
                    found[object_name] = row
            if found and not rows_valid(tuple(found.values())):
                found = {name: row for name, row in found.items() if rows_valid((row,))}
            if len(found) != len(rows):
                current = {object_name[cut:] for object_name in found}
                for name_dir in [n for n in rows if n not in current]:
                    del rows[name_dir]
                entry.stamp = None
                entry.dirty = self._dirty = True
            # Rows all current keep their stamp: it was settled, so the session, having
            # changed since (or it would have been read by it), never shows it again.
            return entry.session, found

    def put(self, handle: Handle, version: Hashable, header: Header, written_ns: int) -> Row:
        """Remember the header just decoded from the manifest ``handle`` (of that version,
        written at ``written_ns``); its row."""
        session_dir, _, name_dir = handle.name.partition("/")
        with self._lock:
            entry = self._entry(session_dir)
            if entry is None:
                entry = self._entries[session_dir] = _Entry(None)
            rows = entry.decoded(session_dir)
            versions = entry.row_versions()
            if entry.session != header.info.session:
                rows.clear()
                versions.clear()
                entry.session = header.info.session
            row = rows[name_dir] = header_row(header, name_dir, written_ns)
            versions[name_dir] = version
            entry.stamp = None
            entry.dirty = self._dirty = True
            return row

    def settle(self, session_dir: str, stamp: Hashable) -> None:
        """Record that the entry holds every manifest of the session as of listing stamp
        ``stamp`` (read before the listing that found each of them valid, and no other)."""
        with self._lock:
            entry = self._entry(session_dir)
            if entry is None or not entry.decoded(session_dir):
                return
            if entry.stamp != stamp:
                entry.stamp = stamp
                entry.dirty = self._dirty = True

    def finish(self) -> None:
        """After a listing: write the cache if the listing changed it. Errors are ignored:
        it is only a cache."""
        with self._lock:
            if not self._dirty:
                return
            self._dirty = False
            body: dict[str, bytes] = {}
            for session_dir, entry in self._entries.items():
                if entry.dirty:
                    entry.blob = entry.packed()
                    entry.dirty = False
                if type(entry.blob) is bytes:
                    body[session_dir] = entry.blob
            data = seal(MAGIC, body)
        with contextlib.suppress(Exception):
            self.backend.write(CACHE, data, durable=False)
