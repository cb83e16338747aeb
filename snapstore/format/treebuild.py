"""Build a snapshot's tree objects from its manifest rows (pure code, no I/O)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from snapstore.format.manifest import EntryRow
from snapstore.format.tree import FileAttrs, TreeRef, encode_tree, file_attrs, tree_ref

_Child = tuple[str, EntryRow | None, str]
"""(name, the recorded row or None for a directory only on the way to recorded paths, path)."""


class BuiltTrees:
    """The tree objects of one snapshot: ``root``, and every object by digest."""

    def __init__(self, root: TreeRef, objects: dict[bytes, bytes]) -> None:
        self.root = root
        self.objects = objects

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
        kids = children[directory]
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
            continue
        data = encode_tree(tree)
        ref = tree_ref(data)
        refs[directory] = ref
        objects[ref.digest] = data
    return BuiltTrees(refs[""], objects)
