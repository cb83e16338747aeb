"""Where manifests live: ``sessions/<session-dir>/<name-dir>/manifest``, read and committed.

Reads take no lock (a manifest is replaced by atomic rename, so a reader sees the old or the
new file); commits and deletes are called with the namespace lock held.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
import warnings
from collections.abc import Iterator
from typing import NamedTuple

from snapstore.errors import CorruptManifestError, SnapshotNotFound
from snapstore.format.manifest import (
    MAX_MANIFEST_BYTES,
    Header,
    Manifest,
    decode,
    decode_header,
    header_bytes_needed,
)
from snapstore.format.names import dir_name
from snapstore.fs.durable import ensure_dir, write_atomic
from snapstore.fs.reading import UnfitFileError, open_regular, read_all, read_regular
from snapstore.fs.seam import FileSystem
from snapstore.repo.filememo import identity_of
from snapstore.repo.headercache import HeaderCache

MANIFEST_FILE = "manifest"
MANIFEST_SUFFIX = os.sep + MANIFEST_FILE
HEADER_READ_BYTES = 4096

logger = logging.getLogger(__name__)


def _manifest_bytes(path: str) -> bytes:
    """A manifest file's bytes; CorruptManifestError for a special file or one too large to
    be a manifest (checked before reading)."""
    try:
        data, _ = read_regular(path, max_bytes=MAX_MANIFEST_BYTES)
    except UnfitFileError as error:
        raise CorruptManifestError(str(error)) from None
    return data


class CorruptManifestWarning(UserWarning):
    """A listing skipped a manifest that failed to decode or validate."""


class ManifestFile(NamedTuple):
    """A manifest on disk and the header read from it (one per snapshot of a listing)."""

    path: str
    header: Header


def _check_identity(path: str, session: str, name: str, header: Header) -> None:
    """A manifest must sit in the directory its raw names map to (never trust the dir name)."""
    info = header.info
    if (info.session, info.name) != (session, name):
        raise CorruptManifestError(
            f"manifest {path} belongs to ({info.session!r}, {info.name!r}), "
            f"not ({session!r}, {name!r})"
        )


class Catalog:
    """The ``sessions/`` tree of one store root."""

    def __init__(self, sessions_dir: str, tmp_dir: str, fs: FileSystem, *, durable: bool) -> None:
        self.sessions_dir = sessions_dir
        self.tmp_dir = tmp_dir
        self.fs = fs
        self.durable = durable
        cache_dir = os.path.join(os.path.dirname(sessions_dir), "cache")
        self.header_cache = HeaderCache(cache_dir, tmp_dir, fs)

    def manifest_path(self, session: str, name: str) -> str:
        """Where the manifest for (session, name) lives."""
        return os.path.join(
            self.sessions_dir,
            dir_name(session, "session"),
            dir_name(name, "snapshot name"),
            MANIFEST_FILE,
        )

    def exists(self, session: str, name: str) -> bool:
        """True if (session, name) has a manifest on disk now."""
        return os.path.lexists(self.manifest_path(session, name))

    def read(self, session: str, name: str) -> Manifest:
        """Decode the committed manifest of (session, name); SnapshotNotFound if there is none."""
        path = self.manifest_path(session, name)
        try:
            data = _manifest_bytes(path)
        except (FileNotFoundError, NotADirectoryError):
            raise SnapshotNotFound(session, name) from None
        try:
            manifest = decode(data)
            _check_identity(path, session, name, Header(manifest.info, 0, None))
        except CorruptManifestError as error:
            raise CorruptManifestError(
                f"snapshot {name!r} in session {session!r} is corrupt ({path}): {error}"
            ) from None
        return manifest

    def read_path(self, path: str) -> Manifest:
        """Decode the manifest file at ``path`` (already located by a scan)."""
        try:
            return decode(_manifest_bytes(path))
        except CorruptManifestError as error:
            raise CorruptManifestError(f"corrupt manifest {path}: {error}") from None

    def read_header(self, path: str) -> Header:
        """Decode and verify just the header of the manifest at ``path``, ordered by the
        earlier of its recorded time and the file's own (see ``Header.order_ns``)."""
        try:
            fd = open_regular(path)
        except UnfitFileError as error:
            raise CorruptManifestError(str(error)) from None
        try:
            info = os.fstat(fd)
            data = os.read(fd, HEADER_READ_BYTES)
            needed = header_bytes_needed(data)
            if needed > len(data):
                data += read_all(fd, needed - len(data))
        finally:
            os.close(fd)
        return decode_header(data, info.st_size).with_file_time(info.st_mtime_ns)

    def manifest_paths(self, session: str | None = None) -> Iterator[str]:
        """Paths of every manifest file on disk now (of one session, or all)."""
        for path in self._places(session):
            if os.path.isfile(path):
                yield path

    def _places(self, session: str | None) -> Iterator[str]:
        """Where a manifest of every name directory on disk now would be (not checked)."""
        if session is None:
            try:
                session_dirs = sorted(os.listdir(self.sessions_dir))
            except FileNotFoundError:
                return
        else:
            session_dirs = [dir_name(session, "session")]
        for session_dir in session_dirs:
            session_path = os.path.join(self.sessions_dir, session_dir)
            try:
                name_dirs = sorted(os.listdir(session_path))
            except (FileNotFoundError, NotADirectoryError):
                continue
            session_path += os.sep
            for name_dir in name_dirs:
                yield session_path + name_dir + MANIFEST_SUFFIX

    def _checked_header(self, path: str) -> Header:
        """The header at ``path``, which must sit in the directories its raw names map to."""
        header = self.read_header(path)
        name_dir = os.path.dirname(path)
        session_dir = os.path.dirname(name_dir)
        expected = (
            dir_name(header.info.session, "session"),
            dir_name(header.info.name, "snapshot name"),
        )
        if expected != (os.path.basename(session_dir), os.path.basename(name_dir)):
            raise CorruptManifestError("it sits in a directory its names do not map to")
        return header

    def _cached_header(self, path: str) -> Header:
        """The header at ``path``, decoded again only if the file's identity changed."""
        info = os.stat(path)
        if stat.S_ISDIR(info.st_mode):
            raise FileNotFoundError(path)
        if not stat.S_ISREG(info.st_mode):
            raise CorruptManifestError(f"{path} is not a regular file")
        identity = identity_of(info)
        relative = path[len(self.sessions_dir) + 1 :]
        header = self.header_cache.get(path, relative, identity)
        if header is None:
            header = self._checked_header(path)
            self.header_cache.put(path, relative, identity, header)
        return header

    def scan(
        self, session: str | None = None, *, cached: bool = False
    ) -> Iterator[ManifestFile | CorruptManifestError]:
        """Every manifest on disk now (headers only), or the error for one that is corrupt.

        With ``cached``, a header decoded before (by this process or, through the header
        cache file, another) is reused while its file keeps the same identity; see
        ``headercache``. Never use ``cached`` to decide what to delete.
        """
        read = self._cached_header if cached else self._checked_header
        for path in self._places(session):
            try:
                header = read(path)
            except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
                continue
            except CorruptManifestError as error:
                yield CorruptManifestError(f"corrupt manifest {path}: {error}")
                continue
            yield ManifestFile(path, header)

    def headers(self, session: str | None = None, *, cached: bool = False) -> list[ManifestFile]:
        """Every valid manifest header, warning about (and skipping) corrupt ones."""
        found: list[ManifestFile] = []
        for item in self.scan(session, cached=cached):
            if isinstance(item, CorruptManifestError):
                warnings.warn(str(item), CorruptManifestWarning, stacklevel=3)
            else:
                found.append(item)
        if cached:
            skip = len(self.sessions_dir) + 1
            seen = {item.path[skip:] for item in found} if session is None else None
            self.header_cache.finish(self.sessions_dir, seen)
        return found

    def commit(self, session: str, name: str, data: bytes) -> bool:
        """Atomically install ``data`` as the manifest of (session, name); True if it
        replaced one. Namespace lock held."""
        path = self.manifest_path(session, name)
        name_dir = os.path.dirname(path)
        replaced = os.path.lexists(path)
        # Directories found already there before the first commit into them may be a dead
        # writer's, whose entries were never flushed (ensure_dir flushes those it creates).
        found = [] if replaced else [name_dir, os.path.dirname(name_dir)]
        found = [directory for directory in found if os.path.isdir(directory)]
        ensure_dir(self.fs, name_dir, stop_at=self.sessions_dir, durable=self.durable)
        write_atomic(self.fs, path, data, tmp_dir=self.tmp_dir, durable=self.durable, mode=0o444)
        if self.durable:
            for directory in found:
                self.fs.fsync_dir(os.path.dirname(directory))
        logger.debug("committed snapshot %r of session %r (%d bytes)", name, session, len(data))
        return replaced

    def remove(self, path: str) -> None:
        """Delete a committed manifest durably, then its (now empty) directories best-effort.

        The unlink and the flush of its directory are the commit of a delete: their errors are
        raised. Removing the empty directories afterwards is tidying; gc retries it.
        """
        name_dir = os.path.dirname(path)
        self.fs.unlink(path)
        if self.durable:
            self.fs.fsync_dir(name_dir)
        logger.debug("removed manifest %s", path)
        self.remove_empty_dirs(name_dir)

    def remove_empty_dirs(self, name_dir: str) -> None:
        """Remove an empty name directory and, if then empty, its session directory."""
        session_dir = os.path.dirname(name_dir)
        with contextlib.suppress(OSError):
            self.fs.rmdir(name_dir)
            self.fs.rmdir(session_dir)

    def tidy(self) -> None:
        """Remove empty name and session directories left by interrupted deletes."""
        for session_dir in os.listdir(self.sessions_dir):
            session_path = os.path.join(self.sessions_dir, session_dir)
            with contextlib.suppress(OSError):
                for name_dir in os.listdir(session_path):
                    name_path = os.path.join(session_path, name_dir)
                    if not os.listdir(name_path):
                        self.remove_empty_dirs(name_path)
                if not os.listdir(session_path):
                    self.fs.rmdir(session_path)
