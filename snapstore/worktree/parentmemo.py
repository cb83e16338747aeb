"""The checkpoints an incremental create builds on, remembered per process.

A create builds on a parent only if this process committed it, and only while its manifest
keeps the version it was committed at (another writer's replacement, or a delete, changes
that): then the parent's entries are exactly what its own scan found, and every blob and tree
object they name is stored. What is remembered of it is its root tree, the tree object of
each directory, its rows encoded (3.6 MB for 50,000 files), when its scan began, and which of
its files were racy then (see ``snapstore.worktree.incremental``).
"""

from __future__ import annotations

import dataclasses
from bisect import bisect_left
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter

import msgpack

from snapstore.format.manifest import EntryRow
from snapstore.format.tree import FileAttrs, TreeRef
from snapstore.models import SnapshotInfo
from snapstore.repo.catalog import manifest_name
from snapstore.repo.filememo import FileMemo, backend_key
from snapstore.repo.repository import Repository
from snapstore.worktree import statcache
from snapstore.worktree.create import Recorded, Request

MAX_REMEMBERED = 32
"""Checkpoints remembered per process to build on: one per watched tree is what a server
needs (and it watches at most 32)."""

path_of = itemgetter(0)
"""The path of an ``EntryRow``: the key rows are sorted by."""


@dataclass(frozen=True)
class Remembered:
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
    attrs: Mapping[str, FileAttrs]
    """The attributes of its file rows that have any (holes), by path."""
    linked: tuple[str, ...]
    """Its files that had several links when scanned."""


_REMEMBERED: FileMemo[Remembered] = FileMemo(limit=MAX_REMEMBERED)


@dataclass(frozen=True)
class ScanStart:
    """When a create began to look at the tree (after taking its change set)."""

    wall_ns: int
    mono_ns: int


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


def find_row(rows: Sequence[EntryRow], path: str) -> int:
    """The index of ``path``'s row in the sorted ``rows``, or -1."""
    index = bisect_left(rows, path, key=path_of)
    return index if index < len(rows) and rows[index][0] == path else -1


class Committed:
    """The ``committed`` callback of a create: catches the header, what was committed and
    the version of the manifest (read under the session's lock, so it is this create's)."""

    def __init__(self, repo: Repository) -> None:
        self.repo = repo
        self.found: tuple[SnapshotInfo, Recorded, Hashable] | None = None

    def __call__(self, info: SnapshotInfo, recorded: Recorded) -> None:
        version = self.repo.catalog.version(info.session, info.name)
        if version is not None:
            self.found = (info, recorded, version)


def remembered(repo: Repository, parent: SnapshotInfo | None) -> Remembered | None:
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


def remember(
    repo: Repository,
    request: Request,
    start: ScanStart,
    committed: Committed,
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
    memo = Remembered(
        info,
        encode_rows(recorded.rows) if rows is None else rows,
        recorded.trees.root,
        recorded.trees.refs,
        request.gitignore,
        start.wall_ns,
        start.mono_ns,
        racy,
        recorded.attrs,
        tuple(recorded.linked),
    )
    handle = repo.catalog.handle(manifest_name(info.session, info.name))
    _REMEMBERED.remember(repo.backend, handle, memo, version=version)


def forget(repo: Repository, parent: SnapshotInfo | None, child: SnapshotInfo) -> None:
    """Drop what is remembered of the parent once a checkpoint was built after it (the next
    one builds on the child)."""
    if parent is None or (parent.session, parent.name) == (child.session, child.name):
        return
    gone = (
        backend_key(repo.backend),
        repo.catalog.handle(manifest_name(parent.session, parent.name)),
    )
    _REMEMBERED.forget(lambda key: key != gone)
