"""``real_directory`` gives what ``os.path.realpath`` and ``os.path.isdir`` give, whatever lies
on the way: symlinks (relative, absolute, chained, dangling, looping), files, missing
components, and however the path is spelt (``//``, empty, ``.`` and ``..`` components)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from snapstore import SnapStore
from snapstore.errors import InvalidValueError
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


@pytest.mark.parametrize(
    "spelling",
    [
        "//{}",
        "//{}/a",
        "//{}/a/b/c",
        "///{}/a",
        "{}//a",
        "{}/a//b",
        "{}/./a",
        "{}/a/.",
        "{}/a/../a",
    ],
)
def test_a_path_spelt_otherwise_than_its_real_path(tree: Path, spelling: str) -> None:
    """Not normalized by ``abspath`` (two leading slashes) or not by anyone: the real path
    never keeps the spelling (a restore keys its target locks by ``realpath``)."""
    path = spelling.format(str(tree).lstrip("/") if spelling.startswith("/") else tree)
    real, is_directory = real_directory(path)
    assert (real, is_directory) == (os.path.realpath(path), os.path.isdir(path))
    assert is_directory and (real + "/").startswith(str(tree) + "/") and "//" not in real


def test_the_root() -> None:
    assert real_directory("/") == (os.path.realpath("/"), True)
    assert real_directory("//") == (os.path.realpath("//"), True)


def test_a_nul_byte_is_no_directory(tree: Path) -> None:
    assert real_directory(str(tree / "a\x00b")) == (str(tree / "a\x00b"), False)
    assert real_directory("//" + str(tree).lstrip("/") + "/a\x00b")[1] is False


def test_an_unreadable_directory_on_the_way(tree: Path) -> None:
    """A component that cannot be looked into (no search permission) goes to ``realpath``."""
    path = str(tree / "a" / "b" / "c")
    (tree / "a").chmod(0o600)
    try:
        assert real_directory(path) == (os.path.realpath(path), os.path.isdir(path))
    finally:
        (tree / "a").chmod(0o755)


def test_a_create_of_a_base_with_a_nul_byte_is_an_invalid_value(tmp_path: Path) -> None:
    store = SnapStore(tmp_path / "store")
    (tmp_path / "p").mkdir()
    for base in (f"{tmp_path}/p\x00q", f"/{tmp_path}/p\x00q", f"{tmp_path}/p/\x00"):
        with pytest.raises(InvalidValueError, match="is not a directory"):
            store.create("s", "n", ["."], base_dir=base)
    assert store.list() == []


def test_a_symlink_that_cannot_be_read_is_no_directory(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``realpath`` raising (a ``/proc/<pid>/root`` link of another user's process) gives a
    path that is no directory, which a create refuses with its usual error, not the
    ``PermissionError`` itself."""

    def denied(path: str, *args: object, **kwargs: object) -> str:
        raise PermissionError(13, "Permission denied", path)

    path = str(tree / "link-a" / "b")
    monkeypatch.setattr(os.path, "realpath", denied)
    assert real_directory(path) == (path, False)
    store = SnapStore(tree / "store")
    with pytest.raises(InvalidValueError, match="is not a directory"):
        store.create("s", "n", ["."], base_dir=path)
