"""The manifests of a local store as files (docs/format.md, "Manifests", "Writing" step 4).

Format 4 keeps a snapshot's manifest as the file ``sessions/<session-dir>/<name-dir>.manifest``:
a commit is a temp file flushed, renamed into the session directory, and that directory
flushed. Formats 1-3 kept it as ``sessions/<session-dir>/<name-dir>/manifest``, a directory per
snapshot; such manifests are read as they are and removed when their snapshot is replaced or
deleted, never written. The rules that keep both layouts safe side by side:

- a commit of a name held the old way commits the new file first (durably), then removes the
  old manifest and its directory: never a deletion before the commit is durable;
- a reader that finds both for one name (a writer killed in between) takes the file: only a
  commit of format 4 writes it, and such a commit always comes after the manifest it
  replaces (a store of format 4 refuses writers of older formats);
- a delete removes an old manifest first, durably, then the file: removing the file never
  uncovers the version it replaced.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from collections.abc import Callable, Hashable, Iterator
from stat import S_ISREG
from typing import TypeVar

from snapstore.backend.localpaths import (
    MANIFEST_SUFFIX,
    LocalPaths,
    listdir,
)
from snapstore.backend.seam import Handle, Kind, ObjectInfo
from snapstore.fs.durable import ensure_dir, write_atomic
from snapstore.fs.reading import UnfitFileError, open_regular, read_regular
from snapstore.fs.seam import FileSystem
from snapstore.fs.stamps import version

T = TypeVar("T")
SETTLE_NS = 3_000_000_000
"""How long a session directory must have been left alone before its stamp is trusted to
change with its next change (coarse filesystem clocks tick in up to 2 seconds)."""
_NO_NAME_FILES = frozenset(stem + MANIFEST_SUFFIX for stem in ("", ".", ".."))
"""Entries ``<stem>.manifest`` whose stem names no snapshot (see ``manifest_entry_name``)."""
_DIRECTORY_FLAGS = os.O_RDONLY | os.O_CLOEXEC | getattr(os, "O_DIRECTORY", 0)


class ManifestFiles:
    """The manifest files under ``paths``' ``sessions/``, written through ``fs``."""

    def __init__(self, paths: LocalPaths, fs: FileSystem, *, durable: bool, tmp_dir: str) -> None:
        self.paths = paths
        self.fs = fs
        self.durable = durable
        self.tmp_dir = tmp_dir
        self.sessions_dir = paths.kind_dirs[Kind.MANIFEST]
        self._settled: dict[str, tuple[int, int]] = {}
        """Session directories whose own entry this process made durable, by their identity
        (inode, change time) after this process's last commit into them: a directory removed
        and made again by another writer may get the same inode back, never the same change
        time as well."""

    def path(self, name: str) -> str:
        """Where the manifest called ``name`` is written (its name checked)."""
        return self.paths.path(Handle(Kind.MANIFEST, name))

    # ------------------------------------------------------------------ reading

    def located(self, name: str, action: Callable[[str], T]) -> T:
        """``action`` on the manifest called ``name``, wherever it is: the file; else the old
        layout's manifest; else the file again (a commit may have replaced the old by the new
        between the two looks: a reader sees the old manifest or the new one, never none)."""
        path = self.path(name)
        try:
            return action(path)
        except FileNotFoundError:
            pass
        try:
            return action(_through_directory(self.paths.legacy_manifest(name)))
        except (FileNotFoundError, NotADirectoryError):
            return action(path)

    def stat(self, name: str) -> os.stat_result:
        """The manifest's lstat; UnfitFileError if what is there is no regular file (a
        directory or a symlink planted where a manifest belongs)."""
        return self.located(name, _regular_lstat)

    def read(self, name: str, max_bytes: int) -> tuple[bytes, os.stat_result]:
        """The manifest's bytes and stat (see ``read_regular``; symlinks are not followed)."""
        return self.located(
            name, lambda path: read_regular(path, max_bytes=max_bytes, follow=False)
        )

    def open(self, name: str) -> int:
        """A read-only descriptor of the manifest (see ``open_regular``)."""
        return self.located(name, lambda path: open_regular(path, follow=False))

    def infos(self, prefix: str) -> dict[str, ObjectInfo | None]:
        """The manifests whose names start with ``prefix``, each with its info (None: not a
        regular file), in the order of their names, from one scan of each session directory:
        the files' entries give their names and an lstat each (what a bare walk of the
        manifests costs); an old layout directory is looked into only when no file of its
        name was found."""
        session_prefix, slash, _ = prefix.partition("/")
        sessions = [session_prefix] if slash else listdir(self.sessions_dir)
        found: dict[str, ObjectInfo | None] = {}
        legacy: list[str] = []
        for session in sessions:
            if session.startswith(session_prefix) and session not in (".", ".."):
                self._scan_session(session, prefix, found, legacy)
        for name in legacy:
            if name not in found:
                try:
                    found[name] = object_info(self.stat(name))
                except (FileNotFoundError, NotADirectoryError):
                    continue
                except UnfitFileError:
                    found[name] = None
        return {name: found[name] for name in sorted(found)}

    def _scan_session(
        self, session: str, prefix: str, found: dict[str, ObjectInfo | None], legacy: list[str]
    ) -> None:
        """Add the manifest files of one session directory to ``found``, and the names of
        its other entries (old layout directories, or junk) to ``legacy``. The directory is
        opened once and its entries stat-ed relative to it (no path resolved per entry)."""
        try:
            fd = os.open(f"{self.sessions_dir}/{session}", _DIRECTORY_FLAGS)
        except (FileNotFoundError, NotADirectoryError):
            return
        try:
            with os.scandir(fd) as entries:
                self._scanned(session, prefix, entries, found, legacy)
        finally:
            os.close(fd)

    @staticmethod
    def _scanned(
        session: str,
        prefix: str,
        entries: Iterator[os.DirEntry[str]],
        found: dict[str, ObjectInfo | None],
        legacy: list[str],
    ) -> None:
        """``_scan_session``'s loop: one lstat per manifest file, its info built inline (a
        listing of 10,000 snapshots runs it 10,000 times)."""
        cut = -len(MANIFEST_SUFFIX)
        head = f"{session}/"
        narrower = len(prefix) > len(head)  # else every name of the session starts with it
        new_info = tuple.__new__
        for entry in entries:
            entry_name = entry.name
            if not entry_name.endswith(MANIFEST_SUFFIX):
                name = head + entry_name
                if entry_name not in (".", "..") and name.startswith(prefix):
                    legacy.append(name)
                continue
            if entry_name in _NO_NAME_FILES:
                continue
            name = head + entry_name[:cut]
            if narrower and not name.startswith(prefix):
                continue
            try:
                info = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            if not S_ISREG(info.st_mode):
                found[name] = None
                continue
            version = (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_dev)
            found[name] = new_info(ObjectInfo, (info.st_size, version, info.st_mtime_ns))

    def stamps(self, prefix: str) -> dict[str, Hashable | None] | None:
        """Each session directory whose name starts with ``prefix`` (``""`` or
        ``<session-dir>/``; None for another) and its settled stamp: the ``listing_stamp``
        of the directory, or None unless (1) it holds no subdirectory (its link count is 2:
        a manifest of the old layout changes its own directory, not the session's; a
        filesystem that counts no links, like btrfs, never settles) and (2) its
        modification and change times lie more than ``SETTLE_NS`` before now (a change
        within the same tick of a coarse clock could leave them as they are; any later
        change moves them)."""
        session_prefix, slash, rest = prefix.partition("/")
        if rest:
            return None
        sessions = [session_prefix] if slash else listdir(self.sessions_dir)
        settled_before = time.time_ns() - SETTLE_NS
        found: dict[str, Hashable | None] = {}
        for session in sessions:
            if not session.startswith(session_prefix) or session in (".", ".."):
                continue
            try:
                info = os.stat(f"{self.sessions_dir}/{session}")
            except (FileNotFoundError, NotADirectoryError):
                continue
            if not stat.S_ISDIR(info.st_mode):
                continue
            changed_ns = max(info.st_mtime_ns, info.st_ctime_ns)
            settled = info.st_nlink == 2 and changed_ns < settled_before
            found[session] = directory_stamp(info) if settled else None
        return found

    def describe(self, name: str) -> str:
        """The path of the manifest as it is now (the old layout's if only that is there)."""
        path = self.path(name)
        legacy = self.paths.legacy_manifest(name)
        return legacy if not os.path.lexists(path) and os.path.lexists(legacy) else path

    # ------------------------------------------------------------------ writing

    def commit(self, name: str, data: bytes) -> None:
        """Install ``data`` as the manifest ``name``: the file flushed, renamed into its session
        directory, the directory flushed. A session directory this process did not flush into
        ``sessions/`` yet has ``sessions/`` flushed too (made now, or by a writer that may
        have died before flushing it). Then an old layout manifest of the name is removed."""
        path = self.path(name)
        session_dir = os.path.dirname(path)
        before = _directory_identity(session_dir)
        if before is None:
            ensure_dir(self.fs, session_dir, stop_at=self.sessions_dir, durable=self.durable)
        write_atomic(self.fs, path, data, tmp_dir=self.tmp_dir, durable=self.durable, mode=0o444)
        # made now (its entry flushed if durable), or changed by another writer since this
        # process's last commit: perhaps removed and made again by one that died unflushed
        if before is not None and self._settled.get(session_dir) != before and self.durable:
            self.fs.fsync_dir(self.sessions_dir)
        self._settled.pop(session_dir, None)
        if self._unlink_legacy(name, durable=True):
            with contextlib.suppress(OSError):
                self.fs.rmdir(os.path.dirname(self.paths.legacy_manifest(name)))
        after = _directory_identity(session_dir)
        if after is not None:
            self._settled[session_dir] = after

    def _changed_here(self, session_dir: str) -> None:
        """Note this process's own change of a session directory it flushed the entry of, so
        that only other writers' changes count as changes at its next commit there."""
        if session_dir in self._settled:
            after = _directory_identity(session_dir)
            if after is None:
                del self._settled[session_dir]
            else:
                self._settled[session_dir] = after

    def _unlink_legacy(self, name: str, *, durable: bool) -> bool:
        """Remove the old layout's manifest of ``name``, flushing its directory; False if
        there is none. Errors other than its absence are raised."""
        legacy = self.paths.legacy_manifest(name)
        try:
            if not stat.S_ISDIR(os.lstat(os.path.dirname(legacy)).st_mode):
                return False  # none, or something planted: never unlink through a symlink
        except OSError:
            return False
        try:
            self.fs.unlink(legacy)
        except (FileNotFoundError, NotADirectoryError):
            return False
        if durable and self.durable:
            self.fs.fsync_dir(os.path.dirname(legacy))
        return True

    def delete(self, name: str, *, durable: bool) -> None:
        """Remove the manifest ``name`` (FileNotFoundError if there is none): an old layout
        manifest first, flushed, then the file, its session directory flushed (the commit
        point); then the directories left empty, best-effort. Not ``durable``: the caller
        flushes the session's directory (the old layout's is flushed here all the same), and
        an emptied session directory stays for it to find."""
        path = self.path(name)
        removed_legacy = self._unlink_legacy(name, durable=True)  # nobody flushes it later
        try:
            self.fs.unlink(path)
        except FileNotFoundError:
            if not removed_legacy:
                raise
        if durable and self.durable:
            self.fs.fsync_dir(os.path.dirname(path))  # also after an old layout's alone
        self._remove_empty(name, session_too=durable)
        self._changed_here(os.path.dirname(path))

    def _remove_empty(self, name: str, *, session_too: bool) -> None:
        """Remove the old layout's directory of ``name`` if empty, then (``session_too``) the
        session directory if empty: not after a deletion the caller flushes later, which
        must find the directory it flushes (its removal would have to be flushed in
        ``sessions/`` instead)."""
        name_dir = os.path.dirname(self.paths.legacy_manifest(name))
        with contextlib.suppress(OSError):
            if os.path.isdir(name_dir):
                self.fs.rmdir(name_dir)
            if session_too:
                self.fs.rmdir(os.path.dirname(name_dir))

    def tidy_session(self, session_path: str) -> None:
        """Remove a session directory's empty old layout directories, then itself if empty
        (what interrupted deletes leave). An old layout manifest shadowed by a file of the
        same name is left for the next commit or delete of that name."""
        with contextlib.suppress(OSError):
            for entry in os.listdir(session_path):
                entry_path = os.path.join(session_path, entry)
                if not entry.endswith(MANIFEST_SUFFIX) and os.path.isdir(entry_path):
                    with contextlib.suppress(OSError):
                        if not os.listdir(entry_path):
                            self.fs.rmdir(entry_path)
            if not os.listdir(session_path):
                self.fs.rmdir(session_path)
        self._changed_here(session_path)


def _directory_identity(path: str) -> tuple[int, int] | None:
    """The inode and change time of the directory at ``path`` (symlinks followed); None if
    there is none."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_ino, info.st_ctime_ns) if stat.S_ISDIR(info.st_mode) else None


def directory_stamp(info: os.stat_result) -> tuple[int, int, int, int, int]:
    """A session directory's listing stamp: its identity, times and size."""
    return (info.st_ino, info.st_dev, info.st_mtime_ns, info.st_ctime_ns, info.st_size)


def object_info(info: os.stat_result) -> ObjectInfo:
    """An lstat of an object's file as its ObjectInfo."""
    return ObjectInfo(info.st_size, version(info), info.st_mtime_ns)


def _through_directory(legacy: str) -> str:
    """``legacy`` (an old layout manifest), if its directory is one: UnfitFileError for a
    symlink planted in its place (never read, or written, through)."""
    directory = os.path.dirname(legacy)
    if stat.S_ISLNK(os.lstat(directory).st_mode):
        raise UnfitFileError(f"{directory} is a symbolic link")
    return legacy


def _regular_lstat(path: str) -> os.stat_result:
    info = os.lstat(path)
    if not stat.S_ISREG(info.st_mode):
        raise UnfitFileError(f"{path} is not a regular file")
    return info
