"""WayDirs: the directories on the way to a create's paths, opened one name at a time
without following a link, a bounded number held at once."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers.trees import write_tree

from snapstore import SnapStore
from snapstore.errors import UnreadablePathError
from snapstore.worktree.waydirs import NotADirectory, WayDirs


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
        with pytest.raises(FileNotFoundError):
            way.open("missing/x")


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
        with pytest.raises(UnreadablePathError, match="replaced"):
            way.open("d0")


def test_a_create_of_files_in_more_directories_than_it_holds_records_them_all(
    store: SnapStore, tmp_path: Path
) -> None:
    project = tmp_path / "proj"
    files = {f"top{i % 3}/d{i}/f{i}.txt": f"file {i}" for i in range(150)}
    write_tree(project, files)
    for _ in range(2):  # first create (no stat cache), then one reusing it
        info = store.create("s", None, sorted(files), base_dir=project)
        assert {p: store.read("s", info.name, p).decode() for p in files} == files
