"""What a restore plan is made of: one action per path, the plan itself, and what a restore
leaves alone (see ``snapstore.restore.plan``)."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, NamedTuple

from snapstore.backend.layout import is_store_root
from snapstore.format.paths import parents, printable
from snapstore.fs.stamps import FileId, file_id
from snapstore.models import FileEntry

CurrentKind = Literal["file", "symlink", "dir", "other"]
Operation = Literal["unchanged", "create", "replace", "chmod", "remove"]
KnownDigest = Callable[[str, os.stat_result, bool], bytes | None]
"""The digest a target file is known to have (of its extent map, if asked), or None."""
Excluded = Callable[[str, bool], bool]
"""Whether a relative path (and whether it is a directory) is excluded from the snapshot."""


class Action(NamedTuple):
    """What a restore does to one path (a named tuple: a plan holds one per entry)."""

    entry: FileEntry
    operation: Operation
    current: CurrentKind | None

    @property
    def clears_existing(self) -> bool:
        """True when what is in the target must be removed first (a rename cannot replace a
        directory, nor put a directory over a file)."""
        if self.operation == "remove":
            return self.current is not None
        return self.operation == "replace" and "dir" in (self.current, self.entry.kind)


@dataclass
class Plan:
    """The actions a restore takes, in path order, what it must back up first, and the
    paths it leaves alone whatever the snapshot records (``kept``)."""

    target: str
    actions: list[Action] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    linked: set[str] = field(default_factory=set)
    """The hard-link groups the plan writes, by the ``link`` their members name: the first
    of each written becomes a file, the others links of it."""
    link_peers: set[str] = field(default_factory=set)
    """Recorded paths the plan leaves as they are that are, in the target, hard links of a
    file it replaces: the undo backup keeps them too, so that putting the target back makes
    them one file again."""
    target_id: FileId | None = None
    """The target directory the plan looked at (None: there was none); applying the plan
    refuses any other directory found at the target's path by then."""
    new_target: bool = False
    """Nothing was at the target's path when planned: the restore makes the target (with
    ``make_target``), and only that directory is the restore's to remove on a failure."""
    real_target: str | None = None
    """The target's real path, as locked (or checked against its journal's key) when
    planned: the plan is applied only in a directory reached there one component at a time
    without following links (None: a plan made only to compare, never applied)."""

    @property
    def changes(self) -> list[Action]:
        """The actions that change the target."""
        return [a for a in self.actions if a.operation != "unchanged"]

    def backup_paths(self) -> tuple[list[str], set[str]]:
        """Paths whose current state a pre-restore backup must keep, and which of them are
        directories whose contents go too (recursive); descendants of those are covered."""
        covered: set[str] = set()
        paths: list[str] = []
        recursive: set[str] = set()
        for action in self.changes:
            path = action.entry.path
            if any(parent in covered for parent in parents(path)):
                continue
            paths.append(path)
            if action.operation != "chmod":
                covered.add(path)
                if action.current == "dir":
                    recursive.add(path)
        for path in sorted(self.link_peers - covered):
            if not any(parent in covered for parent in parents(path)):
                paths.append(path)
        return paths, recursive

    def written_dirs(self) -> list[str]:
        """The directories (relative, "" for the target) a restore of this plan may leave
        temp files in if it is killed: the parents of the files and links it writes."""
        return sorted(
            {
                a.entry.path.rpartition("/")[0]
                for a in self.changes
                if a.operation != "remove" and a.entry.kind in ("file", "symlink")
            }
        )


@dataclass(frozen=True)
class Keep:
    """What a restore must leave alone in the target (see the module docstring)."""

    store_roots: frozenset[FileId] = frozenset()
    """Storage roots known by device and inode (the store's own), besides marked ones."""
    skipped: frozenset[str] = frozenset()
    """Paths the snapshot could not record, as recorded (``printable``)."""
    excluded: Excluded | None = None

    def holds_store(self, absolute: str, info: os.stat_result) -> bool:
        """True if the directory at ``absolute`` (with lstat ``info``) is a storage root."""
        return file_id(info) in self.store_roots or is_store_root(absolute)

    def leaves(self, path: str, is_dir: bool) -> bool:
        """True for a path the snapshot could not record or excludes."""
        if self.skipped and printable(path) in self.skipped:
            return True
        return self.excluded is not None and self.excluded(path, is_dir)


def wanted_mode(entry: FileEntry, keep_special_bits: bool) -> int:
    """The mode a restored path gets: setuid, setgid and sticky dropped unless asked for."""
    return entry.mode & (0o7777 if keep_special_bits else 0o777)


def kind_of(info: os.stat_result) -> CurrentKind:
    """What an lstat result says a path is."""
    if stat.S_ISREG(info.st_mode):
        return "file"
    if stat.S_ISLNK(info.st_mode):
        return "symlink"
    if stat.S_ISDIR(info.st_mode):
        return "dir"
    return "other"
