"""The target directory as a restore's plan sees it: each path's current kind (one ``lstat``,
remembered), whether the directories on the way to a path are ready, to be created, kept or
unsafe, what a directory holds that may be removed, and whether a file already holds an
entry's bytes."""

from __future__ import annotations

import os
import stat
from collections.abc import Container

from snapstore.backend.layout import MARKER_FILE, is_store_root
from snapstore.errors import UnsafePathError
from snapstore.format.hashing import new_hasher
from snapstore.format.paths import child_path, printable, recordable_link_target
from snapstore.fs.chunking import holds_map
from snapstore.fs.stamps import file_id
from snapstore.fs.tempnames import is_target_marker
from snapstore.models import FileEntry
from snapstore.restore.actions import Action, CurrentKind, Keep, Plan, kind_of

READY = "ready"
FRESH = "fresh"
KEPT = "kept"
Chain = str | tuple[str, CurrentKind]
"""What the directories on the way to a path are: all plain directories now (``READY``), one
to be created by the plan (``FRESH``), one to leave alone (``KEPT``), or (that directory, what
it is instead) when one is not a directory."""


def same_content(path: str, entry: FileEntry) -> bool:
    """True if the regular file at ``path`` hashes to the entry's digest, computed as the
    entry's was (of its extent map, for a large file or one with holes; never blocks on a
    FIFO put there since the plan looked)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        if entry.extents and entry.digest is not None:
            return holds_map(fd, entry.size, entry.digest)
        hasher = new_hasher(entry.size)
        while chunk := os.read(fd, 1 << 20):
            hasher.update(chunk)
    finally:
        os.close(fd)
    return hasher.digest() == entry.digest


class TargetView:
    """The target as planning sees it: lstat results and the state of each directory chain,
    each looked up once."""

    def __init__(self, target: str, keep: Keep, *, missing: bool = False) -> None:
        """``missing``: nothing is at ``target`` (the plan makes it, and every path in it
        is new: none is looked up)."""
        self.prefix = os.path.join(target, "")
        self.keep = keep
        self.stats: dict[str, os.stat_result | None] = {}
        self.chains: dict[str, Chain] = {"": FRESH if missing else READY}
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

    def chain_of(self, directory: str) -> Chain:
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
            if state == READY:
                kind = self.current_of(directory) if directory not in self.fresh else None
                info = self.stats.get(directory)
                if kind is None:
                    state = FRESH
                elif kind != "dir":
                    state = (directory, kind)
                elif info is not None and self.is_kept_dir(directory, info):
                    state = KEPT
            self.chains[directory] = state
        return state

    def replace_parent(self, directory: str, current: CurrentKind) -> Action:
        """The removal of the non-directory at ``directory`` (found on the way to a path),
        after which the plan creates that directory: every chain through it is fresh."""
        self.fresh.add(directory)
        self.chains[directory] = FRESH
        below = directory + "/"
        for known in [d for d in self.chains if d.startswith(below)]:
            del self.chains[known]
        return Action(FileEntry(directory, "absent"), "remove", current)

    def holds_kept(self, path: str) -> bool:
        """True if the directory ``path`` in the target is, or holds at any depth, a path to
        leave alone (a storage root, a skipped, excluded or special file, a name or a link
        target no snapshot can record)."""
        return self.kept_inside(path) is not None

    def kept_inside(self, path: str) -> str | None:
        """The first path to leave alone found in the directory ``path`` (itself, if it is
        a storage root), or None."""
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
                return directory
            for child in children:
                child_path = f"{directory}/{child.name}"
                try:
                    info = child.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue
                kind = kind_of(info)
                if (
                    kind == "other"
                    or self.keep.leaves(child_path, kind == "dir")
                    or unrecordable(directory, child.name, kind, self.prefix + child_path)
                ):
                    return child_path
                if kind == "dir":
                    if file_id(info) in self.keep.store_roots:
                        return child_path
                    pending.append(child_path)
        return None

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
        ``recorded`` (never looked at: the plan decides them) and, in the target itself, a
        restore's target marker (it goes with its journal); what must stay goes to
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
            if path in recorded or (not directory and is_target_marker(child.name)):
                continue
            info = child.stat(follow_symlinks=False)
            self.stats[path] = info
            kind = kind_of(info)
            if (
                kind == "other"
                or unrecordable(directory, child.name, kind, self.prefix + path)
                or self.keep.leaves(path, kind == "dir")
                or (kind == "dir" and self.keep.holds_store(self.prefix + path, info))
            ):
                plan.kept.append(printable(path))
                continue
            removable.append((path, info))
        return removable


def unrecordable(directory: str, name: str, kind: CurrentKind, absolute: str) -> bool:
    """Whether no snapshot could record ``name`` in ``directory`` (a name that is not UTF-8
    or holds a backslash; a symlink whose target is not UTF-8): no undo backup could keep
    it either, so a restore leaves it alone."""
    try:
        child_path(directory or ".", name)
    except UnsafePathError:
        return True
    if kind != "symlink":
        return False
    try:
        return not recordable_link_target(os.readlink(absolute))
    except OSError:
        return False
