"""The tree objects of a base directory's previous create, remembered per process.

An unchanged snapshot of 50,000 files would otherwise build every one of its 2,500 tree
objects again (a quarter of its time) only to find them all stored. A process that creates
again (a bridge checkpointing after each turn, a server) compares the new rows with those of
its previous create of the same base directory and builds again only the directories above
what differs (``treebuild.rebuild_trees``), as git keeps the trees of unchanged directories in
its index.

The remembered objects are used only after they are found stored, under the gc lock the
create holds shared (so none can go before the commit); an undo backup (a few paths of the
tree) does not replace what is remembered. Memory: the previous rows (about 17 MB for
50,000 files) per base directory, for at most ``MAX_REMEMBERED`` of them and
``MAX_REMEMBERED_ROWS`` rows in all (the oldest are dropped first).
"""

from __future__ import annotations

import os
import threading
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from operator import itemgetter
from typing import NamedTuple

from snapstore.format.manifest import EntryRow
from snapstore.format.tree import FileAttrs, TreeRef
from snapstore.format.treebuild import BuiltTrees, build_trees, rebuild_trees
from snapstore.repo.filememo import backend_key
from snapstore.repo.repository import Repository

MAX_REMEMBERED = 8
"""Base directories whose last build a process remembers."""
MAX_REMEMBERED_ROWS = 200_000
"""Rows remembered in all (about 70 MB): a server checkpointing several large trees keeps
the most recent."""


class _Built(NamedTuple):
    """The rows, attributes and tree references of a create, remembered for the next."""

    rows: Sequence[EntryRow]
    attrs: Mapping[str, FileAttrs]
    refs: Mapping[str, TreeRef]


path_of = itemgetter(0)

_BUILT: OrderedDict[tuple[str, str], _Built] = OrderedDict()
_LOCK = threading.Lock()


def _new_lock_in_child() -> None:
    """A forked child starts with a free lock (another thread may have held it mid-fork)."""
    global _LOCK
    _LOCK = threading.Lock()


os.register_at_fork(after_in_child=_new_lock_in_child)


def differences(
    old: Sequence[EntryRow],
    new: Sequence[EntryRow],
    old_attrs: Mapping[str, FileAttrs],
    new_attrs: Mapping[str, FileAttrs],
    *,
    most: int | None = None,
) -> tuple[list[str], list[str]] | None:
    """What ``rebuild_trees`` needs to turn the build of ``old`` into that of ``new`` (both
    sorted by path): the paths that became or stopped being a directory, recorded or only
    holding recorded paths (``changed``: nothing at or below them is kept, as what lies
    below may be read differently now), and every path whose row or attributes differ
    (``touched``, which holds them). None if ``changed`` and ``touched`` together would
    hold more than ``most`` paths (building every tree again is then cheaper)."""
    touched: set[str] = set()
    if old != new:
        touched.update(row[0] for row in set(old).symmetric_difference(new))
    if old_attrs != new_attrs:
        touched.update(
            path
            for path in old_attrs.keys() | new_attrs.keys()
            if old_attrs.get(path) != new_attrs.get(path)
        )
    if most is not None and len(touched) > most:
        return None
    changed = [path for path in touched if _holds_rows(old, path) != _holds_rows(new, path)]
    if most is not None and len(changed) + len(touched) > most:
        return None
    return sorted(changed), sorted(touched)


def _holds_rows(rows: Sequence[EntryRow], path: str) -> bool:
    """Whether ``path`` is a directory in a build of ``rows``: recorded as one, or not
    recorded but holding recorded paths."""
    index = bisect_left(rows, path, key=path_of)
    if index < len(rows) and rows[index][0] == path:
        return rows[index][1] == "dir"
    below = bisect_left(rows, path + "/", lo=index, key=path_of)
    return below < len(rows) and rows[below][0].startswith(path + "/")


def build(
    repo: Repository,
    base: str,
    rows: Sequence[EntryRow],
    attrs: Mapping[str, FileAttrs],
    *,
    remember: bool = True,
) -> BuiltTrees:
    """The tree objects recording ``rows`` (as ``build_trees``), building again only what
    differs from the previous build of ``base`` in this process when its objects are all
    still stored; with ``remember``, this build is what the next one starts from. The gc
    lock must be held (shared) until the snapshot is committed. ValueError as for
    ``build_trees``."""
    key = (backend_key(repo.backend), base)
    with _LOCK:
        previous = _BUILT.get(key)
    trees = None
    most = len(rows) // 4
    if (
        previous is not None
        and abs(len(previous.rows) - len(rows)) <= most  # else more than ``most`` differ
        and _all_stored(repo, previous.refs)
    ):
        found = differences(previous.rows, rows, previous.attrs, attrs, most=most)
        if found is not None:
            trees = rebuild_trees(rows, previous.refs, *found, attrs)
    if trees is None:
        trees = build_trees(rows, attrs)
    if remember:
        with _LOCK:
            _BUILT[key] = _Built(rows, attrs, trees.refs)
            _BUILT.move_to_end(key)
            while len(_BUILT) > MAX_REMEMBERED or (
                len(_BUILT) > 1 and sum(len(b.rows) for b in _BUILT.values()) > MAX_REMEMBERED_ROWS
            ):
                _BUILT.popitem(last=False)
    return trees


def _all_stored(repo: Repository, refs: Mapping[str, TreeRef]) -> bool:
    """Whether every tree object of a previous build is stored where a create may count on
    it (``Blobs.durable_rows``: not in a segment its writer may never have flushed, such as
    the one a failed create of this process appended)."""
    rows: list[EntryRow] = [("", "file", 0, r.size, 0, r.digest, None) for r in refs.values()]
    return repo.blobs.first_missing(rows) is None and repo.blobs.durable_rows(rows)


def forget_all() -> None:
    """Drop every remembered build (tests)."""
    with _LOCK:
        _BUILT.clear()
