"""Plan and apply a restore: make a target directory match a snapshot's entries, safely.

Planning reads the target without following any symlink and refuses unsafe layouts before
anything is written. Applying walks the target through directory descriptors opened with
``O_NOFOLLOW``, writes each file to a temp file beside its destination, verifies the bytes
against the digest while copying, and renames it into place, so a planted symlink can never
redirect a write outside the target.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Literal, NamedTuple

from snapstore.blobs import BlobStore, new_hasher
from snapstore.durable import discard, ensure_dir, temp_name
from snapstore.errors import SnapstoreError, UnsafePathError
from snapstore.fsio import FileSystem
from snapstore.models import FileEntry
from snapstore.paths import check_relative_path, find_collisions, nearest_listed_ancestor, parents
from snapstore.staging import StagedFiles

Progress = Callable[[int, int], None]
CurrentKind = Literal["file", "symlink", "dir", "other"]
Operation = Literal["unchanged", "create", "replace", "chmod", "remove"]
KnownDigest = Callable[[str, os.stat_result], bytes | None]
_READY = "ready"
_FRESH = "fresh"
_Chain = str | tuple[str, CurrentKind]
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class PathNotInSnapshotError(SnapstoreError, KeyError):
    """A path asked for is not recorded in the snapshot."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "path not in snapshot"


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
    """The actions a restore takes, in path order, and what it must back up first."""

    target: str
    actions: list[Action] = field(default_factory=list)

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


def wanted_mode(entry: FileEntry, keep_special_bits: bool) -> int:
    """The mode a restored path gets: setuid, setgid and sticky dropped unless asked for."""
    return entry.mode & (0o7777 if keep_special_bits else 0o777)


def _kind_of(info: os.stat_result) -> CurrentKind:
    if stat.S_ISREG(info.st_mode):
        return "file"
    if stat.S_ISLNK(info.st_mode):
        return "symlink"
    if stat.S_ISDIR(info.st_mode):
        return "dir"
    return "other"


def same_content(path: str, entry: FileEntry) -> bool:
    """True if the file at ``path`` hashes to the entry's digest."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        hasher = new_hasher(entry.size)
        while chunk := os.read(fd, 1 << 20):
            hasher.update(chunk)
    finally:
        os.close(fd)
    return hasher.digest() == entry.digest


def select_entries(entries: Iterable[FileEntry], paths: Iterable[str] | None) -> list[FileEntry]:
    """The entries a restore of ``paths`` (None: all) touches; each path must be recorded."""
    all_entries = sorted(entries, key=attrgetter("path"))
    if paths is None:
        return all_entries
    wanted = []
    for raw in paths:
        normalized = posixpath.normpath(str(raw).replace(os.sep, "/"))
        wanted.append(check_relative_path(normalized))
    selected = [
        e for e in all_entries if any(e.path == w or e.path.startswith(w + "/") for w in wanted)
    ]
    recorded = {e.path for e in selected}
    for path in wanted:
        if not any(p == path or p.startswith(path + "/") for p in recorded):
            raise PathNotInSnapshotError(f"path {path!r} is not in the snapshot")
    return selected


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


def make_plan(
    entries: Iterable[FileEntry],
    target: str,
    *,
    complete: Iterable[str] = (),
    keep_out: Iterable[tuple[int, int]] = (),
    keep_special_bits: bool = False,
    known_digest: KnownDigest | None = None,
) -> Plan:
    """Decide what restoring ``entries`` into ``target`` changes; writes nothing.

    In ``complete`` directories, whatever the target holds beyond the snapshot is removed,
    except the directories in ``keep_out`` (by device and inode: the store's own root).
    ``known_digest(path, lstat)`` may vouch for a target file's digest (the stat cache), so
    that unchanged files are not hashed. Raises UnsafePathError for entries that would
    collide on a case-insensitive or normalizing filesystem, for entries beneath one that is
    not a directory, and for a symlink or file in the target where a path needs a parent
    directory the snapshot does not itself record.
    """
    # Path order: a directory's own action is decided before anything beneath it.
    entries = sorted(entries, key=attrgetter("path"))
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
    plan = Plan(target)
    stats: dict[str, os.stat_result | None] = {}
    fresh: set[str] = set()

    prefix = os.path.join(target, "")

    def current_of(path: str) -> CurrentKind | None:
        if path not in stats:
            try:
                stats[path] = os.lstat(prefix + path)
            except FileNotFoundError:
                stats[path] = None
        info = stats[path]
        return None if info is None else _kind_of(info)

    chains: dict[str, _Chain] = {"": _READY}

    def chain_of(directory: str) -> _Chain:
        """Whether ``directory`` and its ancestors are plain directories in the target now
        (ready), will be created by this plan (fresh), or hold a non-directory (unsafe).
        Ancestors are judged outermost first, so the first problem up the path wins."""
        pending = []
        while directory not in chains:
            pending.append(directory)
            directory = directory.rpartition("/")[0]
        state = chains[directory]
        for directory in reversed(pending):
            if state == _READY:
                kind = current_of(directory) if directory not in fresh else None
                if kind is None:
                    state = _FRESH
                elif kind != "dir":
                    state = (directory, kind)
            chains[directory] = state
        return state

    mode_mask = 0o7777 if keep_special_bits else 0o777
    for entry in entries:
        path = entry.path
        current: CurrentKind | None = None
        info = None
        directory = path.rpartition("/")[0]
        state = chains.get(directory) or chain_of(directory)
        if isinstance(state, tuple):
            parent, kind = state
            raise UnsafePathError(
                f"cannot restore {path!r}: {parent!r} in the target is a {kind}, not a "
                "directory, and the snapshot does not record it; nothing was written"
            )
        if state == _READY:
            current = current_of(path)
            info = stats[path]
        if (
            current == "file" == entry.kind
            and info is not None
            and info.st_size == entry.size
            and info.st_mode & 0o7777 == entry.mode & mode_mask
            and known_digest is not None
            and known_digest(path, info) == entry.digest
        ):
            operation: Operation = "unchanged"  # _decide's verdict, without reading the file
        else:
            operation = _decide(
                entry, current, info, prefix + path, keep_special_bits, known_digest
            )
        if operation in ("create", "replace", "remove"):
            fresh.add(path)
        plan.actions.append(Action(entry, operation, current))
    recorded = {entry.path for entry in entries}
    ready_dirs = {"": True} | {
        a.entry.path: a.current == "dir" and a.operation in ("unchanged", "chmod")
        for a in plan.actions
    }
    extras = []
    for directory in sorted(complete):
        if ready_dirs.get(directory):
            extras.extend(_extra_paths(target, directory, recorded, set(keep_out)))
    plan.actions.extend(extras)
    plan.actions.sort(key=attrgetter("entry.path"))
    return plan


def _extra_paths(
    target: str, directory: str, recorded: set[str], keep_out: set[tuple[int, int]]
) -> list[Action]:
    """Removals for what a complete directory in the target holds beyond the snapshot."""
    absolute = os.path.join(target, directory) if directory else target
    try:
        with os.scandir(absolute) as listing:
            children = list(listing)
    except FileNotFoundError:
        return []
    extras = []
    for child in children:
        path = f"{directory}/{child.name}" if directory else child.name
        if path in recorded:
            continue
        info = child.stat(follow_symlinks=False)
        if (info.st_dev, info.st_ino) in keep_out:
            continue
        extras.append(Action(FileEntry(path, "absent"), "remove", _kind_of(info)))
    return extras


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
        known = None if known_digest is None else known_digest(entry.path, info)
        if known is None and not same_content(absolute, entry):
            return "replace"
        if known is not None and known != entry.digest:
            return "replace"
    if stat.S_IMODE(info.st_mode) != wanted_mode(entry, keep_special_bits):
        return "chmod"
    return "unchanged"


class _DirHandles:
    """Directory descriptors under the target, opened component by component with O_NOFOLLOW."""

    def __init__(self, fs: FileSystem, target: str, *, durable: bool) -> None:
        self.fs = fs
        ensure_dir(fs, target, stop_at=os.sep, durable=durable)
        self.root_fd = os.open(target, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        self._fds: dict[str, int] = {"": self.root_fd}
        self.touched: set[str] = set()

    def get(self, relative_dir: str, *, create: bool) -> int:
        """A descriptor for ``relative_dir`` ("" is the target); never follows a symlink."""
        if relative_dir in self._fds:
            return self._fds[relative_dir]
        parent, _, name = relative_dir.rpartition("/")
        parent_fd = self.get(parent, create=create)
        try:
            fd = os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
        except FileNotFoundError:
            if not create:
                raise
            self.fs.mkdir(name, 0o777, dir_fd=parent_fd)
            self.touched.add(parent)
            fd = os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
        except OSError as error:
            raise UnsafePathError(
                f"{relative_dir!r} in the target is no longer a plain directory ({error})"
            ) from None
        self._fds[relative_dir] = fd
        return fd

    def forget(self, relative_dir: str) -> None:
        """Drop cached descriptors at or below a directory that is being removed."""
        for key in [k for k in self._fds if k == relative_dir or k.startswith(relative_dir + "/")]:
            if key:
                os.close(self._fds.pop(key))

    def close(self) -> None:
        """Close every descriptor."""
        for fd in self._fds.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self._fds.clear()


def _split(path: str) -> tuple[str, str]:
    parent, _, name = path.rpartition("/")
    return parent, name


def remove_tree(fs: FileSystem, parent_fd: int, name: str) -> None:
    """Remove a directory and everything in it, through descriptors, never following links."""
    fd = os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    try:
        for child in list(os.scandir(fd)):
            if child.is_dir(follow_symlinks=False):
                remove_tree(fs, fd, child.name)
            else:
                fs.unlink(child.name, dir_fd=fd)
    finally:
        os.close(fd)
    fs.rmdir(name, dir_fd=parent_fd)


def _write_symlink(fs: FileSystem, parent_fd: int, name: str, target: str) -> None:
    temp = temp_name()
    fs.symlink(target, temp, dir_fd=parent_fd)
    try:
        fs.replace(temp, name, src_dir_fd=parent_fd, dst_dir_fd=parent_fd)
    except BaseException:
        discard(fs, temp, dir_fd=parent_fd)
        raise


def _set_dir_mode(fs: FileSystem, parent_fd: int, name: str, mode: int, durable: bool) -> None:
    fd = os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    try:
        fs.fchmod(fd, mode)
        if durable:
            fs.fsync(fd)
    finally:
        os.close(fd)


def apply_plan(
    plan: Plan,
    blobs: BlobStore,
    fs: FileSystem,
    *,
    durable: bool,
    keep_special_bits: bool = False,
    progress: Progress | None = None,
) -> None:
    """Carry out a plan: removals deepest first, then creations in path order, then the
    modes of directories (last, so a read-only directory can still be filled)."""
    changes = plan.changes
    handles = _DirHandles(fs, plan.target, durable=durable)
    staged = StagedFiles(fs, blobs, durable=durable)
    try:
        for action in sorted(changes, key=lambda a: a.entry.path, reverse=True):
            if action.clears_existing:
                parent, name = _split(action.entry.path)
                parent_fd = handles.get(parent, create=False)
                if action.current == "dir":
                    handles.forget(action.entry.path)
                    remove_tree(fs, parent_fd, name)
                else:
                    fs.unlink(name, dir_fd=parent_fd)
                handles.touched.add(parent)
        dir_modes: list[tuple[str, int]] = []
        for done, action in enumerate(changes, 1):
            entry = action.entry
            parent, name = _split(entry.path)
            mode = wanted_mode(entry, keep_special_bits)
            if action.operation != "remove":
                parent_fd = handles.get(parent, create=True)
                if entry.kind == "dir":
                    if action.operation != "chmod":
                        fs.mkdir(name, 0o700, dir_fd=parent_fd)
                    dir_modes.append((entry.path, mode))
                elif entry.kind == "symlink":
                    assert entry.target is not None
                    _write_symlink(fs, parent_fd, name, entry.target)
                elif action.operation == "chmod":
                    file_fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=parent_fd)
                    try:
                        fs.fchmod(file_fd, mode)
                        if durable:
                            fs.fsync(file_fd)
                    finally:
                        os.close(file_fd)
                else:
                    staged.add(parent_fd, name, entry, mode)
                handles.touched.add(parent)
            if progress is not None:
                progress(done, len(changes))
        staged.publish()
        for path, mode in sorted(dir_modes, reverse=True):
            parent, name = _split(path)
            _set_dir_mode(fs, handles.get(parent, create=False), name, mode, durable)
        if durable:
            touched = []
            for relative_dir in sorted(handles.touched):
                with contextlib.suppress(FileNotFoundError):
                    touched.append(handles.get(relative_dir, create=False))
            fs.fsync_files(touched)
    except BaseException:
        staged.discard()
        raise
    finally:
        handles.close()
