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
  parent could not record.
- **Any doubt means a full scan**, under the same locks: changes unknown (the watch's queue
  overflowed, it missed events, it was just armed), ``rehash``, another session, base
  directory, requested paths or exclude rules (a ``.snapstoreignore`` that changed, or with
  ``gitignore`` a ``.gitignore`` in or under a changed path), a directory on the way to a
  changed path that is no longer one, a changed path that cannot be recorded as given.

The scan of a changed path is the scan a full create makes of it (``Scanner.add`` for a
requested path, ``Scanner.add_below`` for a path inside one), every file found is read as a
full create reads it (``ingest``), and the commit is the full create's
(``create.commit_recorded``): what changes is only which paths are looked at. The stat cache
is not consulted: a path reported changed has a new mtime or ctime, or a new name, so it
could hardly ever vouch for one; and a process that builds on remembered entries drops its
decoded copy of the cache after a full scan (the entries are that tree's cache now, in a
fifth of the memory), leaving the cache file for the next process or full scan.

What is remembered of a checkpoint is its root tree, the tree object of each directory, and
its rows encoded (3.6 MB for 50,000 files). An unchanged checkpoint names the same root tree
(its manifest is a few hundred bytes); one with changes decodes the rows, merges what it
scanned and builds again only the tree objects of the directories above a changed path
(``treebuild.rebuild_trees``).
"""

from __future__ import annotations

import dataclasses
import os
import stat
import time
from bisect import bisect_left, insort
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Literal

import msgpack

from snapstore.errors import UnsafePathError
from snapstore.format.manifest import EntryRow
from snapstore.format.paths import check_relative_path, printable
from snapstore.format.tree import TreeRef
from snapstore.format.treebuild import BuiltTrees, rebuild_trees
from snapstore.models import SkippedPath, SnapshotInfo
from snapstore.repo.batch import BlobBatch
from snapstore.repo.catalog import manifest_name
from snapstore.repo.filememo import FileMemo, backend_key
from snapstore.repo.layout import is_store_root
from snapstore.repo.repository import Repository
from snapstore.worktree import statcache
from snapstore.worktree.create import (
    Progress,
    Recorded,
    Request,
    commit_recorded,
    store_trees,
    take_snapshot,
)
from snapstore.worktree.excludes import GITIGNORE, Matcher, initial_patterns
from snapstore.worktree.ingest import ingest_scan
from snapstore.worktree.scan import Scanner

MAX_REMEMBERED = 32
"""Checkpoints remembered per process to build on: one per watched tree is what a server
needs (and it watches at most 32)."""

INSERT_AT_MOST = 64
"""New rows inserted one by one into the merged rows; more are merged by sorting."""

_path = itemgetter(0)


@dataclass(frozen=True)
class ChangedPaths:
    """Every change to a base directory since ``since_ns`` (``time.monotonic_ns()`` of this
    process), as paths relative to it (``/``-separated, ``"."`` the base itself):

    every path whose entry (kind, mode, size, mtime, digest, link target) may differ, or that
    may have appeared or disappeared, lies at or below a path of ``rescan``, or is a directory
    of ``refresh`` (only its own entry may differ: a chmod, a name added or removed in it).
    """

    rescan: frozenset[str] = frozenset()
    refresh: frozenset[str] = frozenset()
    since_ns: int = 0


ChangeSource = Callable[[], ChangedPaths | None]
"""Called once, with the base directory locked and before anything is scanned: the changes
since the previous checkpoint, or None when they are not known (a full scan follows)."""


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


@dataclass(frozen=True)
class _Remembered:
    """A checkpoint this process committed, as the next incremental create needs it."""

    info: SnapshotInfo
    rows: bytes
    """Its rows, sorted, encoded by ``encode_rows``."""
    root: TreeRef
    refs: dict[str, TreeRef]
    """The tree object of each directory, by path ("" the base)."""
    gitignore: bool
    started_ns: int
    """``time.time_ns()`` just before its scan began."""
    started_mono_ns: int
    """``time.monotonic_ns()`` at the same moment."""
    racy: tuple[str, ...]
    """Its files whose mtime lay within the racy window of ``started_ns``."""


_REMEMBERED: FileMemo[_Remembered] = FileMemo(limit=MAX_REMEMBERED)


@dataclass(frozen=True)
class _Start:
    """When a create began to look at the tree (after taking its change set)."""

    wall_ns: int
    mono_ns: int


@dataclass
class _Plan:
    """What an incremental create scans: each (path, the requested path it lies in; a
    requested path stands for itself), the paths whose parent entries (at and below) those
    scans replace, the directories whose own entry alone is read again, and the parent's
    rows (decoded only when something is to be replaced)."""

    scans: list[tuple[str, str]]
    replaced: list[str]
    refresh: list[EntryRow]
    rows: Sequence[EntryRow] = ()


def encode_rows(rows: Sequence[EntryRow]) -> bytes:
    """Rows kept in memory between creates: a fifth of the memory of the rows themselves,
    and decoded, they lie together in memory (rows as a scan leaves them are spread over the
    heap, which makes every pass over them several times slower)."""
    data: bytes = msgpack.packb(rows, use_bin_type=True)
    return data


def decode_rows(data: bytes) -> tuple[EntryRow, ...]:
    """Rows ``encode_rows`` encoded (never bytes read from a store: not validated)."""
    rows: tuple[EntryRow, ...] = msgpack.unpackb(data, use_list=False)
    return rows


class _Committed:
    """The ``committed`` callback of a create: catches the header, what was committed and
    the version of the manifest (read under the namespace lock, so it is this create's)."""

    def __init__(self, repo: Repository) -> None:
        self.repo = repo
        self.found: tuple[SnapshotInfo, Recorded, Hashable] | None = None

    def __call__(self, info: SnapshotInfo, recorded: Recorded) -> None:
        version = self.repo.catalog.version(info.session, info.name)
        if version is not None:
            self.found = (info, recorded, version)


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
    start = _Start(time.time_ns(), time.monotonic_ns())
    base = _remembered(repo, parent)
    initial = initial_patterns(
        request.base, request.exclude, default_excludes=request.default_excludes
    )
    reason = _refusal(request, parent, known, base, initial)
    if reason is None:
        assert known is not None and base is not None
        plan = _plan(request, base, known, len(initial))
        built = (
            plan if isinstance(plan, str) else _build(repo, request, base, plan, start, progress)
        )
        if not isinstance(built, str):
            _forget(repo, parent, built[0].info)
            return built
        reason = built
    committed = _Committed(repo)
    info, replaced = take_snapshot(repo, request, progress=progress, committed=committed)
    _remember(repo, request, start, committed, None)
    _forget(repo, parent, info)
    statcache.forget_decoded(repo.backend, request.base)
    return IncrementalReport(info, "full", reason), replaced


def _remembered(repo: Repository, parent: SnapshotInfo | None) -> _Remembered | None:
    """What this process remembers of ``parent``, if its manifest is still the one this
    process committed."""
    if parent is None:
        return None
    version = repo.catalog.version(parent.session, parent.name)
    if version is None:
        return None
    handle = repo.catalog.handle(manifest_name(parent.session, parent.name))
    found = _REMEMBERED.known(repo.backend, handle, version)
    if found is None or found.info != dataclasses.replace(parent, replaced=False):
        return None
    return found


def _remember(
    repo: Repository,
    request: Request,
    start: _Start,
    committed: _Committed,
    scanned: Sequence[EntryRow] | None,
    rows: bytes | None = None,
) -> None:
    """Remember the checkpoint just committed for the next incremental create: its rows
    (``rows`` if already encoded), trees, and racy files, found among ``scanned``, the rows
    this create scanned (None: all of them); its other rows came from a parent for whose
    earlier scan they were not racy."""
    if committed.found is None:
        return
    info, recorded, version = committed.found
    racy_from_ns = start.wall_ns - statcache.RACY_NS
    scanned = recorded.rows if scanned is None else scanned
    racy = tuple(r[0] for r in scanned if r[1] == "file" and r[4] >= racy_from_ns)
    remembered = _Remembered(
        info,
        encode_rows(recorded.rows) if rows is None else rows,
        recorded.trees.root,
        recorded.trees.refs,
        request.gitignore,
        start.wall_ns,
        start.mono_ns,
        racy,
    )
    handle = repo.catalog.handle(manifest_name(info.session, info.name))
    _REMEMBERED.remember(repo.backend, handle, remembered, version=version)


def _forget(repo: Repository, parent: SnapshotInfo | None, child: SnapshotInfo) -> None:
    """Drop what is remembered of the parent once a checkpoint was built after it (the next
    one builds on the child)."""
    if parent is None or (parent.session, parent.name) == (child.session, child.name):
        return
    gone = (
        backend_key(repo.backend),
        repo.catalog.handle(manifest_name(parent.session, parent.name)),
    )
    _REMEMBERED.forget(lambda key: key != gone)


def _refusal(
    request: Request,
    parent: SnapshotInfo | None,
    known: ChangedPaths | None,
    base: _Remembered | None,
    initial: list[str],
) -> str | None:
    """Why the create cannot build on ``parent`` with ``known``, or None."""
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
        info.excludes, initial, request.gitignore
    ):
        return "the exclude rules changed (options, or the base directory's .snapstoreignore)"
    if known.since_ns > base.started_mono_ns:
        return "the changes do not cover the whole time since the previous checkpoint's scan"
    return None


def _same_excludes(recorded: tuple[str, ...], initial: list[str], gitignore: bool) -> bool:
    """Whether a scan starting with ``initial`` ends with the rules ``recorded`` (with
    ``gitignore``, the rules of ``.gitignore`` files follow the initial ones)."""
    if gitignore:
        return list(recorded[: len(initial)]) == initial
    return list(recorded) == initial


def under(path: str, root: str) -> bool:
    """True if ``path`` is ``root`` or lies below it (``"."`` holds everything)."""
    return root == "." or path == root or path.startswith(root + "/")


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


def _outermost(paths: Iterable[str]) -> list[str]:
    """``paths`` without those lying below another of them."""
    kept: list[str] = []
    for path in sorted(paths, key=lambda p: (p.count("/"), p)):
        if not any(under(path, other) for other in kept):
            kept.append(path)
    return kept


def _find(rows: Sequence[EntryRow], path: str) -> int:
    """The index of ``path``'s row in the sorted ``rows``, or -1."""
    index = bisect_left(rows, path, key=_path)
    return index if index < len(rows) and rows[index][0] == path else -1


def _plan(
    request: Request, base: _Remembered, known: ChangedPaths, initial_rules: int
) -> _Plan | str:
    """What to scan again, or why it cannot be worked out (a full scan then). Directories
    outside the requested paths (the base, the directories on the way to a requested path)
    have no entry to refresh."""
    skipped = [entry.path for entry in base.info.skipped]
    if any(printable(path) != path for path in skipped):
        return "the previous checkpoint skipped a path whose name it could not record"
    changed = _checked([*known.rescan, *base.racy, *skipped])
    refresh = _checked(
        d for d in known.refresh if d != "." and any(under(d, r) for r in request.paths)
    )
    if changed is None or refresh is None:
        return "a changed path cannot be recorded as given"
    if not changed and not refresh:
        return _Plan([], [], [])
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
        for path in _outermost(changed)
        if any(under(path, root) or under(root, path) for root in request.paths)
    ]
    refreshed = [row for row in refreshed if not any(under(row[0], p) for p in replaced)]
    if request.gitignore:
        doubt = _gitignore_doubt(base.info.excludes[initial_rules:], replaced, refreshed)
        if doubt is not None:
            return doubt
    scans = _scans(replaced, request.paths)
    if (".", ".") in scans:
        return "the whole base directory is to be scanned again"
    return _Plan(scans, replaced, refreshed, rows)


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
    index = _find(rows, directory)
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
        prefix = path + "/"
        if any(rule.removeprefix("!").startswith(prefix) for rule in read_rules):
            return f"the rules of a .gitignore in {path} may have changed"
    return None


def _build(
    repo: Repository,
    request: Request,
    base: _Remembered,
    plan: _Plan,
    start: _Start,
    progress: Progress | None,
) -> tuple[IncrementalReport, bool] | str:
    """Scan the planned paths, ingest what must be read, merge with the parent's rows, store
    the tree objects built again and commit; or, committing nothing, why a full scan must be
    made instead."""
    if not plan.replaced and not plan.refresh:
        return _commit_unchanged(repo, request, base, start)
    batch = BlobBatch(repo.blobs)
    rules = list(base.info.excludes)
    scanner = Scanner(
        request.base,
        exclude_dirs=repo.own_roots(),
        skip_unreadable=request.skip_unreadable,
        excludes=Matcher(rules),
        gitignore=request.gitignore,
    )
    try:
        for path, root in plan.scans:
            if path == root:
                scanner.add(root)
            elif not scanner.add_below(path, root):
                return f"a directory on the way to {path} is no longer one"
        if len(scanner.excludes.patterns) != len(rules):
            return "a .gitignore lies in a changed directory"
        scanned = scanner.result
        new_rows = ingest_scan(
            scanned,
            batch,
            None,
            racy_from_ns=start.wall_ns - statcache.RACY_NS,
            skip_unreadable=request.skip_unreadable,
            progress=progress,
        )
        recorded = _merged(base, plan, new_rows, scanned.skipped)
        if isinstance(recorded, str):
            batch.abort()
            return recorded
        store_trees(recorded.trees, batch)
        batch.finish()
    except BaseException:
        batch.abort()
        raise
    committed = _Committed(repo)
    info, replaced = commit_recorded(repo, request, recorded, committed=committed)
    _remember(repo, request, start, committed, new_rows)
    report = IncrementalReport(info, "incremental", None, len(plan.scans), len(plan.refresh))
    return report, replaced


def _commit_unchanged(
    repo: Repository, request: Request, base: _Remembered, start: _Start
) -> tuple[IncrementalReport, bool]:
    """Commit the parent's entries as they are: a manifest naming the parent's root tree,
    whose objects (and the blobs they name) the parent's manifest keeps stored."""
    info = base.info
    trees = BuiltTrees(base.root, {}, base.refs)
    recorded = Recorded((), trees, (), info.excludes, info.file_count, info.total_bytes, ())
    committed = _Committed(repo)
    new_info, replaced = commit_recorded(repo, request, recorded, committed=committed)
    _remember(repo, request, start, committed, (), rows=base.rows)
    return IncrementalReport(new_info, "incremental"), replaced


def _merged(
    base: _Remembered,
    plan: _Plan,
    new_rows: list[EntryRow],
    skipped: Sequence[SkippedPath],
) -> Recorded | str:
    """The parent's rows without those at or below the replaced paths, with the refreshed
    directories' new entries and the rows scanned now, sorted, their tree objects and the
    new totals; or, if they do not make a valid tree (the parent records a directory on the
    way to a scanned path as something else), why not."""
    info, rows = base.info, plan.rows
    spans = []
    for path in plan.replaced:
        index = _find(rows, path)
        if index >= 0:
            spans.append((index, index + 1))
        below = (bisect_left(rows, path + "/", key=_path), bisect_left(rows, path + "0", key=_path))
        spans.append(below)
    gone = [rows[i] for lo, hi in spans for i in range(lo, hi)]
    kept = _inserted(_with_refreshed(_without(rows, spans), plan.refresh), new_rows)
    try:
        trees = rebuild_trees(kept, base.refs, plan.replaced, [row[0] for row in plan.refresh])
    except ValueError as error:
        return f"the previous checkpoint does not agree with the changes: {error}"
    gone_files = [row for row in gone if row[1] == "file"]
    new_files = [row for row in new_rows if row[1] == "file"]
    file_count = info.file_count - len(gone_files) + len(new_files)
    total_bytes = info.total_bytes - sum(r[3] for r in gone_files) + sum(r[3] for r in new_files)
    unverified = [*new_files, *trees.rows()]
    return Recorded(kept, trees, skipped, info.excludes, file_count, total_bytes, unverified)


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
        rows.sort(key=_path)
    else:
        for row in new_rows:
            insort(rows, row, key=_path)
    return rows


def _with_refreshed(rows: list[EntryRow], refresh: list[EntryRow]) -> list[EntryRow]:
    """``rows`` with each refreshed directory's entry replaced (in place)."""
    for row in refresh:
        index = _find(rows, row[0])
        if index >= 0:
            rows[index] = row
    return rows
