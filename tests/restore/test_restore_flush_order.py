"""What a durable restore flushes, and in which order, with ``syncfs`` (Linux) and without.

Where the seam flushes whole filesystems, a restore into a new directory makes five sync
calls whatever its size: the journal (file and directory), one ``syncfs`` for the files
before their renames, one for the directories, their modes and the new target's own entry
after them, and the journal's removal. Without ``syncfs`` every file and every directory
the restore made, and the parent of the new target, get an ``fsync`` of their own. Either
way the journal goes only once everything is flushed, and a flush that fails fails the
restore, which puts the target back.
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.trees import read_tree, write_tree

from snapstore import RestoreError, SnapStore
from snapstore.fs import seam as fsio
from snapstore.fs.durable import TEMP_PREFIX
from snapstore.fs.tempnames import is_target_marker
from snapstore.restore import flushes

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="syncfs is Linux's")

Event = tuple[str, str]

SPEC = {
    "README.md": "hello\n",
    "bin/run": (b"#!/bin/sh\n", 0o755),
    "src/pkg/__init__.py": "",
    "src/pkg/core.py": "x = 1\n",
    "src/pkg/data/table.csv": "a,b\n",
    "docs/link": "->../README.md",
    "empty": None,
}


def _path_of(fd: int) -> str:
    return os.readlink(f"/proc/self/fd/{fd}")


def _at(path: str, dir_fd: int | None) -> str:
    return path if dir_fd is None else os.path.join(_path_of(dir_fd), path)


class EventSeam(fsio.FileSystem):
    """The stock seam (``fsync`` not overridden, so it flushes whole filesystems where
    ``syncfs`` works), logging the creations, renames and mode changes it makes."""

    def __init__(self, events: list[Event]) -> None:
        self.events = events

    def open(self, path: str, flags: int, mode: int = 0o666, *, dir_fd: int | None = None) -> int:
        fd = super().open(path, flags, mode, dir_fd=dir_fd)
        if flags & os.O_CREAT:
            self.events.append(("create", _path_of(fd)))
        return fd

    def mkdir(self, path: str, mode: int = 0o777, *, dir_fd: int | None = None) -> None:
        super().mkdir(path, mode, dir_fd=dir_fd)
        self.events.append(("mkdir", _at(path, dir_fd)))

    def replace(
        self, src: str, dst: str, *, src_dir_fd: int | None = None, dst_dir_fd: int | None = None
    ) -> None:
        super().replace(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)
        self.events.append(("rename", _at(dst, dst_dir_fd)))

    def fchmod(self, fd: int, mode: int) -> None:
        super().fchmod(fd, mode)
        self.events.append(("chmod", _path_of(fd)))

    def unlink(self, path: str, *, dir_fd: int | None = None) -> None:
        self.events.append(("unlink", _at(path, dir_fd)))
        super().unlink(path, dir_fd=dir_fd)


def _record_flushes(
    monkeypatch: pytest.MonkeyPatch,
    events: list[Event],
    *,
    with_syncfs: bool,
    trusted: bool = True,
) -> None:
    """Log every fsync and syncfs (by the path of the descriptor), and choose whether the
    seam may use syncfs and whether the filesystem's syncfs flushes as fsync does."""
    real_flush, real_syncfs = fsio.flush, fsio.syncfs
    monkeypatch.setattr(flushes, "syncfs_flushes", lambda path, device=None: trusted)

    def flush(fd: int) -> None:
        events.append(("fsync", _path_of(fd)))
        real_flush(fd)

    def syncfs(fd: int) -> None:
        events.append(("syncfs", _path_of(fd)))
        real_syncfs(fd)

    monkeypatch.setattr(fsio, "SYNCFS", with_syncfs)
    monkeypatch.setattr(fsio, "flush", flush)
    monkeypatch.setattr(fsio, "syncfs", syncfs)


def _store(tmp_path: Path, spec: dict, events: list[Event]) -> SnapStore:
    base = tmp_path / "project"
    write_tree(base, spec)
    store = SnapStore(tmp_path / "store", fs=EventSeam(events))
    store.create("s", "n", ["."], base_dir=base)
    store.restore("s", "n", base.parent / "first", backup=False)  # makes journal/
    return store


def _indexes(events: list[Event], kind: str, where: Callable[[str], bool]) -> list[int]:
    return [i for i, (k, path) in enumerate(events) if k == kind and where(path)]


def test_a_new_target_is_flushed_with_two_syncfs_and_the_journal_goes_last(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[Event] = []
    store = _store(tmp_path, SPEC, events)
    target = tmp_path / "new" / "out"
    _record_flushes(monkeypatch, events, with_syncfs=True)
    events.clear()
    store.restore("s", "n", target)
    assert read_tree(target) == read_tree(tmp_path / "project")

    inside = str(target)
    in_target = lambda path: path == inside or path.startswith(inside + "/")  # noqa: E731
    in_store = lambda path: path.startswith(str(tmp_path / "store"))  # noqa: E731
    is_link = os.path.islink  # a symlink is renamed into place at once: it holds no data
    syncs = [i for i, (kind, _) in enumerate(events) if kind in ("fsync", "syncfs")]
    assert [events[i][0] for i in syncs].count("syncfs") == 2
    assert len(syncs) == 6
    marker_flush = [i for i in syncs if events[i] == ("fsync", inside)]
    assert len(marker_flush) == 1
    assert all(
        in_store(events[i][1]) for i in syncs if i not in marker_flush and events[i][0] == "fsync"
    )
    first, last = _indexes(events, "syncfs", lambda path: True)
    is_marker = lambda path: is_target_marker(os.path.basename(path))  # noqa: E731
    temps = _indexes(
        events,
        "create",
        lambda path: in_target(path) and TEMP_PREFIX in path and not is_marker(path),
    )
    marked = _indexes(events, "create", lambda path: in_target(path) and is_marker(path))
    unmarked = _indexes(events, "unlink", lambda path: in_target(path) and is_marker(path))
    renames = _indexes(events, "rename", lambda path: in_target(path) and not is_link(path))
    made = _indexes(events, "mkdir", lambda path: path.startswith(str(tmp_path / "new")))
    target_made = _indexes(events, "mkdir", lambda path: path in (inside, str(tmp_path / "new")))
    made_inside = _indexes(events, "mkdir", lambda path: path.startswith(inside + "/"))
    journal = _indexes(events, "rename", lambda path: "/journal/" in path)
    removal = _indexes(events, "unlink", lambda path: "/journal/" in path)
    assert len(target_made) == 2 and journal and len(marked) == 1
    assert max(target_made) < marked[0] < marker_flush[0] < journal[0]
    assert journal[0] < min(made_inside + temps)
    assert temps and max(temps) < first < min(renames)
    assert max(renames + made) < last < removal[0] < unmarked[0] and len(unmarked) == 1
    assert all(
        in_store(path) for i, (_, path) in enumerate(events) if i > last and i not in unmarked
    )


def test_a_large_new_target_still_takes_two_syncfs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """300 files in 100 directories: one flush for all files, one for all directories
    (batches of descriptors used to cost a syncfs each)."""
    events: list[Event] = []
    spec = {f"d{i % 100:03d}/sub/f{i:03d}.txt": f"file {i}\n" for i in range(300)}
    store = _store(tmp_path, spec, events)
    _record_flushes(monkeypatch, events, with_syncfs=True)
    events.clear()
    store.restore("s", "n", tmp_path / "out")
    assert read_tree(tmp_path / "out") == read_tree(tmp_path / "project")
    assert [kind for kind, _ in events].count("syncfs") == 2


def test_an_existing_target_flushes_mode_changes_and_many_directories_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[Event] = []
    spec = {f"d{i:03d}/f.txt": f"file {i}\n" for i in range(100)}
    spec["run.sh"] = (b"#!/bin/sh\n", 0o755)
    store = _store(tmp_path, spec, events)
    project = tmp_path / "project"
    (project / "run.sh").chmod(0o644)
    for i in range(0, 100, 2):
        (project / f"d{i:03d}" / "f.txt").write_text("edited\n")
    expected = read_tree(project)
    _record_flushes(monkeypatch, events, with_syncfs=True)
    events.clear()
    store.restore("s", "n")
    assert read_tree(project)["run.sh"][2] == 0o755
    in_project = lambda path: path.startswith(str(project))  # noqa: E731
    assert not _indexes(events, "fsync", in_project)
    assert len(_indexes(events, "syncfs", in_project)) == 2
    store.undo("s")
    assert read_tree(project) == expected


@pytest.mark.parametrize(
    ("with_syncfs", "trusted"),
    [(False, True), (True, False)],
    ids=["no-syncfs", "filesystem-not-trusted"],
)
def test_without_syncfs_every_new_directory_and_the_new_targets_parent_are_fsynced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, with_syncfs: bool, trusted: bool
) -> None:
    """No syncfs (another system, an older kernel), or a filesystem whose syncfs may not
    flush as fsync does (FUSE, network, vfat): an fsync for each file and directory."""
    events: list[Event] = []
    store = _store(tmp_path, SPEC, events)
    target = tmp_path / "new" / "out"
    _record_flushes(monkeypatch, events, with_syncfs=with_syncfs, trusted=trusted)
    events.clear()
    store.restore("s", "n", target)
    assert read_tree(target) == read_tree(tmp_path / "project")
    assert not _indexes(events, "syncfs", lambda path: True)
    removal = _indexes(events, "unlink", lambda path: "/journal/" in path)[0]
    made = {path for kind, path in events if kind == "mkdir"}
    assert str(target) in made and str(tmp_path / "new") in made
    for directory in made | {str(tmp_path)}:
        changes = [
            i
            for i, (kind, path) in enumerate(events)
            if kind in ("mkdir", "rename") and os.path.dirname(path) == directory
        ]
        flushes = _indexes(events, "fsync", lambda path, d=directory: path == d)
        assert flushes and max(changes, default=-1) < max(flushes) < removal, directory
    in_target = lambda path: path.startswith(str(target) + "/")  # noqa: E731
    temps_flushed = _indexes(events, "fsync", lambda path: in_target(path) and TEMP_PREFIX in path)
    assert len(temps_flushed) == 5  # every regular file, before any rename
    renamed = _indexes(events, "rename", lambda path: in_target(path) and not os.path.islink(path))
    assert len(renamed) == 5 and max(temps_flushed) < min(renamed)


@pytest.mark.parametrize("failing", [1, 2])
def test_a_failed_syncfs_fails_a_restore_into_a_new_directory_and_removes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: int
) -> None:
    events: list[Event] = []
    store = _store(tmp_path, SPEC, events)
    calls: list[int] = []

    def syncfs(fd: int) -> None:
        calls.append(fd)
        if len(calls) == failing:
            raise OSError(errno.EIO, "syncfs failed: injected")

    monkeypatch.setattr(fsio, "SYNCFS", True)
    monkeypatch.setattr(fsio, "syncfs", syncfs)
    monkeypatch.setattr(flushes, "syncfs_flushes", lambda path, device=None: True)
    target = tmp_path / "out"
    with pytest.raises(RestoreError) as raised:
        store.restore("s", "n", target)
    assert raised.value.rolled_back
    assert "injected" in str(raised.value)
    assert not target.exists()
    assert not os.listdir(tmp_path / "store" / "journal")
    store.restore("s", "n", target)
    assert read_tree(target) == read_tree(tmp_path / "project")


@pytest.mark.parametrize("failing", [1, 2])
def test_a_failed_syncfs_puts_an_existing_target_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: int
) -> None:
    events: list[Event] = []
    store = _store(tmp_path, SPEC, events)
    project = tmp_path / "project"
    (project / "src/pkg/core.py").write_text("edited\n")
    (project / "added.txt").write_text("new\n")
    (project / "bin/run").chmod(0o644)
    before = read_tree(project)
    calls: list[int] = []
    real_syncfs = fsio.syncfs

    def syncfs(fd: int) -> None:
        calls.append(fd)
        if len(calls) == failing:
            raise OSError(errno.EIO, "syncfs failed: injected")
        real_syncfs(fd)

    monkeypatch.setattr(fsio, "SYNCFS", True)
    monkeypatch.setattr(fsio, "syncfs", syncfs)
    monkeypatch.setattr(flushes, "syncfs_flushes", lambda path, device=None: True)
    with pytest.raises(RestoreError) as raised:
        store.restore("s", "n")
    assert raised.value.rolled_back
    assert read_tree(project, with_temps=True) == before
    assert not os.listdir(tmp_path / "store" / "journal")
    assert store.backups("s") == []


def test_a_seam_that_cannot_flush_a_filesystem_refuses_to(tmp_path: Path) -> None:
    class OwnFsync(fsio.FileSystem):
        def fsync(self, fd: int) -> None:
            super().fsync(fd)

    seam = OwnFsync()
    assert not seam.flushes_whole_filesystems
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(ValueError):
            seam.sync_filesystems([fd])
    finally:
        os.close(fd)


def test_each_syncfs_goes_through_a_descriptor_opened_before_the_files_it_flushes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """syncfs reports the writeback errors recorded since its descriptor was opened: the
    descriptor of each flush must be older than every file of the batch."""
    events: list[Event] = []
    spec = {f"d{i:03d}/f.txt": f"file {i}\n" for i in range(150)}
    store = _store(tmp_path, spec, events)
    _record_flushes(monkeypatch, events, with_syncfs=True)
    open_at_first_write: set[str] = set()
    flushed_through: list[int] = []
    real_open, real_syncfs = EventSeam.open, fsio.syncfs

    def first_open(
        self: EventSeam, path: str, flags: int, mode: int = 0o666, *, dir_fd: int | None = None
    ) -> int:
        first_file = TEMP_PREFIX in path and not is_target_marker(path)  # not the marker
        if first_file and dir_fd is not None and not open_at_first_write:
            open_at_first_write.update(os.listdir("/proc/self/fd"))
        return real_open(self, path, flags, mode, dir_fd=dir_fd)

    def syncfs(fd: int) -> None:
        flushed_through.append(fd)
        real_syncfs(fd)

    monkeypatch.setattr(EventSeam, "open", first_open)
    monkeypatch.setattr(fsio, "syncfs", syncfs)
    store.restore("s", "n", tmp_path / "out")
    assert len(flushed_through) == 2
    assert {str(fd) for fd in flushed_through} <= open_at_first_write
