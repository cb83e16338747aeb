"""Collect the file set a snapshot records: walk requested paths without following symlinks."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from snapstore.durable import TEMP_PREFIX
from snapstore.errors import UnsafePathError
from snapstore.models import EntryKind, SkippedPath
from snapstore.paths import check_relative_path, child_path, parents


class ScannedPath(NamedTuple):
    """One path found by the scan, with the lstat it was found with (None for ``absent``).
    A named tuple: a scan makes one per file, and tuples are several times cheaper to build."""

    path: str
    kind: EntryKind
    absolute: str
    stat: os.stat_result | None = None
    target: str | None = None


@dataclass
class ScanResult:
    """Everything a scan found, plus the paths it could not record."""

    items: list[ScannedPath] = field(default_factory=list)
    skipped: list[SkippedPath] = field(default_factory=list)


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


class Scanner:
    """Walks paths under a base directory, skipping the store's own root and temp files."""

    def __init__(
        self,
        base_dir: str,
        *,
        exclude_dirs: Iterable[tuple[int, int]] = (),
        skip_unreadable: bool = False,
    ) -> None:
        self.base_dir = base_dir
        self.exclude_dirs = set(exclude_dirs)
        self.skip_unreadable = skip_unreadable
        self.result = ScanResult()
        self._seen: set[str] = set()

    def _problem(self, path: str, message: str) -> None:
        if not self.skip_unreadable:
            raise UnreadablePathError(f"cannot snapshot {path!r}: {message}")
        self.result.skipped.append(SkippedPath(path, message))

    def add(self, relative: str, *, recursive: bool = True) -> None:
        """Record ``relative`` (``"."`` for the whole base) and, for directories, what is below."""
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
            self._record(ScannedPath(relative, "absent", absolute))
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
        if stat.S_ISLNK(info.st_mode):
            try:
                target = os.readlink(absolute)
            except OSError as error:
                self._problem(relative, error.strerror or str(error))
                return
            self._record(ScannedPath(relative, "symlink", absolute, info, target))
        elif stat.S_ISDIR(info.st_mode):
            if (info.st_dev, info.st_ino) in self.exclude_dirs:
                return
            self._record(ScannedPath(relative, "dir", absolute, info))
            if recursive:
                self._walk_children(relative, absolute)
        elif stat.S_ISREG(info.st_mode):
            self._record(ScannedPath(relative, "file", absolute, info))
        else:
            self._problem(relative, "not a regular file, directory or symlink")

    def _walk_children(self, relative: str, absolute: str) -> None:
        try:
            with os.scandir(absolute) as listing:
                children = sorted(listing, key=lambda entry: entry.name)
        except OSError as error:
            self._problem(relative, error.strerror or str(error))
            return
        seen, items = self._seen, self.result.items
        for child in children:
            try:
                child_relative = child_path(relative, child.name)
            except UnsafePathError as error:
                name = child.name if relative == "." else f"{relative}/{child.name}"
                self._problem(name, str(error))
                continue
            try:
                info = child.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            except OSError as error:
                self._problem(child_relative, error.strerror or str(error))
                continue
            if stat.S_ISREG(info.st_mode) and not child.name.startswith(TEMP_PREFIX):
                if child_relative not in seen:
                    seen.add(child_relative)
                    items.append(ScannedPath(child_relative, "file", child.path, info))
            else:
                self._add_found(child_relative, child.path, info, True)

    def _record(self, item: ScannedPath) -> None:
        if item.path not in self._seen:
            self._seen.add(item.path)
            self.result.items.append(item)
