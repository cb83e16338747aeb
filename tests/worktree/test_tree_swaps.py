"""A directory of the tree swapped for a symlink to somewhere else while a create runs: what
lies outside the tree is never recorded as if it were inside (the create records the tree
as it was, or refuses with SourceChangedError)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from helpers.trees import write_tree

import snapstore.worktree.create as create
import snapstore.worktree.ingest as ingest
import snapstore.worktree.scan as scan
from snapstore import SnapStore
from snapstore.errors import SnapstoreError, UnsafePathError


def test_directory_swapped_for_symlink_before_read_never_records_outside_file(
    store: SnapStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "proj"
    outside = tmp_path / "outside"
    write_tree(project, {"d/f.txt": "inside"})
    write_tree(outside, {"f.txt": "SECRET outside the tree"})
    real = ingest.open_source

    def swap_then_read(path, dir_fd=None):
        if path.endswith("f.txt") and (project / "d").is_dir() and not (project / "d").is_symlink():
            os.rename(project / "d", tmp_path / "d-moved")
            os.symlink(outside, project / "d")
        return real(path, dir_fd)

    monkeypatch.setattr(ingest, "open_source", swap_then_read)
    try:
        info = store.create("s", "n", ["."], base_dir=project)
    except (SnapstoreError, OSError):
        return  # refusing is fine
    assert store.read("s", info.name, "d/f.txt") == b"inside"


def test_parent_swapped_for_symlink_mid_scan_never_walks_outside(
    store: SnapStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import snapstore.worktree.scan as scan

    project = tmp_path / "proj"
    outside = tmp_path / "outside"
    write_tree(project, {"a/b/f.txt": "inside"})
    write_tree(outside, {"b/f.txt": "SECRET", "b/planted.txt": "SECRET too"})
    real = scan.Scanner._record_children

    def record_then_swap(self, relative, absolute, fd, row):
        others = real(self, relative, absolute, fd, row)
        if relative == "a":
            os.rename(project / "a", tmp_path / "a-moved")
            os.symlink(outside, project / "a")
        return others

    monkeypatch.setattr(scan.Scanner, "_record_children", record_then_swap)
    try:
        info = store.create("s", "n", ["."], base_dir=project)
    except (SnapstoreError, OSError):
        return
    paths = {entry.path for entry in store.get("s", info.name).entries}
    assert "a/b/planted.txt" not in paths, "a file from outside the tree was recorded"
    assert store.read("s", info.name, "a/b/f.txt") == b"inside"


def test_a_directory_replaced_mid_create_is_skipped_with_skip_unreadable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tool swapping a directory atomically (``mv d d.old; mkdir d``) while a create reads
    it: with ``skip_unreadable`` the create succeeds and reports the path it skipped, as for
    a file that vanished."""
    project = tmp_path / "proj"
    write_tree(project, {"a.txt": "a", "d/f.txt": "v1"})
    store = SnapStore(tmp_path / "store")
    real = ingest.open_source
    done: list[int] = []

    def replace_then_read(path: str, dir_fd: int | None = None) -> int:
        if not done:
            done.append(1)
            os.rename(project / "d", tmp_path / "d.old")
            write_tree(project, {"d/f.txt": "v2"})
        return real(path, dir_fd)

    monkeypatch.setattr(ingest, "open_source", replace_then_read)
    info = store.create("s", "n", ["."], base_dir=project, skip_unreadable=True)
    assert [skipped.path for skipped in info.skipped] == ["d/f.txt"]
    assert store.read("s", info.name, "a.txt") == b"a"


def _swap_for_symlink(directory: Path, target: Path) -> None:
    os.rename(directory, directory.with_name(directory.name + ".old"))
    os.symlink(target, directory)


def _outside_and_project(tmp_path: Path) -> tuple[Path, Path]:
    project = tmp_path / "proj"
    outside = tmp_path / "outside"
    write_tree(project, {"a/x/f": "x", "a/y/g": "y"})
    write_tree(outside, {"y/secret.txt": "SECRET outside the tree"})
    return project, outside


@pytest.mark.parametrize("paths", [["a/y"], ["a/y/g"], ["a/x", "a/y"]])
def test_a_directory_on_the_way_swapped_before_the_scan_starts_is_refused(
    store: SnapStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, paths: list[str]
) -> None:
    """``a`` swapped for a symlink after git's rules looked at it (and the ignore files and
    the stat cache were read) but before the scan: the scan looks at every directory on
    the way again, and never takes git's look for its own."""
    project, outside = _outside_and_project(tmp_path)
    real_scanner = create.Scanner

    def swap_then_scan(*args: Any, **kwargs: Any) -> scan.Scanner:
        _swap_for_symlink(project / "a", outside)
        return real_scanner(*args, **kwargs)

    monkeypatch.setattr(create, "Scanner", swap_then_scan)
    with pytest.raises(UnsafePathError, match="'a' is not a directory"):
        store.create("s", "n", paths, base_dir=project)
    assert store.list("s") == []


def test_a_directory_on_the_way_to_two_paths_swapped_between_them_is_refused(
    store: SnapStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``a`` swapped for a symlink while ``a/x`` is walked (its files reused from a warm stat
    cache, nothing of ``a/x`` opened again): ``a/y`` is refused, not read through the link,
    since every path's parents are looked at again just before it."""
    project, outside = _outside_and_project(tmp_path)
    for name in ("warm", "warm2"):
        store.create("s", name, ["a/x", "a/y"], base_dir=project)
    real_add = scan.Scanner.add

    def add_then_swap(self: scan.Scanner, relative: str, **kwargs: Any) -> None:
        real_add(self, relative, **kwargs)
        if relative == "a/x":
            _swap_for_symlink(project / "a", outside)

    monkeypatch.setattr(scan.Scanner, "add", add_then_swap)
    with pytest.raises(UnsafePathError, match="'a' is not a directory"):
        store.create("s", "n", ["a/x", "a/y"], base_dir=project)
    assert [info.name for info in store.list("s")] == ["warm", "warm2"]


def test_the_scanner_looks_at_a_shared_parent_again_for_each_path(tmp_path: Path) -> None:
    project, outside = _outside_and_project(tmp_path)
    scanner = scan.Scanner(str(project))
    scanner.add("a/x")
    _swap_for_symlink(project / "a", outside)
    with pytest.raises(UnsafePathError, match="'a' is not a directory"):
        scanner.add("a/y")


def _swapping_reader(real: Any, directory: Path, elsewhere: Path, moved: Path) -> Any:
    """``read_patterns`` that swaps ``directory`` for a symlink to ``elsewhere`` just before
    reading the ``.gitignore`` in it, and puts it back just after."""

    def racing(path: str, **kwargs: Any) -> list[str]:
        if path != str(directory / ".gitignore"):
            return list(real(path, **kwargs))
        os.rename(directory, moved)
        os.symlink(elsewhere, directory)
        try:
            return list(real(path, **kwargs))
        finally:
            os.unlink(directory)
            os.rename(moved, directory)

    return racing


def test_a_gitignore_the_walk_meets_is_read_in_its_own_directory_even_if_that_is_swapped(
    store: SnapStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A directory swapped for a symlink to another just as the walk of the tree reads its
    ``.gitignore``: the rules are those of the directory's own ``.gitignore``, never of one
    outside the tree that would leave files out."""
    import subprocess

    project = tmp_path / "proj"
    outside = tmp_path / "outside"
    write_tree(project, {"sub/.gitignore": "nothing-here\n", "sub/keep.txt": "keep me"})
    write_tree(outside, {".gitignore": "*\n"})
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    racing = _swapping_reader(scan.read_patterns, project / "sub", outside, tmp_path / "moved")
    monkeypatch.setattr(scan, "read_patterns", racing)
    info = store.create("s", "n", ["."], base_dir=project)
    assert "sub/keep.txt" in {e.path for e in store.get("s", info.name).entries}
