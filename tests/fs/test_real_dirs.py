"""``real_directory`` gives what ``os.path.realpath`` and ``os.path.isdir`` give, whatever lies
on the way: symlinks (relative, absolute, chained, dangling, looping), files, missing
components."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from snapstore.fs.realdirs import real_directory


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "a" / "b" / "c").mkdir(parents=True)
    (tmp_path / "a" / "file").write_text("x")
    (tmp_path / "link-a").symlink_to("a")
    (tmp_path / "a" / "up").symlink_to("..")
    (tmp_path / "abs-b").symlink_to(tmp_path / "a" / "b")
    (tmp_path / "chain").symlink_to("link-a")
    (tmp_path / "dangling").symlink_to("nowhere")
    (tmp_path / "loop1").symlink_to("loop2")
    (tmp_path / "loop2").symlink_to("loop1")
    (tmp_path / "to-file").symlink_to("a/file")
    return tmp_path


@pytest.mark.parametrize(
    "relative",
    [
        ".",
        "a",
        "a/b/c",
        "a/file",
        "a/missing",
        "a/missing/deeper",
        "a/file/below",
        "link-a",
        "link-a/b",
        "a/up/a/b",
        "abs-b/c",
        "chain/b/c",
        "dangling",
        "dangling/x",
        "loop1",
        "loop1/x",
        "to-file",
    ],
)
def test_the_same_as_realpath_and_isdir(tree: Path, relative: str) -> None:
    path = os.path.abspath(os.path.join(tree, relative))
    assert real_directory(path) == (os.path.realpath(path), os.path.isdir(path))


def test_the_root() -> None:
    assert real_directory("/") == (os.path.realpath("/"), True)


def test_an_unreadable_directory_on_the_way(tree: Path) -> None:
    """A component that cannot be looked into (no search permission) goes to ``realpath``."""
    path = str(tree / "a" / "b" / "c")
    (tree / "a").chmod(0o600)
    try:
        assert real_directory(path) == (os.path.realpath(path), os.path.isdir(path))
    finally:
        (tree / "a").chmod(0o755)
