"""Manifests by (session, name): read, listed and committed through the backend.

A manifest's object name is ``<session-dir>/<name-dir>`` (docs/format.md, "Directory
names"). Reads take no lock (a manifest is replaced atomically, so a reader sees the old or the
new one); commits and deletes are called with the session's lock held (``sessions``).
"""

from __future__ import annotations

import warnings
from collections.abc import Hashable, Iterator, Sequence
from typing import NamedTuple

from snapstore.backend.seam import Backend, Handle, Kind, ObjectInfo, Version
from snapstore.errors import CorruptManifestError, SnapshotNotFound
from snapstore.format.header import Header, Row, header_from_row
from snapstore.format.manifest import (
    MAX_MANIFEST_BYTES,
    Manifest,
    decode,
    decode_header,
    header_bytes_needed,
)
from snapstore.format.names import dir_name
from snapstore.fs.reading import UnfitFileError
from snapstore.logs import get_logger
from snapstore.repo.headercache import HeaderCache

HEADER_READ_BYTES = 4096

logger = get_logger(__name__)


class CorruptManifestWarning(UserWarning):
    """A listing skipped a manifest that failed to decode or validate."""


class SessionRows(NamedTuple):
    """The header cache rows (``header.header_row``) of valid manifests of one session."""

    session_dir: str
    session: str
    rows: Sequence[Row]


class ManifestFile(NamedTuple):
    """A manifest in the store (its object name), the header read from it (one per
    snapshot of a listing), and the version of the object it was read from (what a deletion
    decided from that header removes, and nothing newer)."""

    name: str
    header: Header
    version: Version | None = None


def manifest_name(session: str, name: str) -> str:
    """The object name of the manifest of (session, name)."""
    return f"{dir_name(session, 'session')}/{dir_name(name, 'snapshot name')}"


def _prefix(session: str | None, session_dir: str | None) -> str:
    """The prefix of the object names of a session's manifests ("" for every session)."""
    if session_dir is not None:
        return session_dir + "/"
    return "" if session is None else dir_name(session, "session") + "/"


def _check_identity(where: str, session: str, name: str, header: Header) -> None:
    """A manifest must sit where its raw names map to (never trust the directory name)."""
    info = header.info
    if (info.session, info.name) != (session, name):
        raise CorruptManifestError(
            f"manifest {where} belongs to ({info.session!r}, {info.name!r}), "
            f"not ({session!r}, {name!r})"
        )


class Catalog:
    """The manifests of one store."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.header_cache = HeaderCache(backend)

    @staticmethod
    def handle(object_name: str) -> Handle:
        """The manifest object called ``object_name``."""
        return Handle(Kind.MANIFEST, object_name)

    def manifest_path(self, session: str, name: str) -> str:
        """Where the manifest of (session, name) lives, for people (local: its path)."""
        return self.backend.describe(self.handle(manifest_name(session, name)))

    def exists(self, session: str, name: str) -> bool:
        """True if (session, name) has a manifest now."""
        try:
            self.backend.stat(self.handle(manifest_name(session, name)))
        except (FileNotFoundError, NotADirectoryError):
            return False
        except UnfitFileError:
            return True
        return True

    def version(self, session: str, name: str) -> Hashable | None:
        """The backend's version of the committed manifest of (session, name) (it changes
        whenever the manifest is replaced), or None if there is none."""
        try:
            return self.backend.stat(self.handle(manifest_name(session, name))).version
        except (FileNotFoundError, NotADirectoryError, UnfitFileError):
            return None

    def _bytes(self, object_name: str) -> bytes:
        """A manifest's bytes; CorruptManifestError for something that is no manifest object
        or too large to be one (checked before reading)."""
        try:
            data, _ = self.backend.read(self.handle(object_name), max_bytes=MAX_MANIFEST_BYTES)
        except UnfitFileError as error:
            raise CorruptManifestError(str(error)) from None
        return data

    def read(self, session: str, name: str) -> Manifest:
        """Decode the committed manifest of (session, name); SnapshotNotFound if there is none."""
        object_name = manifest_name(session, name)
        try:
            data = self._bytes(object_name)
        except (FileNotFoundError, NotADirectoryError):
            raise SnapshotNotFound(session, name) from None
        where = self.backend.describe(self.handle(object_name))
        try:
            manifest = decode(data)
            _check_identity(where, session, name, Header(manifest.info, 0, None))
        except CorruptManifestError as error:
            raise CorruptManifestError(
                f"snapshot {name!r} in session {session!r} is corrupt ({where}): {error}"
            ) from None
        return manifest

    def read_named(self, object_name: str) -> Manifest:
        """Decode the manifest called ``object_name`` (already found by a listing)."""
        try:
            return decode(self._bytes(object_name))
        except CorruptManifestError as error:
            where = self.backend.describe(self.handle(object_name))
            raise CorruptManifestError(f"corrupt manifest {where}: {error}") from None

    def read_header(self, object_name: str) -> Header:
        """Decode and verify just the header of a manifest, ordered as its object's write
        time allows (see ``Header.order_ns``)."""
        return self.read_versioned_header(object_name)[0]

    def read_versioned_header(self, object_name: str) -> tuple[Header, Version]:
        """``read_header``, and the version of the object it was read from."""
        handle = self.handle(object_name)
        try:
            data, info = self.backend.read_head(handle, HEADER_READ_BYTES)
            needed = header_bytes_needed(data)
            if needed > len(data):
                data, info = self.backend.read_head(handle, needed)
        except UnfitFileError as error:
            raise CorruptManifestError(str(error)) from None
        return decode_header(data, info.size).with_file_time(info.written_ns), info.version

    def names(self, session: str | None = None, *, session_dir: str | None = None) -> list[str]:
        """The object names of every manifest now (of one session, given by name or by its
        directory, or all)."""
        return self.backend.names(Kind.MANIFEST, _prefix(session, session_dir))

    def _checked_header(self, object_name: str) -> tuple[Header, Version]:
        """The header of a manifest, which must sit where its raw names map to, and the
        version of the object it was read from."""
        header, version = self.read_versioned_header(object_name)
        if manifest_name(header.info.session, header.info.name) != object_name:
            raise CorruptManifestError("it sits in a directory its names do not map to")
        return header, version

    def _decoded_row(self, object_name: str, info: ObjectInfo | None) -> tuple[str, Row]:
        """The session and header cache row of a manifest whose listing gave ``info``
        (None: it is no object) and the header cache did not know, decoded now and
        remembered."""
        handle = self.handle(object_name)
        if info is None:
            raise CorruptManifestError(f"{self.backend.describe(handle)} is not a regular file")
        header, _ = self._checked_header(object_name)
        return header.info.session, self.header_cache.put(
            handle, info.version, header, info.written_ns
        )

    def manifests(
        self, session: str | None = None, *, cached: bool = False, session_dir: str | None = None
    ) -> Iterator[ManifestFile | CorruptManifestError]:
        """Every manifest now (headers only), in name order, or the error for one that is
        corrupt.

        With ``cached``, headers decoded before (by this process or, through the header
        cache, another) are reused while their session, or their object, stays as it was;
        see ``headercache``. Never use ``cached`` to decide what to delete.
        """
        prefix = _prefix(session, session_dir)
        if cached:
            yield from self._cached_manifests(prefix)
            return
        for object_name in self.backend.names(Kind.MANIFEST, prefix):
            try:
                header, version = self._checked_header(object_name)
            except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
                continue
            except CorruptManifestError as error:
                yield self._corrupt(object_name, error)
                continue
            yield ManifestFile(object_name, header, version)

    def _corrupt(self, object_name: str, error: CorruptManifestError) -> CorruptManifestError:
        where = self.backend.describe(self.handle(object_name))
        return CorruptManifestError(f"corrupt manifest {where}: {error}")

    def _cached_manifests(self, prefix: str) -> list[ManifestFile | CorruptManifestError]:
        """``manifests(cached=True)``: the headers of ``_cached_rows``, session by session
        (within one, in the order of its entry or of the backend's listing)."""
        found: list[ManifestFile | CorruptManifestError] = []
        for session_dir, session, rows in self._cached_rows(prefix, found):
            head = session_dir + "/"
            for row in rows:
                object_name = head + row[0]
                header = header_from_row(session, row)
                if header is None:  # rows_valid holds what it needs; if not, only a miss
                    try:
                        header, _ = self._checked_header(object_name)
                    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
                        continue
                    except CorruptManifestError as error:
                        found.append(self._corrupt(object_name, error))
                        continue
                found.append(ManifestFile(object_name, header, None))
        return found

    def _cached_rows(
        self, prefix: str, errors: list[ManifestFile | CorruptManifestError]
    ) -> Iterator[SessionRows]:
        """The header cache rows of every valid manifest now, a session at a time (so that
        a consumer can drop each session's rows before the next is unpacked), and the errors
        of the corrupt ones added to ``errors``. Each session from its header cache entry
        while its settled listing stamp is the one recorded; else listed, each manifest's
        row from the cache while the manifest keeps its version, or its header decoded (and
        the entry recorded at the stamp read before, if every manifest was valid)."""
        stamps = self.backend.listing_stamps(Kind.MANIFEST, prefix)
        groups: dict[str, dict[str, ObjectInfo | None]] = {}
        if stamps is None:
            for object_name, info in self.backend.infos(Kind.MANIFEST, prefix).items():
                groups.setdefault(object_name.partition("/")[0], {})[object_name] = info
            stamps = dict.fromkeys(groups)
        cache = self.header_cache
        if not prefix:
            cache.keep_only(stamps)
        for session_dir in sorted(stamps, key=lambda name: name + "/"):
            stamp = stamps[session_dir]
            trusted = None if stamp is None else cache.by_stamp(session_dir, stamp)
            if trusted is not None:
                yield SessionRows(session_dir, *trusted)
                continue
            listed = groups.get(session_dir)
            if listed is None:
                listed = self.backend.infos(Kind.MANIFEST, session_dir + "/")
            session, rows, corrupt = self._listed_session(session_dir, listed)
            if stamp is not None and not corrupt:
                cache.settle(session_dir, stamp)
            errors += corrupt
            if rows:
                yield SessionRows(session_dir, session, rows)

    def _listed_session(
        self, session_dir: str, listed: dict[str, ObjectInfo | None]
    ) -> tuple[str, list[Row], list[CorruptManifestError]]:
        """The session's name, the rows of the valid manifests ``listed`` (one session's;
        rows the cache knows at their versions, the others decoded), and the errors of the
        corrupt ones. Every listing of rows orders them itself."""
        session, known = self.header_cache.by_version(session_dir, listed)
        if len(known) == len(listed):
            return session, list(known.values()), []
        rows: list[Row] = []
        corrupt: list[CorruptManifestError] = []
        for object_name, info in sorted(listed.items()):
            row = known.get(object_name)
            if row is None:
                try:
                    session, row = self._decoded_row(object_name, info)
                except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
                    continue
                except CorruptManifestError as error:
                    corrupt.append(self._corrupt(object_name, error))
                    continue
            rows.append(row)
        return session, rows, corrupt

    def headers(
        self, session: str | None = None, *, cached: bool = False, session_dir: str | None = None
    ) -> list[ManifestFile]:
        """Every valid manifest header (of one session, given by name or by its directory, or
        all), warning about (and skipping) corrupt ones."""
        found: list[ManifestFile] = []
        for item in self.manifests(session, cached=cached, session_dir=session_dir):
            if type(item) is ManifestFile:
                found.append(item)
            else:
                warnings.warn(str(item), CorruptManifestWarning, stacklevel=3)
        if cached:
            self.header_cache.finish()
        return found

    def listed_rows(self, session: str | None = None) -> Iterator[SessionRows]:
        """The header cache rows of every valid manifest (of one session, or all), a session
        at a time, warning about (and skipping) corrupt ones once all are read:
        ``headers(cached=True)`` for a listing that builds its infos from the rows in bulk
        (``header.infos_of_rows``) and drops each session's rows as it goes."""
        errors: list[ManifestFile | CorruptManifestError] = []
        yield from self._cached_rows(_prefix(session, None), errors)
        for error in errors:
            warnings.warn(str(error), CorruptManifestWarning, stacklevel=4)
        self.header_cache.finish()

    def commit(self, session: str, name: str, data: bytes) -> bool:
        """Atomically and durably install ``data`` as the manifest of (session, name); True
        if it replaced one. The session's lock held: a snapshot is committed through
        ``Repository.commit_snapshot``, which numbers it and moves the session's head."""
        replaced = self.exists(session, name)
        self.backend.write(self.handle(manifest_name(session, name)), data)
        logger.debug("committed snapshot %r of session %r (%d bytes)", name, session, len(data))
        return replaced

    def remove(
        self, object_name: str, version: Version | None = None, *, durable: bool = True
    ) -> None:
        """Delete a committed manifest durably (the commit of a delete: errors are raised);
        whatever it leaves empty is tidied best-effort. The session's lock held. With ``version``
        (the one its header was read from), only that version: ConcurrentWriteError if
        another writer replaced it since. Not ``durable``: the caller flushes the session's
        directory itself before it reports the deletion done (sweep, once per hold)."""
        self.backend.delete(self.handle(object_name), version=version, durable=durable)
        logger.debug("removed manifest %s", object_name)

    def tidy(self) -> None:
        """Remove what interrupted deletes left empty."""
        self.backend.tidy()
