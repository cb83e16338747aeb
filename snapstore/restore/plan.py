"""Plan a restore: what making a target directory match a snapshot changes, path by path.

Planning reads the target without following any symlink, writes nothing, and refuses unsafe
layouts before anything is written. Some paths are never touched, whatever the snapshot says
(they are *kept*): storage roots found anywhere in the target (the store's own, or any other
directory holding a snapstore FORMAT marker) and everything in them, the paths the snapshot
could not record (``skip_unreadable``), excluded paths, and special files (FIFOs, sockets,
devices), which no snapshot records. A directory that holds a kept path is never removed
whole: only what else it holds is.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Container, Iterable
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Literal, NamedTuple

from snapstore.errors import UnsafePathError
from snapstore.format.paths import (
    find_collisions,
    nearest_listed_ancestor,
    parents,
    printable,
)
from snapstore.fs.sparse import extents_digest
from snapstore.fs.stamps import FileId, file_id
from snapstore.models import FileEntry
from snapstore.repo.layout import MARKER_FILE, is_store_root
from snapstore.repo.loose import new_hasher
from snapstore.restore.linking import settle_links

CurrentKind = Literal["file", "symlink", "dir", "other"]
Operation = Literal["unchanged", "create", "replace", "chmod", "remove"]
KnownDigest = Callable[[str, os.stat_result, bool], bytes | None]
"""The digest a target file is known to have (of its extent map, if asked), or None."""
Excluded = Callable[[str, bool], bool]
"""Whether a relative path (and whether it is a directory) is excluded from the snapshot."""
_READY = "ready"
_FRESH = "fresh"
_KEPT = "kept"
_Chain = str | tuple[str, CurrentKind]


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


def same_content(path: str, entry: FileEntry) -> bool:
    """True if the regular file at ``path`` hashes to the entry's digest, computed as the
    entry's was (of its extent map, for a file with holes; never blocks on a FIFO put there
    since the plan looked)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        if entry.extents:
            return extents_digest(fd, entry.size) == entry.digest
        hasher = new_hasher(entry.size)
        while chunk := os.read(fd, 1 << 20):
            hasher.update(chunk)
    finally:
        os.close(fd)
    return hasher.digest() == entry.digest


def complete_dirs(
    selected: Iterable[FileEntry], roots: Iterable[str], *, whole_snapshot: bool
) -> set[str]:
    """The directories whose full listing the snapshot recorded ("" is the target itself):
    dir entries at or below a recursive root, and the target when "." was a root."""
    roots = list(roots)
    found = {""} if whole_snapshot and "." in roots else set()
    for entry in selected:
        if entry.kind == "dir" and any(
            root == "." or entry.path == root or entry.path.startswith(root + "/") for root in roots
        ):
            found.add(entry.path)
    return found


def _check_layout(entries: list[FileEntry]) -> None:
    """Refuse colliding paths and entries beneath a non-directory entry (nothing written)."""
    collisions = find_collisions(e.path for e in entries)
    if collisions:
        listed = ", ".join(f"{a!r} ~ {b!r}" for a, b in collisions[:5])
        raise UnsafePathError(
            f"snapshot paths would collide on a case-insensitive or normalizing filesystem: "
            f"{listed}; nothing was written"
        )
    kinds = {entry.path: entry.kind for entry in entries}
    for entry in entries:
        # The nearest listed ancestor suffices: if it is a dir, its own check covers the rest.
        parent = nearest_listed_ancestor(entry.path, kinds)
        if parent is not None and kinds[parent] != "dir":
            raise UnsafePathError(
                f"cannot restore {entry.path!r}: it lies beneath {parent!r}, which the "
                f"snapshot records as a {kinds[parent]}; nothing was written"
            )


class _Target:
    """The target as planning sees it: lstat results and the state of each directory chain,
    each looked up once."""

    def __init__(self, target: str, keep: Keep) -> None:
        self.prefix = os.path.join(target, "")
        self.keep = keep
        self.stats: dict[str, os.stat_result | None] = {}
        self.chains: dict[str, _Chain] = {"": _READY}
        self.fresh: set[str] = set()
        self._kept_dirs: dict[str, bool] = {}

    def is_kept_dir(self, path: str, info: os.stat_result) -> bool:
        """True if the directory ``path`` (lstat ``info``) is itself to be left alone."""
        known = self._kept_dirs.get(path)
        if known is None:
            known = self.keep.leaves(path, True) or self.keep.holds_store(self.prefix + path, info)
            self._kept_dirs[path] = known
        return known

    def current_of(self, path: str) -> CurrentKind | None:
        if path not in self.stats:
            try:
                self.stats[path] = os.lstat(self.prefix + path)
            except FileNotFoundError:
                self.stats[path] = None
        info = self.stats[path]
        return None if info is None else kind_of(info)

    def chain_of(self, directory: str) -> _Chain:
        """Whether ``directory`` and its ancestors are plain directories in the target now
        (ready), will be created by this plan (fresh), are or lie in a path to leave alone
        (kept), or hold a non-directory (unsafe). Ancestors are judged outermost first, so
        the first problem up the path wins."""
        pending = []
        while directory not in self.chains:
            pending.append(directory)
            directory = directory.rpartition("/")[0]
        state = self.chains[directory]
        for directory in reversed(pending):
            if state == _READY:
                kind = self.current_of(directory) if directory not in self.fresh else None
                info = self.stats.get(directory)
                if kind is None:
                    state = _FRESH
                elif kind != "dir":
                    state = (directory, kind)
                elif info is not None and self.is_kept_dir(directory, info):
                    state = _KEPT
            self.chains[directory] = state
        return state

    def holds_kept(self, path: str) -> bool:
        """True if the directory ``path`` in the target is, or holds at any depth, a path to
        leave alone (a storage root, a skipped, excluded or special file)."""
        pending = [path]
        while pending:
            directory = pending.pop()
            absolute = self.prefix + directory
            try:
                with os.scandir(absolute) as listing:
                    children = list(listing)
            except OSError:
                continue
            if any(child.name == MARKER_FILE for child in children) and is_store_root(absolute):
                return True
            for child in children:
                child_path = f"{directory}/{child.name}"
                info = child.stat(follow_symlinks=False)
                kind = kind_of(info)
                if kind == "other" or self.keep.leaves(child_path, kind == "dir"):
                    return True
                if kind == "dir":
                    if file_id(info) in self.keep.store_roots:
                        return True
                    pending.append(child_path)
        return False

    def removals(self, path: str, current: CurrentKind, plan: Plan) -> list[Action]:
        """The actions that remove ``path`` from the target: one, or, for a directory that
        holds something to leave alone, one per removable thing in it (the directory stays)."""
        if current != "dir" or not self.holds_kept(path):
            return [Action(FileEntry(path, "absent"), "remove", current)]
        actions: list[Action] = []
        for child in self.children(path, plan):
            info = child[1]
            actions.extend(self.removals(child[0], kind_of(info), plan))
        return actions

    def children(
        self, directory: str, plan: Plan, recorded: Container[str] = ()
    ) -> list[tuple[str, os.stat_result]]:
        """What ``directory`` holds that may be removed, leaving out the paths in
        ``recorded`` (never looked at: the plan decides them); what must stay goes to
        ``plan.kept``."""
        absolute = self.prefix + directory if directory else self.prefix
        try:
            with os.scandir(absolute) as listing:
                found = list(listing)
        except FileNotFoundError:
            return []
        removable = []
        for child in found:
            path = f"{directory}/{child.name}" if directory else child.name
            if path in recorded:
                continue
            info = child.stat(follow_symlinks=False)
            kind = kind_of(info)
            if (
                kind == "other"
                or self.keep.leaves(path, kind == "dir")
                or (kind == "dir" and self.keep.holds_store(self.prefix + path, info))
            ):
                plan.kept.append(printable(path))
                continue
            removable.append((path, info))
        return removable


def make_plan(
    entries: Iterable[FileEntry],
    target: str,
    *,
    complete: Iterable[str] = (),
    keep: Keep = Keep(),
    keep_special_bits: bool = False,
    known_digest: KnownDigest | None = None,
) -> Plan:
    """Decide what restoring ``entries`` into ``target`` changes; writes nothing.

    In ``complete`` directories, whatever the target holds beyond the snapshot is removed,
    except what ``keep`` says to leave alone. ``known_digest(path, lstat)`` may vouch for a
    target file's digest (the stat cache), so that unchanged files are not hashed. Raises
    UnsafePathError for entries that would collide on a case-insensitive or normalizing
    filesystem, for entries beneath one that is not a directory, for a symlink or file in the
    target where a path needs a parent directory the snapshot does not itself record, and
    for a directory to replace that holds something to leave alone.
    """
    # Path order: a directory's own action is decided before anything beneath it.
    entries = sorted(entries, key=attrgetter("path"))
    _check_layout(entries)
    plan = Plan(target)
    view = _Target(target, keep)
    prefix = view.prefix
    mode_mask = 0o7777 if keep_special_bits else 0o777
    for entry in entries:
        path = entry.path
        current: CurrentKind | None = None
        info = None
        state = view.chains.get(path.rpartition("/")[0]) or view.chain_of(path.rpartition("/")[0])
        if isinstance(state, tuple):
            parent, kind = state
            raise UnsafePathError(
                f"cannot restore {path!r}: {parent!r} in the target is a {kind}, not a "
                "directory, and the snapshot does not record it; nothing was written"
            )
        if state == _KEPT:
            plan.kept.append(path)
            continue
        if state == _READY:
            current = view.current_of(path)
            info = view.stats[path]
        if (
            current == "file" == entry.kind
            and info is not None
            and info.st_size == entry.size
            and info.st_mode & 0o7777 == entry.mode & mode_mask
            and known_digest is not None
            and known_digest(path, info, entry.extents) == entry.digest
        ):
            plan.actions.append(Action(entry, "unchanged", current))  # _decide's verdict
            continue
        if current is not None and info is not None and _left_alone(view, path, current, info):
            plan.kept.append(printable(path))
            continue
        operation = _decide(entry, current, info, prefix + path, keep_special_bits, known_digest)
        if operation in ("create", "replace", "remove"):
            view.fresh.add(path)
        if current == "dir" and operation in ("replace", "remove") and view.holds_kept(path):
            if operation == "replace":
                raise UnsafePathError(
                    f"cannot restore {path!r} as a {entry.kind}: the directory there holds "
                    "a snapstore root or a path the restore must leave alone; nothing was "
                    "written"
                )
            plan.actions.extend(view.removals(path, current, plan))
            continue
        plan.actions.append(Action(entry, operation, current))
    _add_extras(plan, view, entries, complete)
    plan.actions.sort(key=attrgetter("entry.path"))
    plan.linked = settle_links(plan.actions, view.stats)
    plan.kept = sorted(set(plan.kept))
    return plan


def _left_alone(view: _Target, path: str, current: CurrentKind, info: os.stat_result) -> bool:
    """True if what the target holds at a recorded path must not be touched: a skipped or
    excluded path, or a storage root."""
    if current == "dir":
        return view.is_kept_dir(path, info)
    return view.keep.leaves(path, False)


def _add_extras(
    plan: Plan, view: _Target, entries: list[FileEntry], complete: Iterable[str]
) -> None:
    """Removals for what complete directories in the target hold beyond the snapshot."""
    recorded = {entry.path for entry in entries}
    ready_dirs = {"": True} | {
        a.entry.path: a.current == "dir" and a.operation in ("unchanged", "chmod")
        for a in plan.actions
    }
    for directory in sorted(complete):
        if not ready_dirs.get(directory):
            continue
        for path, info in view.children(directory, plan, recorded):
            plan.actions.extend(view.removals(path, kind_of(info), plan))


def _decide(
    entry: FileEntry,
    current: CurrentKind | None,
    info: os.stat_result | None,
    absolute: str,
    keep_special_bits: bool,
    known_digest: KnownDigest | None,
) -> Operation:
    if entry.kind == "absent":
        return "unchanged" if current is None else "remove"
    if current is None or info is None:
        return "create"
    if current != entry.kind:
        return "replace"
    if entry.kind == "symlink":
        return "unchanged" if os.readlink(absolute) == entry.target else "replace"
    if entry.kind == "file":
        if info.st_size != entry.size:
            return "replace"
        known = None if known_digest is None else known_digest(entry.path, info, entry.extents)
        if known is None and not same_content(absolute, entry):
            return "replace"
        if known is not None and known != entry.digest:
            return "replace"
    if stat.S_IMODE(info.st_mode) != wanted_mode(entry, keep_special_bits):
        return "chmod"
    return "unchanged"
