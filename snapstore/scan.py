"""Collect the file set a snapshot records: walk requested paths without following symlinks.

The scan turns what needs no reading (directories, symlinks, absent paths, and files the
caller's ``reuse`` hook vouches for) straight into manifest rows, and lists only the files
whose bytes must be read. One pass, one tuple per path: on a large tree the per-file Python
work, not the disk, is what an unchanged snapshot costs.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from operator import itemgetter
from stat import S_ISREG

from snapstore.durable import TEMP_PREFIX
from snapstore.errors import UnsafePathError
from snapstore.manifest import EntryRow
from snapstore.models import SkippedPath
from snapstore.paths import check_relative_path, child_path, parents, plain_names

_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC

Reuse = Callable[[str, os.stat_result], EntryRow | None]
"""Given a regular file's path and lstat, its finished row if its bytes need no reading."""


FileToRead = tuple[str, str, os.stat_result]
"""A regular file whose bytes the snapshot must read: (path, absolute path, the lstat it was
found with). A plain tuple: a scan may make one per file."""


@dataclass
class ScanResult:
    """Everything a scan found, plus the paths it could not record. ``rows`` and
    ``to_read`` are in no particular order and may name a path twice (when requested paths
    overlap: ``overlapping`` says so)."""

    rows: list[EntryRow] = field(default_factory=list)
    to_read: list[FileToRead] = field(default_factory=list)
    skipped: list[SkippedPath] = field(default_factory=list)
    overlapping: bool = False


def sorted_rows(rows: list[EntryRow], *, overlapping: bool) -> list[EntryRow]:
    """``rows`` sorted by path in place, each path once (as first found when overlapping)."""
    rows.sort(key=itemgetter(0))
    if overlapping:
        return [row for i, row in enumerate(rows) if i == 0 or rows[i - 1][0] != row[0]]
    return rows


class UnreadablePathError(OSError):
    """A path exists but cannot be recorded (permission denied, special file, bad name)."""


def relative_to_base(base_dir: str, path: str | os.PathLike[str]) -> str:
    """``path`` (relative to ``base_dir``, or absolute inside it) as a normalized relative path;
    ``"."`` for the base itself."""
    joined = os.path.normpath(os.path.join(base_dir, os.fspath(path)))
    relative = os.path.relpath(joined, base_dir)
    if relative == ".":
        return "."
    if relative == ".." or relative.startswith("../") or os.path.isabs(relative):
        raise UnsafePathError(f"path {os.fspath(path)!r} lies outside the base dir {base_dir!r}")
    return relative.replace(os.sep, "/")


def _read_everything(path: str, info: os.stat_result) -> EntryRow | None:
    return None


class Scanner:
    """Walks paths under a base directory, skipping the store's own root and temp files."""

    def __init__(
        self,
        base_dir: str,
        *,
        exclude_dirs: Iterable[tuple[int, int]] = (),
        skip_unreadable: bool = False,
        reuse: Reuse = _read_everything,
    ) -> None:
        self.base_dir = base_dir
        self.exclude_dirs = set(exclude_dirs)
        self.skip_unreadable = skip_unreadable
        self.reuse = reuse
        self.result = ScanResult()
        self._added = False

    def _problem(self, path: str, message: str) -> None:
        if not self.skip_unreadable:
            raise UnreadablePathError(f"cannot snapshot {path!r}: {message}")
        self.result.skipped.append(SkippedPath(path, message))

    def add(self, relative: str, *, recursive: bool = True) -> None:
        """Record ``relative`` (``"."`` for the whole base) and, for directories, what is below."""
        self.result.overlapping = self._added
        self._added = True
        if relative == ".":
            self._walk_children(".", self.base_dir)
            return
        absolute = os.path.join(self.base_dir, relative)
        for parent in parents(relative):
            try:
                parent_info = os.lstat(os.path.join(self.base_dir, parent))
            except FileNotFoundError:
                break
            if not stat.S_ISDIR(parent_info.st_mode):
                raise UnsafePathError(
                    f"cannot snapshot {relative!r}: {parent!r} is not a directory (a symlink "
                    "is never followed); snapshot the link itself or its real location"
                )
        try:
            info = os.lstat(absolute)
        except FileNotFoundError:
            self.result.rows.append((relative, "absent", 0, 0, 0, None, None))
            return
        except OSError as error:
            self._problem(relative, error.strerror or str(error))
            return
        try:
            check_relative_path(relative)
        except UnsafePathError as error:
            self._problem(relative, str(error))
            return
        self._add_found(relative, absolute, info, recursive)

    def _add_found(
        self, relative: str, absolute: str, info: os.stat_result, recursive: bool
    ) -> None:
        """Record a path already checked to be a safe relative path."""
        if relative.rsplit("/", 1)[-1].startswith(TEMP_PREFIX):
            return
        mode = info.st_mode
        if stat.S_ISLNK(mode):
            try:
                target = os.readlink(absolute)
            except OSError as error:
                self._problem(relative, error.strerror or str(error))
                return
            self.result.rows.append(
                (relative, "symlink", mode & 0o7777, 0, info.st_mtime_ns, None, target)
            )
        elif stat.S_ISDIR(mode):
            if (info.st_dev, info.st_ino) in self.exclude_dirs:
                return
            self.result.rows.append(
                (relative, "dir", mode & 0o7777, 0, info.st_mtime_ns, None, None)
            )
            if recursive:
                self._walk_children(relative, absolute)
        elif S_ISREG(mode):
            self._add_file(relative, absolute, info)
        else:
            self._problem(relative, "not a regular file, directory or symlink")

    def _add_file(self, relative: str, absolute: str, info: os.stat_result) -> None:
        row = self.reuse(relative, info)
        if row is None:
            self.result.to_read.append((relative, absolute, info))
        else:
            self.result.rows.append(row)

    def _walk_children(self, relative: str, absolute: str) -> None:
        """Record a directory's children, then walk its subdirectories once it is closed (a
        deep tree never holds more than one descriptor). Listed through a descriptor, each
        child's lstat is relative to it: no path lookup from the root per file, and a parent
        swapped for a symlink mid-scan is refused, never followed."""
        flags = _DIRECTORY_FLAGS if relative == "." else _DIRECTORY_FLAGS | os.O_NOFOLLOW
        try:
            fd = os.open(absolute, flags)
        except OSError as error:
            self._problem(relative, error.strerror or str(error))
            return
        try:
            others = self._record_children(relative, absolute, fd)
        finally:
            os.close(fd)
        for child_relative, child_absolute, info in others:
            self._add_found(child_relative, child_absolute, info, True)

    def _record_children(
        self, relative: str, absolute: str, fd: int
    ) -> list[tuple[str, str, os.stat_result]]:
        """Record the regular files listed in the open directory ``fd``; return the other
        children (subdirectories, symlinks, specials) for ``_add_found``."""
        others: list[tuple[str, str, os.stat_result]] = []
        try:
            with os.scandir(fd) as listing:
                children = list(listing)
        except OSError as error:
            self._problem(relative, error.strerror or str(error))
            return others
        rows, to_read, reuse = self.result.rows, self.result.to_read, self.reuse
        checked = plain_names(relative, [child.name for child in children])
        prefix = relative + "/"
        directory = absolute + os.sep
        for child in children:
            name = child.name
            if checked:
                child_relative = prefix + name
            else:
                try:
                    child_relative = child_path(relative, name)
                except UnsafePathError as error:
                    self._problem(name if relative == "." else prefix + name, str(error))
                    continue
            try:
                info = child.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            except OSError as error:
                self._problem(child_relative, error.strerror or str(error))
                continue
            if S_ISREG(info.st_mode) and not name.startswith(TEMP_PREFIX):
                row = reuse(child_relative, info)  # _add_file, inlined for the common case
                if row is None:
                    to_read.append((child_relative, directory + name, info))
                else:
                    rows.append(row)
            else:
                others.append((child_relative, directory + name, info))
        return others
