"""Rebuilding a snapshot's tree objects after some paths changed gives exactly what building
them all again gives: the same root, the same object for every directory."""

from __future__ import annotations

from operator import itemgetter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from snapstore.format.manifest import EntryRow
from snapstore.format.treebuild import build_trees, rebuild_trees
from snapstore.worktree.treememo import differences

NAMES = ["a", "a-b", "a.b", "b", "c0"]
"""Names that sort around ``/`` ("a-b" and "a.b" come between "a" and "a/...")."""
KINDS = ["file", "dir", "symlink", "absent", "parent"]


@st.composite
def subtree(draw: st.DrawFn, path: str, depth: int) -> list[EntryRow]:
    """The rows of what lies at ``path``: one entry (a directory with rows below, or not
    recorded itself but holding recorded paths), or nothing."""
    kind = draw(st.sampled_from([*KINDS, "none"]))
    mtime = draw(st.integers(0, 3))
    if kind == "none":
        return []
    if kind in ("dir", "parent"):
        rows: list[EntryRow] = []
        if kind == "dir":
            rows.append((path, "dir", draw(st.sampled_from([0o755, 0o700])), 0, mtime, None, None))
        if depth > 0:
            for name in draw(st.lists(st.sampled_from(NAMES), unique=True, max_size=3)):
                rows += draw(subtree(f"{path}/{name}", depth - 1))
        return rows
    if kind == "absent":
        rows = [(path, "absent", 0, 0, 0, None, None)]
        if depth > 0 and draw(st.booleans()):
            rows.append((f"{path}/{draw(st.sampled_from(NAMES))}", "absent", 0, 0, 0, None, None))
        return rows
    if kind == "symlink":
        return [(path, "symlink", 0o777, 0, mtime, None, draw(st.sampled_from(NAMES)))]
    size = draw(st.integers(0, 2))
    return [(path, "file", 0o644, size, mtime, bytes([size]) * 32, None)]


@st.composite
def forests(draw: st.DrawFn) -> list[EntryRow]:
    rows: list[EntryRow] = []
    for name in draw(st.lists(st.sampled_from(NAMES), unique=True, min_size=1, max_size=4)):
        rows += draw(subtree(name, 3))
    return sorted(rows, key=itemgetter(0))


def paths_of(rows: list[EntryRow]) -> list[str]:
    """Every path recorded, or lying on the way to one."""
    found = set()
    for row in rows:
        parts = row[0].split("/")
        found.update("/".join(parts[:end]) for end in range(1, len(parts) + 1))
    return sorted(found)


@settings(max_examples=1000, deadline=None)
@given(data=st.data())
def test_a_rebuild_gives_what_a_full_build_gives(data: st.DataObject):
    before = data.draw(forests())
    old = build_trees(before)
    candidates = paths_of(before) + [f"{p}/{n}" for p in paths_of(before) for n in NAMES[:2]]
    changed = data.draw(st.lists(st.sampled_from(candidates or NAMES), max_size=3))
    after = [row for row in before if not any(_under(row[0], c) for c in changed)]
    for path in changed:
        after += data.draw(subtree(path, 2))
    after = sorted({row[0]: row for row in after}.values(), key=itemgetter(0))
    touched = []
    for index, row in enumerate(after):
        in_changed = any(_under(row[0], c) for c in changed)
        if row[1] == "dir" and not in_changed and data.draw(st.booleans()):
            after[index] = (row[0], "dir", 0o711, 0, 99, None, None)
            touched.append(row[0])
    try:
        full = build_trees(after)
    except ValueError:
        with pytest.raises(ValueError):
            rebuild_trees(after, old.refs, changed, touched)
        return
    rebuilt = rebuild_trees(after, old.refs, changed, touched)
    assert rebuilt.root == full.root
    assert rebuilt.refs == full.refs
    assert set(rebuilt.objects) <= set(full.objects)


def _under(path: str, top: str) -> bool:
    return path == top or path.startswith(top + "/")


def test_an_unchanged_directory_is_not_built_again():
    rows: list[EntryRow] = [
        ("a", "dir", 0o755, 0, 1, None, None),
        ("a/x", "file", 0o644, 1, 1, b"x" * 32, None),
        ("b", "dir", 0o755, 0, 1, None, None),
        ("b/y", "file", 0o644, 1, 1, b"y" * 32, None),
    ]
    old = build_trees(rows)
    rows[3] = ("b/y", "file", 0o644, 2, 2, b"z" * 32, None)
    rebuilt = rebuild_trees(rows, old.refs, ["b/y"])
    assert rebuilt.refs["a"] == old.refs["a"]
    assert set(rebuilt.objects) == {rebuilt.refs["b"].digest, rebuilt.root.digest}


def _with_holes(data: st.DataObject, rows: list[EntryRow]) -> dict[str, dict[str, bool]]:
    """Attributes for some of the file rows (as a file with holes has)."""
    files = [row[0] for row in rows if row[1] == "file"]
    chosen = data.draw(st.lists(st.sampled_from(files), unique=True)) if files else []
    return {path: {"extents": True} for path in chosen}


@settings(max_examples=1000, deadline=None)
@given(data=st.data())
def test_what_differs_between_two_builds_is_all_a_rebuild_needs(data: st.DataObject):
    """From any earlier build (another tree, or this one edited), rebuilding what
    ``differences`` names gives what a full build gives: what a process that creates again
    commits is what a new process would commit."""
    before = data.draw(forests())
    if data.draw(st.booleans()):
        after = data.draw(forests())
    else:
        kept = [row for row in before if data.draw(st.integers(0, 4))]
        after = sorted(
            {row[0]: row for row in kept + data.draw(forests())}.values(), key=itemgetter(0)
        )
    before_attrs, after_attrs = _with_holes(data, before), _with_holes(data, after)
    try:
        old = build_trees(before, before_attrs)
        full = build_trees(after, after_attrs)
    except ValueError:
        return
    found = differences(before, after, before_attrs, after_attrs)
    assert found is not None
    changed, touched = found
    most = data.draw(st.integers(0, 8))
    bounded = differences(before, after, before_attrs, after_attrs, most=most)
    assert bounded == (found if len(changed) + len(touched) <= most else None)
    rebuilt = rebuild_trees(after, old.refs, changed, touched, after_attrs)
    assert rebuilt.root == full.root
    assert rebuilt.refs == full.refs
    if before == after and before_attrs == after_attrs:
        assert (changed, touched) == ([], []) and rebuilt.objects == {
            full.root.digest: full.objects[full.root.digest]
        }
