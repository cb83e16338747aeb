"""Compare snapshots: what changed between two, and a path's history across a session.

Both work on decoded manifests only (no blob is read): two entries are the same when kind,
mode, size, digest and link target agree.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator

from snapstore.models import DiffReport, FileEntry, PathVersion, SnapshotInfo


def _state(entry: FileEntry | None) -> tuple[object, ...] | None:
    """What identifies an entry's content; None for a path absent or not recorded."""
    if entry is None or entry.kind == "absent":
        return None
    return (entry.kind, entry.mode, entry.size, entry.digest, entry.target)


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
