"""Build a snapshot's tree objects from its manifest rows (pure code, no I/O): all of them
(``build_trees``), or, for rows that differ from an earlier build's only in some directories,
those directories' and their ancestors' (``rebuild_trees``)."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Iterator, Mapping, Sequence
from operator import itemgetter
from typing import Any

from snapstore.format.manifest import EntryRow
from snapstore.format.tree import FileAttrs, TreeRef, encode_tree, file_attrs, tree_ref

_Child = tuple[str, EntryRow | None, str]
"""(name, the recorded row or None for a directory only on the way to recorded paths, path)."""


class BuiltTrees:
    """The tree objects of one snapshot: ``root``, every object built by digest, and the
    ref of each directory's object by path ("" the base; a directory without one, empty,
    is left out)."""

    def __init__(
        self, root: TreeRef, objects: dict[bytes, bytes], refs: dict[str, TreeRef]
    ) -> None:
        self.root = root
        self.objects = objects
        self.refs = refs

    def rows(self) -> list[EntryRow]:
        """Each tree object as a row naming its digest and size (what the commit checks is
        stored, as for file rows)."""
        return [
            ("", "file", 0, len(data), 0, digest, None) for digest, data in self.objects.items()
        ]


def _children(rows: Sequence[EntryRow]) -> dict[str, list[_Child]]:
    """Each directory's children ("" is the base directory), implicit parents included.

    ``rows`` are sorted by path, each path once, so a recorded directory comes before what
    it holds. An absent path below a path recorded as absent is implied and dropped; any other
    path below something that is not a directory is refused (ValueError)."""
    children: dict[str, list[_Child]] = {"": []}
    recorded: dict[str, str] = {}
    for row in rows:
        path = row[0]
        parent, _, name = path.rpartition("/")
        holder = children.get(parent)
        if holder is None:
            holder = _open_parent(children, recorded, parent, row)
            if holder is None:
                continue
        holder.append((name, row, path))
        recorded[path] = row[1]
    return children


def _open_parent(
    children: dict[str, list[_Child]], recorded: dict[str, str], parent: str, row: EntryRow
) -> list[_Child] | None:
    """The child list of ``parent``, made now (with its own parents as needed); None if the
    row is implied by an absent ancestor."""
    chain = []
    directory = parent
    while directory not in children:
        kind = recorded.get(directory)
        if kind is not None and kind != "dir":
            if kind == "absent" and row[1] == "absent":
                return None
            raise ValueError(f"{row[0]!r} is recorded below {directory!r}, a {kind}")
        chain.append(directory)
        directory = directory.rpartition("/")[0]
    for directory in reversed(chain):
        children[directory] = []
        if directory not in recorded:
            above, _, name = directory.rpartition("/")
            children[above].append((name, None, directory))
    return children[parent]


def build_trees(
    rows: Sequence[EntryRow], attrs: Mapping[str, FileAttrs] | None = None
) -> BuiltTrees:
    """The tree objects recording ``rows`` (sorted by path, each path once): the deepest
    directories first, each directory's object naming its subdirectories' by digest.
    ``attrs``: the attributes of the file rows that have any, by path; a ``FileEntry``
    given as a row brings its own (``extents``, ``link``)."""
    attrs = attrs or {}
    children = _children(rows)
    refs: dict[str, TreeRef] = {}
    objects: dict[bytes, bytes] = {}
    for directory in sorted(children, reverse=True):
        _build_one(directory, children[directory], attrs, refs, objects)
    return BuiltTrees(refs[""], objects, refs)


def _build_one(
    directory: str,
    kids: list[_Child],
    attrs: Mapping[str, FileAttrs],
    refs: dict[str, TreeRef],
    objects: dict[bytes, bytes],
) -> None:
    """Build the object of ``directory`` from its children (``attrs`` as for
    ``build_trees``), naming each subdirectory's object as ``refs`` gives it; record it in
    ``refs`` and ``objects`` (nothing for an empty directory other than the base)."""
    kids.sort()
    tree: list[tuple[Any, ...]] = []
    for name, row, path in kids:
        if row is None:
            ref = refs[path]
            tree.append((name, "parent", 0, ref.size, 0, ref.digest, None))
        elif row[1] == "dir":
            sub = refs.get(path)
            size, digest = (0, None) if sub is None else (sub.size, sub.digest)
            tree.append((name, "dir", row[2], size, row[4], digest, None))
        else:
            extra = attrs.get(path) if attrs else None
            if extra is None and len(row) > 7:  # a FileEntry carries its own attributes
                extra = file_attrs(row[7], row[8])
            if extra is None:
                tree.append((name, *row[1:7]))
            else:
                tree.append((name, *row[1:7], extra))
    if not tree and directory:
        refs.pop(directory, None)
        return
    data = encode_tree(tree)
    ref = tree_ref(data)
    refs[directory] = ref
    objects[ref.digest] = data


def rebuild_trees(
    rows: Sequence[EntryRow],
    previous: Mapping[str, TreeRef],
    changed: Iterable[str],
    touched: Iterable[str] = (),
    attrs: Mapping[str, FileAttrs] | None = None,
) -> BuiltTrees:
    """What ``build_trees(rows)`` gives, when ``rows`` differ from those of an earlier build
    (whose ``refs`` were ``previous``) only at and below the paths ``changed``, and in the
    rows of the paths ``touched`` themselves (relative paths, never the base): the objects of
    the changed paths (if directories), of the directories below them and of every directory
    above a changed or touched path are built again from ``rows``; every other directory
    keeps its earlier object. ``objects`` holds the objects built now. ``attrs`` and
    ValueError as for ``build_trees``."""
    changed = list(changed)
    gone = set(changed)
    refs = {
        path: ref
        for path, ref in previous.items()
        if not gone or (path not in gone and gone.isdisjoint(_above(path, "")))
    }
    dirty = _dirty(rows, changed)
    for path in touched:
        dirty.update(_above(path, ""))
    objects: dict[bytes, bytes] = {}
    for directory in sorted(dirty, reverse=True):
        if directory and not _may_hold_rows(rows, directory):
            refs.pop(directory, None)
            continue
        kids = list(_direct_children(rows, directory))
        _build_one(directory, kids, attrs or {}, refs, objects)
    return BuiltTrees(refs[""], objects, refs)


def _may_hold_rows(rows: Sequence[EntryRow], directory: str) -> bool:
    """Whether ``directory`` and every path above it are recorded as directories or not at
    all (below anything else, rows are implied absent paths, or invalid: no tree object)."""
    return all(
        _recorded_kind(rows, path) in (None, "dir") for path in [*_above(directory, ""), directory]
    )


def _recorded_kind(rows: Sequence[EntryRow], path: str) -> str | None:
    """The kind ``rows`` record ``path`` as, or None if they do not record it."""
    index = bisect_left(rows, path, key=_row_path)
    return rows[index][1] if index < len(rows) and rows[index][0] == path else None


def _above(path: str, top: str) -> list[str]:
    """The directories holding ``path``, up to but without ``top`` ("" the base)."""
    parts = path.split("/")
    depth = 0 if not top else top.count("/") + 1
    return ["/".join(parts[:end]) for end in range(depth + 1, len(parts))]


def _dirty(rows: Sequence[EntryRow], changed: list[str]) -> set[str]:
    """The directories whose objects must be built again: each changed path, every
    directory above it, and every directory recorded, or holding recorded paths, below it."""
    dirty = {""}
    for path in changed:
        dirty.add(path)
        dirty.update(_above(path, ""))
        prefix = path + "/"
        start = bisect_left(rows, prefix, key=_row_path)
        end = bisect_left(rows, path + "0", key=_row_path)
        for row in rows[start:end]:
            if row[1] == "dir":
                dirty.add(row[0])
            dirty.update(_above(row[0], path))
    return dirty


_row_path = itemgetter(0)


def _direct_children(rows: Sequence[EntryRow], directory: str) -> Iterator[_Child]:
    """The children of ``directory`` in the sorted ``rows``, as ``_children`` lists them,
    stepping over each child directory's contents by bisection."""
    prefix = directory + "/" if directory else ""
    index = bisect_left(rows, prefix, key=_row_path) if prefix else 0
    end = bisect_left(rows, directory + "0", key=_row_path) if prefix else len(rows)
    kinds: dict[str, str] = {}
    while index < end:
        row = rows[index]
        name, slash, _ = row[0][len(prefix) :].partition("/")
        if not slash:
            kinds[name] = row[1]
            yield name, row, row[0]
            index += 1
            continue
        below = bisect_left(rows, prefix + name + "0", lo=index, key=_row_path)
        kind = kinds.get(name)
        if kind is None:
            yield name, None, prefix + name
        elif kind != "dir":
            _implied_below(rows[index:below], prefix + name, kind)
        index = below


def _implied_below(rows: Sequence[EntryRow], path: str, kind: str) -> None:
    """Rows below ``path``, recorded as ``kind`` (not a directory), must all be absent paths
    below an absent one (implied, and dropped); anything else is a ValueError."""
    for row in rows:
        if kind != "absent" or row[1] != "absent":
            raise ValueError(f"{row[0]!r} is recorded below {path!r}, a {kind}")
