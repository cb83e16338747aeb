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
from collections.abc import Iterable, Mapping
from operator import attrgetter

from snapstore.errors import UnsafePathError
from snapstore.format.paths import (
    find_collisions,
    nearest_listed_ancestor,
    printable,
)
from snapstore.fs.stamps import FileId, file_id
from snapstore.models import FileEntry
from snapstore.restore.actions import (
    Action,
    CurrentKind,
    Keep,
    KnownDigest,
    Operation,
    Plan,
    kind_of,
    wanted_mode,
)
from snapstore.restore.linking import settle_links
from snapstore.restore.targetview import KEPT, READY, TargetView, same_content, unrecordable

REMOVING = ("replace", "remove")
"""The operations that take away what a path holds now."""
NOTHING_KEPT = Keep()
"""The default of ``make_plan``: only what any restore leaves alone."""


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


def make_plan(
    entries: Iterable[FileEntry],
    target: str,
    *,
    complete: Iterable[str] = (),
    keep: Keep = NOTHING_KEPT,
    keep_special_bits: bool = False,
    known_digest: KnownDigest | None = None,
    links: bool = True,
    replace_parents: bool = False,
    real_target: str | None = None,
) -> Plan:
    """Decide what restoring ``entries`` into ``target`` changes; writes nothing.

    In ``complete`` directories, whatever the target holds beyond the snapshot is removed,
    except what ``keep`` says to leave alone. ``known_digest(path, lstat)`` may vouch for a
    target file's digest (the stat cache), so that unchanged files are not hashed. Raises
    UnsafePathError for entries that would collide on a case-insensitive or normalizing
    filesystem, for entries beneath one that is not a directory, for a symlink or file in the
    target where a path needs a parent directory the snapshot does not itself record, and
    for a directory to replace that holds something to leave alone. ``links=False`` judges
    each path on its own (kind, content, mode), leaving hard links out of it.
    ``replace_parents`` (the rollback of a killed restore, from its undo backup, which records
    the paths it keeps but not the directories on the way): a file, symlink or special file
    found where such a directory must be is removed, rather than refused (the recovery keeps
    it in a new backup first: someone put it there after the restore was killed).
    ``real_target``: where the plan may be applied (``Plan.real_target``).
    """
    # Path order: a directory's own action is decided before anything beneath it.
    entries = sorted(entries, key=attrgetter("path"))
    _check_layout(entries)
    target_id, missing = _directory_id(target)
    plan = Plan(target, target_id=target_id, new_target=missing, real_target=real_target)
    view = TargetView(target, keep, missing=missing)
    prefix = view.prefix
    mode_mask = 0o7777 if keep_special_bits else 0o777
    for entry in entries:
        path = entry.path
        current: CurrentKind | None = None
        info = None
        state = view.chains.get(path.rpartition("/")[0]) or view.chain_of(path.rpartition("/")[0])
        if isinstance(state, tuple) and replace_parents:
            plan.actions.append(view.replace_parent(*state))
            state = view.chain_of(path.rpartition("/")[0])
        if isinstance(state, tuple):
            parent, kind = state
            raise UnsafePathError(
                f"cannot restore {path!r}: {parent!r} in the target is a {kind}, not a "
                "directory, and the snapshot does not record it; nothing was written"
            )
        if state == KEPT:
            plan.kept.append(path)
            continue
        if state == READY:
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
        inside = view.kept_inside(path) if current == "dir" and operation in REMOVING else None
        if current == "dir" and inside is not None:
            if operation == "replace":
                raise UnsafePathError(
                    f"cannot restore {path!r} as a {entry.kind}: the directory there holds "
                    f"{printable(inside)!r}, a snapstore root or a path the restore must leave "
                    "alone (one it was asked to skip, a special file, or a name or link "
                    "target no snapshot can record); nothing was written"
                )
            plan.actions.extend(view.removals(path, current, plan))
            continue
        plan.actions.append(Action(entry, operation, current))
    _add_extras(plan, view, entries, complete)
    plan.actions.sort(key=attrgetter("entry.path"))
    if links:
        plan.linked = settle_links(plan.actions, view.stats)
        plan.link_peers = _link_peers(plan, view.stats)
    plan.kept = sorted(set(plan.kept))
    return plan


def _link_peers(plan: Plan, stats: Mapping[str, os.stat_result | None]) -> set[str]:
    """The recorded paths that share an inode, in the target, with a file the plan replaces
    or removes (on its own, or inside a directory it removes), and are not changed themselves
    (see ``Plan.link_peers``)."""
    wanted = {
        file_id(info)
        for action in plan.changes
        if action.current == "file"
        and action.operation != "chmod"
        and (info := stats.get(action.entry.path)) is not None
        and info.st_nlink > 1
    }
    for action in plan.changes:
        if action.current == "dir" and action.clears_existing:
            wanted.update(_linked_files_under(os.path.join(plan.target, action.entry.path)))
    if not wanted:
        return set()
    changed = {action.entry.path for action in plan.changes}
    recorded = {action.entry.path for action in plan.actions}
    return {
        path
        for path, info in stats.items()
        if info is not None
        and path in recorded
        and path not in changed
        and stat.S_ISREG(info.st_mode)
        and info.st_nlink > 1
        and file_id(info) in wanted
    }


def _directory_id(target: str) -> tuple[FileId | None, bool]:
    """The identity of the directory at ``target`` now (None if there is none), and whether
    nothing at all is there (a restore into a new directory: nothing in it to look at)."""
    try:
        info = os.stat(target)
    except FileNotFoundError:
        return None, True
    except NotADirectoryError:
        return None, False
    return file_id(info) if stat.S_ISDIR(info.st_mode) else None, False


def _linked_files_under(directory: str) -> set[FileId]:
    """The identities of the files with several links in a directory's subtree, walked
    without following symlinks (what cannot be listed is passed over: it only costs the
    undo a link)."""
    found: set[FileId] = set()
    pending = [directory]
    while pending:
        try:
            with os.scandir(pending.pop()) as listing:
                children = list(listing)
        except OSError:
            continue
        for child in children:
            try:
                info = child.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(info.st_mode):
                pending.append(child.path)
            elif stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
                found.add(file_id(info))
    return found


def _left_alone(view: TargetView, path: str, current: CurrentKind, info: os.stat_result) -> bool:
    """True if what the target holds at a recorded path must not be touched: a skipped or
    excluded path, or a storage root."""
    if current == "dir":
        return view.is_kept_dir(path, info)
    if current == "symlink" and unrecordable("", path, current, view.prefix + path):
        return True
    return view.keep.leaves(path, False)


def _add_extras(
    plan: Plan, view: TargetView, entries: list[FileEntry], complete: Iterable[str]
) -> None:
    """Removals for what complete directories in the target hold beyond the snapshot."""
    recorded = {entry.path for entry in entries}
    ready_dirs = {"": plan.target_id is not None} | {
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
