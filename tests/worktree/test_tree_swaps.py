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
import snapstore.worktree.scanlookup as scanlookup
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


def _recorded(store: SnapStore, name: str) -> dict[str, bytes]:
    """The files snapshot ``name`` of session ``s`` recorded, with their bytes."""
    entries = store.get("s", name).entries
    return {e.path: store.read("s", name, e.path) for e in entries if e.kind == "file"}


@pytest.mark.parametrize("gitignore", [True, False])
@pytest.mark.parametrize("paths", [["a/y"], ["a/y/g"], ["a/x", "a/y"]])
def test_a_directory_on_the_way_swapped_before_the_scan_starts_is_refused(
    store: SnapStore,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    paths: list[str],
    gitignore: bool,
) -> None:
    """``a`` swapped for a symlink after git's rules looked in it (and the ignore files and
    the stat cache were read) but before the scan: the scan looks up every directory on
    the way again, never through git's descriptors, and refuses the link."""
    project, outside = _outside_and_project(tmp_path)
    real_scanner = create.Scanner

    def swap_then_scan(*args: Any, **kwargs: Any) -> scan.Scanner:
        _swap_for_symlink(project / "a", outside)
        return real_scanner(*args, **kwargs)

    monkeypatch.setattr(create, "Scanner", swap_then_scan)
    with pytest.raises(UnsafePathError, match="'a' is not a directory"):
        store.create("s", "n", paths, base_dir=project, gitignore=gitignore)
    assert store.list("s") == []


@pytest.mark.parametrize("skip_unreadable", [False, True])
def test_a_directory_replaced_after_git_rules_is_scanned_as_it_is_then(
    store: SnapStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, skip_unreadable: bool
) -> None:
    """A tool replacing ``a`` whole (``mv a a.old; mkdir a``) after git's rules looked in it
    and before the scan: the create records the new tree, one consistent state, as its
    scan finds it (never the old top level mixed with the new subdirectories)."""
    project = tmp_path / "proj"
    write_tree(project, {"a/y/top.txt": "old top", "a/y/sub/deep.txt": "old deep"})
    real_scanner = create.Scanner

    def replace_then_scan(*args: Any, **kwargs: Any) -> scan.Scanner:
        os.rename(project / "a", project / "a.old")
        write_tree(project, {"a/y/top.txt": "new top", "a/y/sub/deep.txt": "new deep"})
        return real_scanner(*args, **kwargs)

    monkeypatch.setattr(create, "Scanner", replace_then_scan)
    info = store.create("s", "n", ["a/y"], base_dir=project, skip_unreadable=skip_unreadable)
    assert _recorded(store, info.name) == {
        "a/y/top.txt": b"new top",
        "a/y/sub/deep.txt": b"new deep",
    }
    assert info.skipped == ()


@pytest.mark.parametrize("requested, listed", [("a/d", "a/d"), (".", "a")])
def test_a_directory_swapped_after_its_listing_never_has_a_link_target_read_outside(
    store: SnapStore,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    requested: str,
    listed: str,
) -> None:
    """``a`` swapped for a symlink just after a directory in it (or ``a`` itself, in a walk
    of the whole base) was listed and before its child symlink's target is read: the target
    is read in the directory listed, not through the link."""
    project, outside = tmp_path / "proj", tmp_path / "outside"
    below_a = listed.removeprefix("a").lstrip("/")
    (project / listed).mkdir(parents=True)
    (outside / below_a).mkdir(parents=True, exist_ok=True)
    os.symlink("inside-target", project / listed / "lnk")
    os.symlink("SECRET-outside-target", outside / below_a / "lnk")
    real = scan.Scanner._record_children

    def list_then_swap(self: scan.Scanner, relative: str, *args: Any) -> Any:
        found = real(self, relative, *args)
        if relative == listed:
            _swap_for_symlink(project / "a", outside)
        return found

    monkeypatch.setattr(scan.Scanner, "_record_children", list_then_swap)
    info = store.create("s", "n", [requested], base_dir=project)
    assert (project / "a").is_symlink(), "the swap did not happen"
    (entry,) = [e for e in store.get("s", info.name).entries if e.path == f"{listed}/lnk"]
    assert entry.target == "inside-target"


def test_a_directory_on_the_way_to_two_paths_swapped_between_them_never_leads_outside(
    store: SnapStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``a`` swapped for a symlink while ``a/x`` is walked (its files reused from a warm stat
    cache, nothing of ``a/x`` opened again): ``a/y`` is looked up through the descriptor of
    ``a`` the create holds, the very directory it checked, never through the link."""
    project, outside = _outside_and_project(tmp_path)
    for name in ("warm", "warm2"):
        store.create("s", name, ["a/x", "a/y"], base_dir=project)
    real_add = scan.Scanner.add

    def add_then_swap(self: scan.Scanner, relative: str, **kwargs: Any) -> None:
        real_add(self, relative, **kwargs)
        if relative == "a/x":
            _swap_for_symlink(project / "a", outside)

    monkeypatch.setattr(scan.Scanner, "add", add_then_swap)
    info = store.create("s", "n", ["a/x", "a/y"], base_dir=project)
    assert _recorded(store, info.name) == {"a/x/f": b"x", "a/y/g": b"y"}


def test_the_scanner_looks_at_a_shared_parent_again_for_each_path(tmp_path: Path) -> None:
    project, outside = _outside_and_project(tmp_path)
    scanner = scan.Scanner(str(project))
    scanner.add("a/x")
    _swap_for_symlink(project / "a", outside)
    with pytest.raises(UnsafePathError, match="'a' is not a directory"):
        scanner.add("a/y")


def _git_project_beside_a_directory_ignoring_all(tmp_path: Path) -> tuple[Path, Path]:
    """A git work tree whose ``sub`` has a ``.gitignore`` ignoring nothing it holds, and a
    directory outside it whose ``.gitignore`` ignores everything."""
    import subprocess

    project = tmp_path / "proj"
    outside = tmp_path / "outside"
    write_tree(project, {"sub/.gitignore": "nothing-here\n", "sub/keep.txt": "keep me"})
    write_tree(outside, {".gitignore": "*\n"})
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    return project, outside


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
    project, outside = _git_project_beside_a_directory_ignoring_all(tmp_path)
    racing = _swapping_reader(scan.read_patterns, project / "sub", outside, tmp_path / "moved")
    monkeypatch.setattr(scan, "read_patterns", racing)
    info = store.create("s", "n", ["."], base_dir=project)
    assert "sub/keep.txt" in {e.path for e in store.get("s", info.name).entries}


def test_git_rules_read_a_gitignore_on_the_way_in_its_own_directory_even_if_that_is_swapped(
    store: SnapStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A directory on the way to a requested file swapped for a symlink to one whose
    ``.gitignore`` says ``*`` just as git's rules read the ``.gitignore`` in it: the rules
    are those of the directory's own, and the file is recorded (read by path, the outside
    rule left it out and the create refused it)."""
    import snapstore.worktree.gitrules as gitrules

    project, outside = _git_project_beside_a_directory_ignoring_all(tmp_path)
    racing = _swapping_reader(gitrules.read_patterns, project / "sub", outside, tmp_path / "moved")
    monkeypatch.setattr(gitrules, "read_patterns", racing)
    info = store.create("s", "n", ["sub/keep.txt"], base_dir=project)
    assert store.read("s", info.name, "sub/keep.txt") == b"keep me"
    assert "sub/*" not in info.excludes


def _swap_after_parent_check(monkeypatch: pytest.MonkeyPatch, directory: Path, to: Path) -> None:
    """Make the scan's storage-root check of ``directory`` (the last look at a directory on
    the way before the requested path in it is looked up) swap it for a symlink to ``to``."""
    real = scanlookup.is_store_root

    def check_then_swap(*args: Any, **kwargs: Any) -> bool:
        found = real(*args, **kwargs)
        if directory.is_dir() and not directory.is_symlink():
            _swap_for_symlink(directory, to)
        return found

    monkeypatch.setattr(scanlookup, "is_store_root", check_then_swap)


def test_a_parent_swapped_between_its_check_and_the_file_lookup_never_records_outside(
    store: SnapStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "proj"
    outside = tmp_path / "outside"
    write_tree(project, {"d/f.txt": "inside"})
    write_tree(outside, {"f.txt": "SECRET outside the tree"})
    _swap_after_parent_check(monkeypatch, project / "d", outside)
    info = store.create("s", "n", ["d/f.txt"], base_dir=project)
    assert (project / "d").is_symlink(), "the swap did not happen"
    assert store.read("s", info.name, "d/f.txt") == b"inside"


def test_a_parent_swapped_between_its_check_and_the_symlink_read_never_records_outside(
    store: SnapStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "proj"
    outside = tmp_path / "outside"
    project.mkdir()
    outside.mkdir()
    (project / "d").mkdir()
    os.symlink("inside-target", project / "d" / "link")
    os.symlink("SECRET-target", outside / "link")
    _swap_after_parent_check(monkeypatch, project / "d", outside)
    info = store.create("s", "n", ["d/link"], base_dir=project)
    assert (project / "d").is_symlink(), "the swap did not happen"
    (entry,) = [e for e in store.get("s", info.name).entries if e.path == "d/link"]
    assert entry.target == "inside-target"


def test_a_parent_swapped_just_before_a_requested_file_is_read_never_records_outside(
    store: SnapStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first create (no stat cache: the file is listed without an lstat, its fstat when
    opened stands for it) of ``d/f.txt``, ``d`` swapped just before the file is opened: it
    is opened in the directory the scan looked through, not through the link."""
    project = tmp_path / "proj"
    outside = tmp_path / "outside"
    write_tree(project, {"d/f.txt": "inside"})
    write_tree(outside, {"f.txt": "SECRET outside the tree"})
    real = ingest.open_source

    def swap_then_read(path: str, dir_fd: int | None = None) -> int:
        if not (project / "d").is_symlink():
            _swap_for_symlink(project / "d", outside)
        return real(path, dir_fd)

    monkeypatch.setattr(ingest, "open_source", swap_then_read)
    info = store.create("s", "n", ["d/f.txt"], base_dir=project)
    assert (project / "d").is_symlink(), "the swap did not happen"
    assert store.read("s", info.name, "d/f.txt") == b"inside"


def test_a_requested_directory_swapped_after_its_lstat_is_never_walked_outside(
    store: SnapStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``a/y`` itself swapped for a symlink between its lstat and its opening: the open
    does not follow the link; the create refuses (or skips, with ``skip_unreadable``)."""
    project, outside = _outside_and_project(tmp_path)
    real = scan.file_id

    def identify_then_swap(info: os.stat_result) -> Any:
        if (project / "a" / "y").is_dir() and not (project / "a" / "y").is_symlink():
            _swap_for_symlink(project / "a" / "y", outside / "y")
        return real(info)

    monkeypatch.setattr(scan, "file_id", identify_then_swap)
    with pytest.raises(SnapstoreError):
        store.create("s", "n", ["a/y"], base_dir=project)
    os.unlink(project / "a" / "y")
    os.rename(project / "a" / "y.old", project / "a" / "y")
    info = store.create("s", "n", ["a/y"], base_dir=project, skip_unreadable=True)
    assert [skipped.path for skipped in info.skipped] == ["a/y"]
    assert not any("secret" in e.path for e in store.get("s", info.name).entries)


def test_a_directory_swapped_on_the_way_to_a_changed_path_never_leads_outside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An incremental create rescanning ``src/pkg/mod.py``: ``src`` swapped for a symlink to
    a directory holding another ``pkg/mod.py`` just after it was checked. The changed file
    is looked up through the descriptor of ``src`` checked, never through the link."""
    import time

    from snapstore.worktree.incremental import ChangedPaths

    store = SnapStore(tmp_path / "store", durable=False)
    project = tmp_path / "proj"
    outside = tmp_path / "outside"
    write_tree(project, {"src/pkg/mod.py": "x = 1\n", "src/app.py": "app\n"})
    write_tree(outside, {"pkg/mod.py": "SECRET outside the tree"})
    old = 1_600_000_000 * 10**9
    for directory, names, files in os.walk(project):
        for name in [*names, *files]:
            os.utime(os.path.join(directory, name), ns=(old, old))
    since = time.monotonic_ns()
    first = store.create_incremental(
        "s", "first", ["."], base_dir=project, parent=None, changes=lambda: None
    ).info
    (project / "src/pkg/mod.py").write_text("x = 2\n")
    _swap_after_parent_check(monkeypatch, project / "src", outside)
    report = store.create_incremental(
        "s",
        "second",
        ["."],
        base_dir=project,
        parent=first,
        changes=lambda: ChangedPaths(frozenset({"src/pkg/mod.py"}), frozenset(), since),
    )
    assert (project / "src").is_symlink(), "the swap did not happen"
    recorded = _recorded(store, report.info.name)
    assert b"SECRET outside the tree" not in recorded.values()
    assert report.scan == "incremental"
    assert recorded["src/pkg/mod.py"] == b"x = 2\n"
