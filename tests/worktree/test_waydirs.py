"""WayDirs: the directories on the way to a create's paths, opened one name at a time
without following a link, a bounded number held at once."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest
from helpers.trees import write_tree

import snapstore.worktree.scan as scan
import snapstore.worktree.waydirs as waydirs
from snapstore import SnapStore
from snapstore.errors import UnreadablePathError
from snapstore.worktree.waydirs import MAX_HELD, NotADirectory, Replaced, WayDirs


def test_a_directory_is_opened_through_its_parent_and_held(tmp_path: Path) -> None:
    write_tree(tmp_path, {"a/b/f": "x"})
    with WayDirs(str(tmp_path)) as way:
        fd = way.open("a/b")
        assert way.open("a/b") == fd
        assert os.stat("f", dir_fd=fd).st_size == 1
        assert way.identity("a/b") == (
            os.stat(tmp_path / "a/b").st_dev,
            os.stat(tmp_path / "a/b").st_ino,
        )
        assert way.nearest("a/b/c/d") == (fd, "c/d")
    assert way.held("a/b") is None


def test_a_symlink_or_file_on_the_way_is_not_a_directory(tmp_path: Path) -> None:
    write_tree(tmp_path, {"real/f": "x", "file": "y"})
    os.symlink(tmp_path / "real", tmp_path / "link")
    with WayDirs(str(tmp_path)) as way:
        for directory, refused in [("link", "link"), ("link/x", "link"), ("file/x", "file")]:
            with pytest.raises(NotADirectory) as caught:
                way.open(directory)
            assert caught.value.directory == refused
        with pytest.raises(FileNotFoundError) as missing:
            way.open("missing/x")
        assert missing.value.filename == "missing"


def test_beyond_its_bound_it_closes_the_oldest_and_checks_it_when_opened_again(
    tmp_path: Path,
) -> None:
    write_tree(tmp_path, {f"d{i}/f": "x" for i in range(5)})
    with WayDirs(str(tmp_path), max_held=3) as way:
        way.identity("d0")
        for i in range(1, 5):
            way.open(f"d{i}")
        assert way.held("d0") is None
        assert way.open("d0") >= 0  # the same directory: opened again
        for i in range(1, 5):
            way.open(f"d{i}")
        os.rename(tmp_path / "d0", tmp_path / "d0.old")
        (tmp_path / "d0").mkdir()
        with pytest.raises(Replaced) as caught:
            way.open("d0")
        assert caught.value.directory == "d0"


def test_a_create_of_files_in_more_directories_than_it_holds_records_them_all(
    store: SnapStore, tmp_path: Path
) -> None:
    project = tmp_path / "proj"
    files = {f"top{i % 3}/d{i}/f{i}.txt": f"file {i}" for i in range(150)}
    write_tree(project, files)
    for _ in range(2):  # first create (no stat cache), then one reusing it
        info = store.create("s", None, sorted(files), base_dir=project)
        assert {p: store.read("s", info.name, p).decode() for p in files} == files


@pytest.mark.parametrize("skip_unreadable", [False, True])
def test_a_directory_replaced_after_its_descriptor_was_let_go_is_an_unreadable_path(
    store: SnapStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, skip_unreadable: bool
) -> None:
    """More directories on the way than are held: ``d0``, let go, then replaced, is looked
    up again for a later path. That path is unreadable (skipped with ``skip_unreadable``),
    never looked up in another directory than the one the create checked."""
    project = tmp_path / "proj"
    files = {f"d{i}/f": f"file {i}" for i in range(MAX_HELD + 6)}
    write_tree(project, {**files, "d0/g": "old g"})
    paths = [*files, "d0/g"]
    real_add = scan.Scanner.add

    def add_then_replace(self: scan.Scanner, relative: str, **kwargs: Any) -> None:
        real_add(self, relative, **kwargs)
        if relative == paths[-2]:
            os.rename(project / "d0", project / "d0.old")
            write_tree(project, {"d0/f": "new f", "d0/g": "new g"})

    monkeypatch.setattr(scan.Scanner, "add", add_then_replace)
    if not skip_unreadable:
        with pytest.raises(UnreadablePathError, match="'d0' was replaced while the tree"):
            store.create("s", "n", paths, base_dir=project)
        return
    info = store.create("s", "n", paths, base_dir=project, skip_unreadable=True)
    assert "d0/g" in {skipped.path for skipped in info.skipped}
    recorded = {e.path for e in store.get("s", info.name).entries if e.kind == "file"}
    assert "d0/g" not in recorded
    assert {f"d{i}/f" for i in range(1, MAX_HELD + 6)} <= recorded


@pytest.mark.parametrize("skip_unreadable", [False, True])
def test_a_directory_on_the_way_that_cannot_be_looked_in_is_named(
    store: SnapStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, skip_unreadable: bool
) -> None:
    """A directory on the way that cannot be opened (no search permission, an I/O error):
    the path is unreadable, the message names the directory, ``skip_unreadable`` skips it
    and records the rest."""
    project = tmp_path / "proj"
    write_tree(project, {"a/b/f.txt": "f", "c.txt": "c"})
    real_open = os.open

    def refusing(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if path == "b" and kwargs.get("dir_fd") is not None:
            raise PermissionError(errno.EACCES, "Permission denied", path)
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(waydirs.os, "open", refusing)
    if not skip_unreadable:
        with pytest.raises(
            UnreadablePathError, match=r"cannot open 'a/b' on the way: Permission denied"
        ):
            store.create("s", "n", ["a/b/f.txt", "c.txt"], base_dir=project)
        return
    info = store.create("s", "n", ["a/b/f.txt", "c.txt"], base_dir=project, skip_unreadable=True)
    assert [skipped.path for skipped in info.skipped] == ["a/b/f.txt"]
    assert store.read("s", info.name, "c.txt") == b"c"


def test_a_walk_of_the_whole_base_reads_only_the_directory_given_as_base_fd(
    tmp_path: Path,
) -> None:
    """A scan of ``"."`` with the base given as a descriptor (an undo backup): the base's
    path swapped for a symlink to another directory is refused, never walked."""
    project, elsewhere = tmp_path / "proj", tmp_path / "elsewhere"
    write_tree(project, {"f.txt": "inside"})
    write_tree(elsewhere, {"f.txt": "SECRET"})
    base_fd = os.open(project, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.rename(project, tmp_path / "proj.moved")
        os.symlink(elsewhere, project)
        with WayDirs(str(project), base_fd=base_fd) as way:
            scanner = scan.Scanner(str(project), way=way)
            with pytest.raises(UnreadablePathError, match="replaced while the tree"):
                scanner.add(".")
            assert scanner.result.to_read == []
    finally:
        os.close(base_fd)
