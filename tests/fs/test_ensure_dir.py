"""``ensure_dir``: every directory it hands back has a durable entry, whoever made it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from snapstore.fs.durable import ensure_dir
from snapstore.fs.seam import FileSystem


class LosesTheRace(FileSystem):
    """A filesystem where another writer makes each directory just before this one's
    ``mkdir`` (and may die before flushing its parent); records the flushed directories."""

    def __init__(self) -> None:
        super().__init__()
        self.flushed: list[str] = []

    def mkdir(self, path: str, mode: int = 0o777, *, dir_fd: int | None = None) -> None:
        os.mkdir(path)
        super().mkdir(path, mode, dir_fd=dir_fd)

    def fsync_dir(self, path: str, *, dir_fd: int | None = None) -> None:
        self.flushed.append(os.fspath(path))
        super().fsync_dir(path, dir_fd=dir_fd)


def test_a_directory_another_writer_made_first_has_its_parent_flushed(tmp_path: Path) -> None:
    fs = LosesTheRace()
    target = tmp_path / "sessions" / "one"
    (tmp_path / "sessions").mkdir()
    ensure_dir(fs, str(target), stop_at=str(tmp_path / "sessions"), durable=True)
    assert target.is_dir()
    assert fs.flushed == [str(tmp_path / "sessions")]


def test_a_directory_already_there_is_left_alone(tmp_path: Path) -> None:
    fs = LosesTheRace()
    (tmp_path / "sessions" / "one").mkdir(parents=True)
    ensure_dir(fs, str(tmp_path / "sessions" / "one"), stop_at=str(tmp_path), durable=True)
    assert fs.flushed == []


def test_a_file_in_the_way_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "one").write_text("not a directory")
    with pytest.raises(FileExistsError):
        ensure_dir(FileSystem(), str(tmp_path / "one"), stop_at=str(tmp_path), durable=True)
