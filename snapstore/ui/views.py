"""What each page of the web UI shows, gathered from the public ``SnapStore`` API.

Kept apart from the routes and templates so that the data of a page (and the work it costs on
a store with thousands of checkpoints) can be read and tested on its own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from snapstore.errors import SnapshotNotFound
from snapstore.models import SnapshotInfo
from snapstore.ui.diffs import (
    Change,
    EntryCache,
    Side,
    checkpoint_changes,
    directory_changes,
)

if TYPE_CHECKING:
    from snapstore.store import SnapStore

TIMELINE_PAGE = 50
"""Checkpoints per page of a session's timeline (newest first)."""
DIFF_PAGE = 25
"""Files whose diffs one page of a checkpoint's changes shows."""
FILES_PAGE = 200
"""Entries per page of a checkpoint's file listing."""
RECENT_NAMES = 5
"""How many of a session's newest checkpoints the sessions page names."""


@dataclass
class SessionSummary:
    """One row of the sessions page."""

    name: str
    checkpoints: int = 0
    states: int = 0
    newest: SnapshotInfo | None = None
    recent: list[str] = field(default_factory=list)
    """The names of its newest checkpoints, newest first (at most ``RECENT_NAMES``)."""


def session_summaries(store: SnapStore) -> list[SessionSummary]:
    """Every session with its count of checkpoints and state values, and its newest
    checkpoint (whose file count and size the page shows), from one listing."""
    found: dict[str, SessionSummary] = {}
    for info in store.list():
        summary = found.setdefault(info.session, SessionSummary(info.session))
        if info.kind == "files":
            summary.checkpoints += 1
            summary.newest = info
            summary.recent = [info.name, *summary.recent[: RECENT_NAMES - 1]]
        else:
            summary.states += 1
    return sorted(found.values(), key=lambda summary: summary.name)


def sessions_signature(summaries: list[SessionSummary]) -> str:
    """What changes when a checkpoint comes or goes: the page compares it when it polls."""
    return "|".join(
        f"{summary.name}:{summary.checkpoints}:{summary.states}:{','.join(summary.recent)}"
        for summary in summaries
    )


def checkpoints(store: SnapStore, session: str) -> list[SnapshotInfo]:
    """A session's file checkpoints, oldest first (no state values, no undo backups)."""
    return [info for info in store.list(session) if info.kind == "files"]


@dataclass
class Paging:
    """Where a page lies among ``pages``: 1-based ``page``."""

    page: int
    pages: int
    total: int

    @classmethod
    def of(cls, requested: int, total: int, per_page: int) -> Paging:
        pages = max(1, math.ceil(total / per_page))
        return cls(min(max(1, requested), pages), pages, total)


@dataclass
class TimelineRow:
    """A checkpoint on the timeline, and the one before it (None for the first)."""

    number: int
    info: SnapshotInfo
    previous: str | None


@dataclass
class Timeline:
    """One page of a session's timeline, newest first."""

    session: str
    rows: list[TimelineRow]
    paging: Paging
    newest: str | None
    states: int = 0


def timeline(store: SnapStore, session: str, page: int) -> Timeline:
    """Page ``page`` of the session's checkpoints, newest first. The changes of each row are
    fetched by the page afterwards (``change_counts``), so a page costs one listing."""
    listing = store.list(session)
    found = [info for info in listing if info.kind == "files"]
    if not listing:
        raise SnapshotNotFound(session, "", what="checkpoint")
    paging = Paging.of(page, len(found), TIMELINE_PAGE)
    end = len(found) - (paging.page - 1) * TIMELINE_PAGE
    start = max(0, end - TIMELINE_PAGE)
    rows = [
        TimelineRow(index + 1, found[index], found[index - 1].name if index else None)
        for index in range(end - 1, start - 1, -1)
    ]
    newest = found[-1].name if found else None
    return Timeline(session, rows, paging, newest, states=len(listing) - len(found))


def change_counts(
    store: SnapStore, cache: EntryCache, session: str, names: list[str]
) -> dict[str, dict[str, int]]:
    """For each checkpoint named, how many paths were added, modified and removed since the
    checkpoint before it (all added for the first)."""
    found = checkpoints(store, session)
    position = {info.name: index for index, info in enumerate(found)}
    counts: dict[str, dict[str, int]] = {}
    for name in names:
        index = position.get(name)
        if index is None:
            continue
        before = cache.versions(store, found[index - 1]) if index else {}
        changes = checkpoint_changes(before, cache.versions(store, found[index]))
        tally = {"added": 0, "modified": 0, "removed": 0}
        for change in changes:
            tally[change.status] += 1
        counts[name] = tally
    return counts


@dataclass
class Comparison:
    """A checkpoint's changes against another side, in the direction ``old`` to ``new``."""

    info: SnapshotInfo
    against: str
    old: Side
    new: Side
    changes: list[Change]
    paging: Paging
    choices: list[str] = field(default_factory=list)

    @property
    def shown(self) -> list[tuple[int, Change]]:
        """The changes whose diffs this page shows, with their index among all."""
        start = (self.paging.page - 1) * DIFF_PAGE
        return list(enumerate(self.changes))[start : start + DIFF_PAGE]

    def recorded(self, change: Change) -> bool:
        """Whether the checkpoint this page is about records the changed path (so that a
        restore of that path alone can put it back)."""
        version = change.old if self.old.name == self.info.name else change.new
        return version is not None

    def page_of(self, index: int) -> int:
        """The page that shows the diff of change ``index``."""
        return index // DIFF_PAGE + 1


def compare(
    store: SnapStore, cache: EntryCache, session: str, name: str, against: str, page: int
) -> Comparison:
    """Checkpoint ``name`` compared with ``against``: ``previous`` (from the checkpoint before
    it to this one), ``directory`` (from this one to its base directory as it is now), or
    another checkpoint's name or selector (from the older of the two to the newer)."""
    found = checkpoints(store, session)
    name = store.resolve(session, name)
    index = next((i for i, info in enumerate(found) if info.name == name), None)
    if index is None:
        raise SnapshotNotFound(session, name, what="checkpoint")
    info = found[index]
    this = Side(session, name)
    if against == "directory":
        old, new = this, Side(session, directory=info.base_dir)
        changes = directory_changes(
            store, cache.versions(store, info), session, name, info.base_dir
        )
    else:
        other_index = _other_index(store, found, session, index, against)
        older, newer = sorted([index, other_index], key=lambda i: -1 if i is None else i)
        old = Side(session) if older is None else Side(session, found[older].name)
        assert newer is not None
        new = Side(session, found[newer].name)
        before = {} if older is None else cache.versions(store, found[older])
        changes = checkpoint_changes(before, cache.versions(store, found[newer]))
    paging = Paging.of(page, len(changes), DIFF_PAGE)
    return Comparison(info, against, old, new, changes, paging)


def _other_index(
    store: SnapStore, found: list[SnapshotInfo], session: str, index: int, against: str
) -> int | None:
    """Where the checkpoint to compare with lies (None: nothing before the first one)."""
    if against == "previous":
        return index - 1 if index else None
    other = store.resolve(session, against)
    for position, info in enumerate(found):
        if info.name == other:
            return position
    raise SnapshotNotFound(session, against, what="checkpoint")


@dataclass
class FileListing:
    """One page of a checkpoint's entries."""

    info: SnapshotInfo
    entries: list[tuple[str, str, int]]
    paging: Paging


def file_listing(store: SnapStore, session: str, name: str, page: int) -> FileListing:
    """Page ``page`` of the paths checkpoint ``name`` records, with kind and size."""
    snapshot = store.get(session, name)
    rows: list[tuple[str, str, int]] = [
        (entry.path, entry.kind, entry.size) for entry in snapshot.entries
    ]
    paging = Paging.of(page, len(rows), FILES_PAGE)
    start = (paging.page - 1) * FILES_PAGE
    return FileListing(snapshot.info, rows[start : start + FILES_PAGE], paging)


@dataclass
class TreeNode:
    """A directory of the file tree that lets a person jump between changed files."""

    name: str
    children: dict[str, TreeNode] = field(default_factory=dict)
    files: list[tuple[str, int, Change]] = field(default_factory=list)


def change_tree(changes: list[Change]) -> TreeNode:
    """The changed paths as a tree of directories; each file keeps its index among all."""
    root = TreeNode("")
    for index, change in enumerate(changes):
        *parents, leaf = change.path.split("/")
        node = root
        for part in parents:
            node = node.children.setdefault(part, TreeNode(part))
        node.files.append((leaf, index, change))
    return root
