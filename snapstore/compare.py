"""Compare: what changed between two snapshots, between a snapshot and a directory (from a
restore's plan), and a path's history across a session.

Only manifests are read (no blob): two entries are the same when kind, mode, size, digest,
link target and file attributes (holes, hard link) agree.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator

from snapstore.errors import SnapshotNotFound
from snapstore.format.paths import check_relative_path
from snapstore.models import DiffReport, FileEntry, PathVersion, SnapshotInfo
from snapstore.repo.repository import Repository
from snapstore.restore.actions import Plan


def _state(entry: FileEntry | None) -> tuple[object, ...] | None:
    """What identifies an entry's content; None for a path absent or not recorded."""
    if entry is None or entry.kind == "absent":
        return None
    return (
        entry.kind,
        entry.mode,
        entry.size,
        entry.digest,
        entry.target,
        entry.extents,
        entry.link,
    )


def diff_entries(old: Iterable[FileEntry], new: Iterable[FileEntry]) -> DiffReport:
    """Paths added, modified and removed going from ``old`` to ``new``, each listed on its own
    (a directory that appears or goes is listed with everything in it)."""
    before = {entry.path: _state(entry) for entry in old}
    after = {entry.path: _state(entry) for entry in new}
    report = DiffReport()
    for path in sorted(set(before) | set(after)):
        was, now = before.get(path), after.get(path)
        if was == now:
            continue
        if was is None:
            report.added.append(path)
        elif now is None:
            report.removed.append(path)
        else:
            report.modified.append(path)
    return report


def diff_plan(plan: Plan) -> DiffReport:
    """What a restore planned as ``plan`` would add, modify and remove in its target (a
    directory it would remove is listed with everything in it)."""
    report = DiffReport()
    for action in plan.changes:
        path = action.entry.path
        if action.operation == "remove":
            report.removed.append(path)
            if action.current == "dir":
                report.removed.extend(subtree(os.path.join(plan.target, path), path))
        elif action.operation == "create":
            report.added.append(path)
        else:
            report.modified.append(path)
    return report


def subtree(directory: str, relative: str) -> Iterator[str]:
    """Every path below the directory ``directory`` (whose path in the diff is ``relative``),
    in path order, never following symlinks."""
    pending = [(directory, relative)]
    found: list[str] = []
    while pending:
        absolute, prefix = pending.pop()
        try:
            with os.scandir(absolute) as listing:
                children = list(listing)
        except OSError:
            continue
        for child in children:
            path = f"{prefix}/{child.name}"
            found.append(path)
            if child.is_dir(follow_symlinks=False):
                pending.append((child.path, path))
    yield from sorted(found)


def history(
    versions: Iterable[tuple[SnapshotInfo, FileEntry | None]],
) -> list[PathVersion]:
    """From a path's entry in each snapshot (oldest first), the snapshots where it changed:
    where it first appears, and each whose entry differs from the one before (an entry of
    None: it is gone from that snapshot on)."""
    changes = []
    previous: tuple[object, ...] | None = None
    for info, entry in versions:
        state = _state(entry)
        if state != previous:
            changes.append(PathVersion(info, entry if state is not None else None))
        previous = state
    return changes


def path_history(repo: Repository, session: str, path: str) -> list[PathVersion]:
    """The checkpoints of ``session`` in which ``path`` changed (see ``history``)."""
    wanted = check_relative_path(path)
    versions = []
    with repo.blobs_in_use():
        for info in repo.checkpoints(session):
            try:
                manifest = repo.catalog.read(session, info.name)
            except SnapshotNotFound:
                continue  # deleted since the listing
            versions.append((manifest.info, repo.trees.find(manifest, wanted)))
    return history(versions)
