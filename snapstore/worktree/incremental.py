"""Incremental create: a checkpoint built from the one before it, scanning only what changed.

Walking an unchanged 50,000-file tree costs about a second of ``lstat`` even when the stat
cache spares every read. Something that follows the tree's changes (the watch of a
long-lived server, ``snapstore.service.watch``) knows which paths changed since the previous
checkpoint, so the next one can take that checkpoint's entries and replace only the entries
at and below those paths by what a scan of them finds now.

Why such a checkpoint never records a stale file:

- **The change set is taken under the lock.** ``take_incremental`` asks for the changes
  (``ChangeSource``) once it holds the base directory's lock, just before it scans: a restore
  into the tree has finished, and whatever changes from then on is in the next change set.
- **It builds only on a checkpoint this process committed**, remembered with its entries,
  when its scan began and which of its files were racy, for as long as its manifest keeps the
  version it was committed at (another writer's replacement, or a delete, changes that). So
  the parent's entries are exactly what its own scan found; and since its manifest is still
  committed while this create holds the gc lock shared, every blob and tree object they name
  is stored.
- **The change set must cover the parent's whole scan**: it lists every change since
  ``since_ns``, which must not lie after the moment the parent's scan began. A change made
  before a watch was armed, or before the previous change set was taken, cannot slip through.
- **The stat cache's racy rule applies to the parent**: a file whose modification time lay
  within ``statcache.RACY_NS`` of the moment its checkpoint's scan began may have changed
  again within the same timestamp tick; it is scanned and read again. So are the paths the
  parent could not record, and its files with several links whose inode changed since its
  scan began (a write through a link outside the tree is seen by no watch of the tree).
- **Any doubt means a full scan**, under the same locks: changes unknown (the watch's queue
  overflowed, it missed events, it was just armed), ``rehash``, another session, base
  directory, requested paths or exclude rules (a ``.snapstoreignore`` that changed, or with
  ``gitignore`` git's rules from outside the requested paths, read again by every create, or a
  ``.gitignore`` in or under a changed path), a directory on the way to a
  changed path that is no longer one, a changed path that cannot be recorded as given,
  hard links (a parent recording link groups, or a changed file with several links: a write
  through one link changes them all, but only the name written through is reported).

The scan of a changed path is the scan a full create makes of it (``Scanner.add`` for a
requested path, ``Scanner.add_below`` for a path inside one), every file found is read as a
full create reads it (``ingest``), and the commit is the full create's
(``create.commit_recorded``): what changes is only which paths are looked at. The stat cache
is not consulted: a path reported changed has a new mtime or ctime, or a new name, so it
could hardly ever vouch for one; and a process that builds on remembered entries drops its
decoded copy of the cache after a full scan (the entries are that tree's cache now, in a
fifth of the memory), leaving the cache file for the next process or full scan.

An unchanged checkpoint names its parent's root tree (its manifest is a few hundred bytes);
one with changes decodes the parent's rows, merges what it scanned and builds again only the
tree objects of the directories above a changed path (``treebuild.rebuild_trees``).

This module runs the create and merges the rows. What is remembered of a parent is
``parentmemo``'s; what to scan again, or why not to build on the parent at all,
``rescanplan``'s; the change set's contract, ``changes``'.
"""

from __future__ import annotations

import time
from bisect import bisect_left, insort
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from snapstore.format.manifest import EntryRow
from snapstore.format.tree import FileAttrs
from snapstore.format.treebuild import BuiltTrees, rebuild_trees
from snapstore.models import SkippedPath, SnapshotInfo
from snapstore.repo.batch import BlobBatch
from snapstore.repo.repository import Repository
from snapstore.worktree import statcache
from snapstore.worktree.changes import ChangedPaths, ChangeSource
from snapstore.worktree.create import (
    Progress,
    Recorded,
    Request,
    commit_recorded,
    git_rules,
    plain_file_rows,
    store_trees,
    take_snapshot,
)
from snapstore.worktree.excludes import Matcher, initial_patterns
from snapstore.worktree.gitrules import LeadingRules
from snapstore.worktree.ingestscan import ingest_scan
from snapstore.worktree.parentmemo import (
    Committed,
    Remembered,
    ScanStart,
    find_row,
    forget,
    path_of,
    remember,
    remembered,
)
from snapstore.worktree.rescanplan import Plan, plan_rescan, refusal
from snapstore.worktree.scan import Scanner
from snapstore.worktree.waydirs import WayDirs

__all__ = ["ChangeSource", "ChangedPaths", "IncrementalReport", "take_incremental"]

INSERT_AT_MOST = 64
"""New rows inserted one by one into the merged rows; more are merged by sorting."""


@dataclass(frozen=True)
class IncrementalReport:
    """What an incremental create committed, and how."""

    info: SnapshotInfo
    scan: Literal["incremental", "full"]
    reason: str | None = None
    """Why the create scanned everything, or None."""
    rescanned: int = 0
    """Paths scanned again: changed, racy in the previous checkpoint, or skipped by it."""
    refreshed: int = 0
    """Directories whose own entry alone was read again."""


def take_incremental(
    repo: Repository,
    request: Request,
    parent: SnapshotInfo | None,
    changes: ChangeSource,
    *,
    progress: Progress | None = None,
) -> tuple[IncrementalReport, bool]:
    """Commit ``request`` built on ``parent`` with only what ``changes()`` reports scanned,
    or with a full scan when there is any doubt; the report, and whether it replaced a
    snapshot. The base directory's lock and the gc lock must be held (as for
    ``create.take_snapshot``)."""
    repo.require_current_format()
    known = changes()
    start = ScanStart(time.time_ns(), time.monotonic_ns())
    base = remembered(repo, parent)
    initial = initial_patterns(
        request.base, request.exclude, default_excludes=request.default_excludes
    )
    git = git_rules(request)
    reason = refusal(request, parent, known, base, initial, list(git.patterns))
    if reason is None:
        assert known is not None and base is not None
        planned = plan_rescan(request, base, known, len(git.patterns), len(initial))
        built = (
            planned
            if isinstance(planned, str)
            else _build(repo, request, base, planned, start, (git, len(initial)), progress)
        )
        if not isinstance(built, str):
            forget(repo, parent, built[0].info)
            return built
        reason = built
    committed = Committed(repo)
    info, replaced = take_snapshot(
        repo, request, progress=progress, committed=committed, remember_trees=False
    )
    remember(repo, request, start, committed, None)
    forget(repo, parent, info)
    statcache.forget_decoded(repo.backend, request.base)
    return IncrementalReport(info, "full", reason), replaced


def _build(
    repo: Repository,
    request: Request,
    base: Remembered,
    plan: Plan,
    start: ScanStart,
    rules_read: tuple[LeadingRules, int],
    progress: Progress | None,
) -> tuple[IncrementalReport, bool] | str:
    """Scan the planned paths, ingest what must be read, merge with the parent's rows, store
    the tree objects built again and commit; or, committing nothing, why a full scan must be
    made instead. ``rules_read``: git's rules read before the walk, and how many of the
    parent's rules are fixed ones (they come last)."""
    if not plan.replaced and not plan.refresh:
        return _commit_unchanged(repo, request, base, start)
    batch = BlobBatch(repo.blobs)
    git, fixed = rules_read
    rules = list(base.info.excludes)
    split = len(rules) - fixed
    way = WayDirs(request.base)  # held from the scan through the read of its files
    scanner = Scanner(
        request.base,
        exclude_dirs=repo.own_roots(),
        skip_unreadable=request.skip_unreadable,
        excludes=Matcher(rules[split:], gitignore=rules[:split]),
        gitignore=request.gitignore,
        ignore_read=git.read_dirs,
        way=way,
    )
    try:
        with way:
            for path, root in plan.scans:
                if path == root:
                    scanner.add(root)
                elif not scanner.add_below(path, root):
                    return (
                        f"a directory on the way to {path} is no longer one or cannot be looked in"
                    )
            if len(scanner.excludes.patterns) != len(rules):
                return "a .gitignore lies in a changed directory"
            scanned = scanner.result
            if scanned.links:
                return "a changed path is a file with several hard links"
            new_rows, new_attrs = ingest_scan(
                scanned,
                batch,
                None,
                racy_from_ns=start.wall_ns - statcache.RACY_NS,
                skip_unreadable=request.skip_unreadable,
                progress=progress,
                way=way,
            )
        recorded = _merged(base, plan, new_rows, new_attrs, batch.counted, scanned.skipped)
        if isinstance(recorded, str):
            batch.abort()
            return recorded
        store_trees(recorded.trees, batch)
        batch.finish()
    except BaseException:
        batch.abort()
        raise
    recorded = recorded._replace(stored_bytes=batch.stored_bytes)
    committed = Committed(repo)
    info, replaced = commit_recorded(repo, request, recorded, committed=committed)
    remember(repo, request, start, committed, new_rows)
    report = IncrementalReport(info, "incremental", None, len(plan.scans), len(plan.refresh))
    return report, replaced


def _commit_unchanged(
    repo: Repository, request: Request, base: Remembered, start: ScanStart
) -> tuple[IncrementalReport, bool]:
    """Commit the parent's entries as they are: a manifest naming the parent's root tree,
    whose objects (and the blobs they name) the parent's manifest keeps stored."""
    info = base.info
    trees = BuiltTrees(base.root, {}, base.refs)
    recorded = Recorded(
        (), trees, (), info.excludes, info.file_count, info.total_bytes, (), base.attrs, base.linked
    )
    committed = Committed(repo)
    new_info, replaced = commit_recorded(repo, request, recorded, committed=committed)
    remember(repo, request, start, committed, (), rows=base.rows)
    return IncrementalReport(new_info, "incremental"), replaced


def _merged(
    base: Remembered,
    plan: Plan,
    new_rows: list[EntryRow],
    new_attrs: dict[str, FileAttrs],
    counted: Sequence[EntryRow],
    skipped: Sequence[SkippedPath],
) -> Recorded | str:
    """The parent's rows without those at or below the replaced paths, with the refreshed
    directories' new entries and the rows scanned now (``new_attrs`` their attributes,
    ``counted`` the blobs of their extent maps), sorted, their tree objects and the new
    totals; or, if they do not make a valid tree (the parent records a directory on the
    way to a scanned path as something else), why not."""
    info, rows = base.info, plan.rows
    spans = []
    for path in plan.replaced:
        index = find_row(rows, path)
        if index >= 0:
            spans.append((index, index + 1))
        below = (
            bisect_left(rows, path + "/", key=path_of),
            bisect_left(rows, path + "0", key=path_of),
        )
        spans.append(below)
    gone = [rows[i] for lo, hi in spans for i in range(lo, hi)]
    kept = _inserted(_with_refreshed(_without(rows, spans), plan.refresh), new_rows)
    gone_paths = {row[0] for row in gone}
    attrs = {p: a for p, a in base.attrs.items() if p not in gone_paths} | new_attrs
    touched = [row[0] for row in plan.refresh]
    try:
        trees = rebuild_trees(kept, base.refs, plan.replaced, touched, attrs)
    except ValueError as error:
        return f"the previous checkpoint does not agree with the changes: {error}"
    gone_files = [row for row in gone if row[1] == "file"]
    new_files = [row for row in new_rows if row[1] == "file"]
    file_count = info.file_count - len(gone_files) + len(new_files)
    total_bytes = info.total_bytes - sum(r[3] for r in gone_files) + sum(r[3] for r in new_files)
    unverified = [*plain_file_rows(new_files, new_attrs), *counted, *trees.rows()]
    linked = tuple(path for path in base.linked if path not in gone_paths)
    return Recorded(
        kept, trees, skipped, info.excludes, file_count, total_bytes, unverified, attrs, linked
    )


def _without(rows: Sequence[EntryRow], spans: list[tuple[int, int]]) -> list[EntryRow]:
    """``rows`` without the index ranges ``spans`` (which do not overlap)."""
    kept: list[EntryRow] = []
    position = 0
    for lo, hi in sorted(spans):
        kept.extend(rows[position:lo])
        position = max(position, hi)
    kept.extend(rows[position:])
    return kept


def _inserted(rows: list[EntryRow], new_rows: list[EntryRow]) -> list[EntryRow]:
    """The sorted ``rows`` with ``new_rows`` (none of a path ``rows`` holds) in place: a few
    inserted where they belong, many by sorting again."""
    if len(new_rows) > INSERT_AT_MOST:
        rows.extend(new_rows)
        rows.sort(key=path_of)
    else:
        for row in new_rows:
            insort(rows, row, key=path_of)
    return rows


def _with_refreshed(rows: list[EntryRow], refresh: list[EntryRow]) -> list[EntryRow]:
    """``rows`` with each refreshed directory's entry replaced (in place)."""
    for row in refresh:
        index = find_row(rows, row[0])
        if index >= 0:
            rows[index] = row
    return rows
