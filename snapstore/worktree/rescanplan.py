"""What an incremental create looks at again, or why it must scan everything instead.

Any doubt means a full scan: changes unknown, ``rehash``, another session, base directory,
requested paths or exclude rules (a ``.snapstoreignore`` that changed, or with ``gitignore``
a ``.gitignore`` in or under a changed path), a changed path that cannot be recorded as given.
Otherwise the plan lists the scans that find what now lies at and below each changed path,
the previous checkpoint's racy files and the paths it could not record, and the directories
whose own entry alone is read again (see ``snapstore.worktree.incremental``).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from snapstore.backend.layout import is_store_root
from snapstore.errors import UnsafePathError
from snapstore.format.manifest import EntryRow
from snapstore.format.paths import check_relative_path, printable
from snapstore.models import SnapshotInfo
from snapstore.worktree import statcache
from snapstore.worktree.changes import ChangedPaths, outermost, under
from snapstore.worktree.create import Request
from snapstore.worktree.excludes import GITIGNORE, escape
from snapstore.worktree.parentmemo import Remembered, decode_rows, find_row


@dataclass
class Plan:
    """What an incremental create scans: each (path, the requested path it lies in; a
    requested path stands for itself), the paths whose parent entries (at and below) those
    scans replace, the directories whose own entry alone is read again, and the parent's
    rows (decoded only when something is to be replaced)."""

    scans: list[tuple[str, str]]
    replaced: list[str]
    refresh: list[EntryRow]
    rows: Sequence[EntryRow] = ()


def refusal(
    request: Request,
    parent: SnapshotInfo | None,
    known: ChangedPaths | None,
    base: Remembered | None,
    initial: list[str],
    leading: list[str],
) -> str | None:
    """Why the create cannot build on ``parent`` with ``known``, or None. ``initial``: the
    fixed rules a create starts with now; ``leading``: git's rules read before its walk."""
    if known is None:
        return "the changes since the previous checkpoint are not known"
    if parent is None:
        return "no checkpoint to build on yet"
    if request.rehash:
        return "rehash reads everything"
    if base is None:
        return (
            "the previous checkpoint was not committed by this process, or was replaced or "
            "deleted since"
        )
    info = base.info
    if info.session != request.session or info.base_dir != request.base:
        return "the previous checkpoint is of another session or base directory"
    if info.roots != tuple(sorted(set(request.paths))) or request.shallow:
        return "the previous checkpoint recorded other paths"
    if base.gitignore != request.gitignore or not _same_excludes(
        info.excludes, initial, leading, request.gitignore
    ):
        return (
            "the exclude rules changed (options, the base directory's .snapstoreignore, or "
            "git's rules from outside the checkpointed paths)"
        )
    if known.since_ns > base.started_mono_ns:
        return "the changes do not cover the whole time since the previous checkpoint's scan"
    if any("link" in attrs for attrs in base.attrs.values()):
        return "the previous checkpoint records hard links"
    return None


def _same_excludes(
    recorded: tuple[str, ...], initial: list[str], leading: list[str], gitignore: bool
) -> bool:
    """Whether a scan starting with the fixed rules ``initial`` and git's rules ``leading``
    ends with the rules ``recorded`` (with ``gitignore``: ``leading``, then the rules of the
    ``.gitignore`` files the walk met, then ``initial``)."""
    if not gitignore:
        return list(recorded) == initial
    fixed_from = len(recorded) - len(initial)
    return (
        fixed_from >= len(leading)
        and list(recorded[fixed_from:]) == initial
        and list(recorded[: len(leading)]) == leading
    )


def _checked(paths: Iterable[str]) -> list[str] | None:
    """``paths`` sorted, or None if one is not a path a scan records as given."""
    checked = []
    for path in paths:
        if path != ".":
            try:
                check_relative_path(path)
            except UnsafePathError:
                return None
        checked.append(path)
    return sorted(checked)


def plan_rescan(
    request: Request, base: Remembered, known: ChangedPaths, leading: int, fixed: int
) -> Plan | str:
    """What to scan again, or why it cannot be worked out (a full scan then). Directories
    outside the requested paths (the base, the directories on the way to a requested path)
    have no entry to refresh. The parent's rules are ``leading`` of git's read before its
    walk, those of the ``.gitignore`` files the walk met, then ``fixed`` ones."""
    skipped = [entry.path for entry in base.info.skipped]
    if any(printable(path) != path for path in skipped):
        return "the previous checkpoint skipped a path whose name it could not record"
    changed = _checked([*known.rescan, *base.racy, *skipped, *_changed_links(request.base, base)])
    refresh = _checked(
        d for d in known.refresh if d != "." and any(under(d, r) for r in request.paths)
    )
    if changed is None or refresh is None:
        return "a changed path cannot be recorded as given"
    if not changed and not refresh:
        return Plan([], [], [])
    rows = decode_rows(base.rows)
    refreshed: list[EntryRow] = []
    for directory in refresh:
        row = _refreshed(request.base, rows, directory)
        if row is None:
            changed.append(directory)
        else:
            refreshed.append(row)
    replaced = [
        path
        for path in outermost(changed)
        if any(under(path, root) or under(root, path) for root in request.paths)
    ]
    refreshed = [row for row in refreshed if not any(under(row[0], p) for p in replaced)]
    if request.gitignore:
        rules = base.info.excludes
        doubt = _gitignore_doubt(rules[leading : len(rules) - fixed], replaced, refreshed)
        if doubt is not None:
            return doubt
    scans = _scans(replaced, request.paths)
    if (".", ".") in scans:
        return "the whole base directory is to be scanned again"
    return Plan(scans, replaced, refreshed, rows)


def _changed_links(base_dir: str, base: Remembered) -> list[str]:
    """The parent's files with several links that changed since its scan began, or are
    gone: a write through a link outside the tree changes the file without any event in it.
    The inode's change time tells (a write sets it, and nothing sets it back), within the
    racy window."""
    since_ns = base.started_ns - statcache.RACY_NS
    changed = []
    for path in base.linked:
        try:
            info = os.lstat(os.path.join(base_dir, path))
        except OSError:
            changed.append(path)
            continue
        if info.st_ctime_ns >= since_ns:
            changed.append(path)
    return changed


def _scans(replaced: list[str], requested: list[str]) -> list[tuple[str, str]]:
    """The scans that find what now lies at and below each replaced path: below a requested
    path, the path itself; above one, the whole requested path. In the order of the requested
    paths, as a full create adds them (the first row found of a path is the one kept)."""
    scans: list[tuple[str, str]] = []
    for path in replaced:
        for root in requested:
            if under(path, root):
                scans.append((path, root))
            elif under(root, path):
                scans.append((root, root))
    return list(dict.fromkeys(scans))


def _refreshed(base_dir: str, rows: Sequence[EntryRow], directory: str) -> EntryRow | None:
    """The new entry of a directory whose own entry alone changed, from one ``lstat``; None
    when it must be scanned again instead (the parent does not record it as a directory, or
    it is no longer a plain directory now)."""
    index = find_row(rows, directory)
    if index < 0 or rows[index][1] != "dir":
        return None
    absolute = os.path.join(base_dir, directory)
    try:
        info = os.lstat(absolute)
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode) or is_store_root(absolute):
        return None
    return (directory, "dir", info.st_mode & 0o7777, 0, info.st_mtime_ns, None, None)


def _gitignore_doubt(
    read_rules: Sequence[str], replaced: list[str], refreshed: list[EntryRow]
) -> str | None:
    """With ``gitignore``, why the parent's rules may no longer be what a full scan reads: a
    ``.gitignore`` among the changed paths, or a rule read from a ``.gitignore`` at or below
    a path scanned again (such a rule names its directory first; the file may be gone)."""
    for path in [*replaced, *(row[0] for row in refreshed)]:
        if path.rsplit("/", 1)[-1] == GITIGNORE:
            return f"{path} changed, and with it what is excluded"
    for path in replaced:
        prefix = escape(path) + "/"
        if any(rule.removeprefix("!").startswith(prefix) for rule in read_rules):
            return f"the rules of a .gitignore in {path} may have changed"
    return None
