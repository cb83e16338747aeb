"""Where the scan looks a path asked for up: through the create's descriptors of the
directories on the way (``waydirs``), each directory checked once, through the descriptor
later lookups use, to be a directory itself and no storage root. ``Scanner.add`` looks a
requested path's directory up here; ``Scanner.add_below`` (an incremental create) a changed
path below a requested directory."""

from __future__ import annotations

import os
import stat
from typing import Protocol

from snapstore.backend.layout import is_store_root
from snapstore.errors import UnsafePathError
from snapstore.format.manifest import EntryRow
from snapstore.format.paths import check_relative_path, parents
from snapstore.fs.stamps import FileId
from snapstore.worktree.excludes import Matcher
from snapstore.worktree.scanned import ScanResult
from snapstore.worktree.waydirs import NotADirectory, Replaced, WayDirs


class Blocked(Exception):
    """A directory on the way to a path asked for could not be looked in (no permission, an
    I/O error) or was replaced while the create ran: that path is unreadable (skipped with
    ``skip_unreadable``); the message says which directory and why."""


Place = tuple[int | None, str]
"""Where the names of a directory are looked up: ``WayDirs.place``."""

Pending = list[tuple[str, str, EntryRow, FileId | None]]
"""Directories found but not yet walked: (relative path, absolute path, the row they get
unless they turn out to be a storage root, and the directory their parent's listing showed,
if it was listed: the one that must be found there when it is opened)."""


class Scanner(Protocol):
    """What these lookups use of ``scan.Scanner``: its settings, what it found so far, the
    directories on the way it checked, and how it records a path found."""

    base_dir: str
    exclude_dirs: set[FileId]
    excludes: Matcher
    result: ScanResult
    _checked_parents: dict[str, FileId]

    def _problem(self, path: str, message: str, *, special: bool = False) -> None: ...

    def _leaves_out(self, name: str) -> bool: ...

    def _add_found(
        self,
        relative: str,
        absolute: str,
        info: os.stat_result,
        pending: Pending | None,
        *,
        dir_fd: int | None = None,
    ) -> None: ...

    def _walk(self, pending: Pending, *, root: bool = False) -> None: ...


def parent_place(scanner: Scanner, relative: str, way: WayDirs) -> Place | None:
    """Where the name of ``relative`` is looked up (``WayDirs.place`` of its directory),
    each directory on the way checked through the descriptor later lookups use (opened
    one name at a time, never through a link); None if one is missing. UnsafePathError
    if one is not a directory or is a storage root; Blocked if one cannot be looked in."""
    place: Place = way.place("")
    for parent in parents(relative):
        try:
            place, found = _looked_up(way, parent)
        except FileNotFoundError:
            return None
        except NotADirectory as error:
            raise UnsafePathError(
                f"cannot snapshot {relative!r}: {error.directory!r} is not a directory (a "
                "symlink is never followed); snapshot the link itself or its real location"
            ) from None
        if scanner._checked_parents.get(parent) != found:
            if found in scanner.exclude_dirs or is_store_root(dir_fd=place[0]):
                raise UnsafePathError(
                    f"cannot snapshot {relative!r}: it lies in the snapstore root {parent!r}"
                )
            scanner._checked_parents[parent] = found
            scanner.result.dirs.setdefault(parent, found)
    return place


def _looked_up(way: WayDirs, directory: str) -> tuple[Place, FileId]:
    """``way.place`` and ``way.identity`` of ``directory``; FileNotFoundError if it or one
    above is missing, NotADirectory as ``WayDirs.open``, Blocked for any other failure."""
    try:
        return way.place(directory), way.identity(directory)
    except Replaced as error:
        raise Blocked(f"{error.directory!r} was replaced while the tree was snapshotted") from None
    except FileNotFoundError:
        raise
    except OSError as error:
        where = error.filename or directory  # the directory that could not be opened
        raise Blocked(f"cannot open {where!r} on the way: {error.strerror or error}") from None


def add_below(scanner: Scanner, relative: str, root: str, way: WayDirs) -> bool:
    """``Scanner.add_below``, every directory on the way looked up through ``way``."""
    within = "" if root == "." else root + "/"
    steps = relative[len(within) :].split("/")
    directories = [within + "/".join(steps[:depth]) for depth in range(1, len(steps))]
    place = way.place("")
    for directory in [root, *directories] if root != "." else directories:
        try:
            place, found = _looked_up(way, directory)
        except FileNotFoundError:
            return directory != root
        except (NotADirectory, Blocked):
            return False
        stored = scanner._checked_parents.get(directory) != found and (
            found in scanner.exclude_dirs or is_store_root(dir_fd=place[0])
        )
        if directory == root:
            if stored:
                return False
        elif (
            stored
            or scanner.excludes(directory, True)
            or scanner._leaves_out(directory.rsplit("/", 1)[-1])
        ):
            return True
        scanner._checked_parents[directory] = found
        scanner.result.dirs.setdefault(directory, found)
    return _add_below_found(scanner, relative, place)


def _add_below_found(scanner: Scanner, relative: str, place: Place) -> bool:
    """The last step of ``Scanner.add_below``: ``relative`` itself, looked up at ``place``, its
    directory checked."""
    absolute = os.path.join(scanner.base_dir, relative)
    try:
        info = os.stat(
            place[1] + relative.rpartition("/")[2], dir_fd=place[0], follow_symlinks=False
        )
    except FileNotFoundError:
        return True
    except NotADirectoryError:
        return False
    except OSError as error:
        scanner._problem(relative, error.strerror or str(error))
        return True
    try:
        check_relative_path(relative)
    except UnsafePathError as error:
        scanner._problem(relative, str(error))
        return True
    if scanner.excludes(relative, stat.S_ISDIR(info.st_mode)):
        return True
    pending: Pending = []
    scanner._add_found(relative, absolute, info, pending, dir_fd=place[0])
    scanner._walk(pending)
    return True
