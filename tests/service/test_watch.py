"""Change tracking: the paths a watch reports, applied to the previous checkpoint, give exactly
what a full scan records; and every doubt falls back to a full scan."""

from __future__ import annotations

import errno
import mmap
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.trees import write_tree

from snapstore import SnapStore
from snapstore.errors import SnapshotExistsError
from snapstore.fs import mounts
from snapstore.models import FileEntry, Snapshot
from snapstore.service import watch
from snapstore.service.watch import (
    Changes,
    TreeWatcher,
    WatchSet,
    apply_changes,
    directories,
    entries_below,
    inotify,
)
from snapstore.service.watch import changes as watch_changes
from snapstore.worktree.incremental import ChangedPaths, ChangeSource, IncrementalReport

pytestmark = pytest.mark.skipif(
    not watch.watch_support()["available"], reason="inotify (Linux and the watch extra) needed"
)

Mutation = Callable[[Path, Path], None]


def start_tree(base: Path) -> None:
    write_tree(
        base,
        {
            "README.md": "# readme\n",
            "notes.txt": "not requested when paths are a subset\n",
            "src/app.py": "print('app')\n",
            "src/util.py": "def util(): ...\n",
            "src/pkg/__init__.py": "",
            "src/pkg/mod.py": "x = 1\n",
            "src/pkg/sub/deep.py": "y = 2\n",
            "src/gone/old.py": "old\n",
            "data/a.bin": b"\x00" * 100,
            "deep/a/b/leaf.txt": "leaf\n",
            "deep/a/other.txt": "beside\n",
        },
    )
    (base / "src/link").symlink_to("app.py")


def _write(path: Path, data: str) -> None:
    with path.open("w") as handle:
        handle.write(data)


def overwrite_same_size(base: Path, outside: Path) -> None:
    _write(base / "src/app.py", "print('APP')\n")


def append(base: Path, outside: Path) -> None:
    with (base / "src/util.py").open("a") as handle:
        handle.write("# more\n")


def truncate(base: Path, outside: Path) -> None:
    os.truncate(base / "data/a.bin", 10)


def rename_over(base: Path, outside: Path) -> None:
    (base / "src/.util.tmp").write_text("replaced\n")
    os.replace(base / "src/.util.tmp", base / "src/util.py")


def delete_file(base: Path, outside: Path) -> None:
    (base / "src/pkg/mod.py").unlink()


def mkdir_with_files(base: Path, outside: Path) -> None:
    os.makedirs(base / "src/new/inner/most")
    (base / "src/new/inner/most/file.py").write_text("fresh\n")
    (base / "src/new/top.py").write_text("top\n")


def rmtree(base: Path, outside: Path) -> None:
    shutil.rmtree(base / "src/gone")


def rename_dir_then_edit_inside(base: Path, outside: Path) -> None:
    os.rename(base / "src/pkg", base / "src/pkg2")
    (base / "src/pkg2/sub/deep.py").write_text("moved and edited\n")
    (base / "src/pkg2/sub/added.py").write_text("added after the move\n")


def move_out_and_in(base: Path, outside: Path) -> None:
    os.rename(base / "src/pkg2/sub", outside / "sub")
    (outside / "sub/deep.py").write_text("edited outside\n")
    write_tree(outside / "incoming", {"x.py": "x\n", "y/z.py": "z\n"})
    os.rename(outside / "incoming", base / "src/incoming")
    (base / "src/incoming/y/z.py").write_text("edited after moving in\n")


def chmod_file_and_dir(base: Path, outside: Path) -> None:
    os.chmod(base / "src/app.py", 0o600)
    os.chmod(base / "src/incoming", 0o700)


def symlink_swap(base: Path, outside: Path) -> None:
    os.symlink("util.py", base / "src/.link.tmp")
    os.replace(base / "src/.link.tmp", base / "src/link")


def utime(base: Path, outside: Path) -> None:
    os.utime(base / "README.md", ns=(1_000_000_000, 1_000_000_000))


def file_to_dir_and_back(base: Path, outside: Path) -> None:
    (base / "data/a.bin").unlink()
    (base / "data/a.bin").mkdir()
    (base / "data/a.bin/in.txt").write_text("now a directory\n")
    shutil.rmtree(base / "src/new")
    (base / "src/new").write_text("now a file\n")


def hard_link_inside(base: Path, outside: Path) -> None:
    os.link(base / "src/util.py", base / "src/util_link.py")


def ancestor_renamed_and_recreated(base: Path, outside: Path) -> None:
    os.rename(base / "deep/a", base / "deep/a_old")
    write_tree(base / "deep/a/b", {"leaf.txt": "a different leaf\n", "more.txt": "more\n"})


def edit_after_recreate(base: Path, outside: Path) -> None:
    (base / "deep/a/b/leaf.txt").write_text("edited in the recreated directory\n")
    (base / "notes.txt").write_text("edited, outside the requested paths when a subset\n")


def nothing(base: Path, outside: Path) -> None:
    pass


MUTATIONS: list[Mutation] = [
    nothing,
    overwrite_same_size,
    append,
    truncate,
    rename_over,
    delete_file,
    mkdir_with_files,
    rmtree,
    rename_dir_then_edit_inside,
    move_out_and_in,
    chmod_file_and_dir,
    symlink_swap,
    utime,
    file_to_dir_and_back,
    hard_link_inside,
    ancestor_renamed_and_recreated,
    edit_after_recreate,
]


def as_rows(entries: Any) -> list[tuple[Any, ...]]:
    return sorted(tuple(entry) for entry in entries)


def incremental_result(parent: Snapshot, changes: Changes, full: Snapshot) -> list[FileEntry]:
    """What the incremental create would commit: ``parent`` with the changed paths read now
    (here: from a full scan taken at the same moment, with no change in between)."""
    return apply_changes(
        parent.entries,
        changes,
        fresh=lambda root: list(entries_below(full.entries, root)),
        refreshed=full.entry,
    )


@pytest.fixture
def watcher_factory(tmp_path: Path) -> Iterator[Callable[..., TreeWatcher]]:
    started: list[TreeWatcher] = []

    def make(base: Path, paths: list[str], *, follow: bool = True) -> TreeWatcher:
        watcher = TreeWatcher(str(base), paths, str(tmp_path / "store"))
        watcher.start(follow=follow)
        started.append(watcher)
        return watcher

    yield make
    for watcher in started:
        watcher.close()


@pytest.mark.parametrize(
    "paths", [["."], ["src", "README.md", "deep/a/b", "data"]], ids=["base", "subset"]
)
@pytest.mark.parametrize("follow", [True, False], ids=["thread", "at-drain"])
def test_every_kind_of_change_is_reported(
    tmp_path: Path, watcher_factory: Callable[..., TreeWatcher], paths: list[str], follow: bool
):
    base, outside = tmp_path / "project", tmp_path / "outside"
    outside.mkdir()
    start_tree(base)
    store = SnapStore(tmp_path / "store", durable=False)
    watcher = watcher_factory(base, paths, follow=follow)
    first = watcher.drain()
    assert first.full == "the watch has just started"
    store.create("w", "parent", paths, base_dir=base)
    parent = store.get("w", "parent")
    for index, mutate in enumerate(MUTATIONS):
        mutate(base, outside)
        changes = watcher.drain()
        assert changes.full is None, (mutate.__name__, changes.full)
        store.create("w", f"full-{index}", paths, base_dir=base)
        full = store.get("w", f"full-{index}")
        assert as_rows(incremental_result(parent, changes, full)) == as_rows(full.entries), (
            mutate.__name__,
            changes,
        )
        if mutate is nothing:
            assert not changes.rescan and not changes.refresh
        if mutate is overwrite_same_size:
            assert changes.rescan == {"src/app.py"} and not changes.refresh
        if mutate is edit_after_recreate and paths != ["."]:
            assert "notes.txt" not in changes.rescan
        parent = full


def test_an_mmap_write_is_seen_only_when_the_mapping_is_released(
    tmp_path: Path, watcher_factory: Callable[..., TreeWatcher]
):
    """The documented blind spot: a write through a live shared mapping reaches no inotify
    watch; the file's last release (the unmapping) does, as IN_CLOSE_WRITE."""
    base = tmp_path / "project"
    write_tree(base, {"mapped.bin": b"\x00" * 4096})
    watcher = watcher_factory(base, ["."])
    with (base / "mapped.bin").open("r+b") as handle:
        mapped = mmap.mmap(handle.fileno(), 4096)
    try:
        assert watcher.drain().full is not None
        mapped[:5] = b"hello"
        mapped.flush()
        assert (base / "mapped.bin").read_bytes()[:5] == b"hello"
        unreleased = watcher.drain()
        assert unreleased.full is None and not unreleased.rescan and not unreleased.refresh
    finally:
        mapped.close()
    assert watcher.drain().rescan == {"mapped.bin"}


def test_a_queue_overflow_means_a_full_scan_and_fresh_watches(
    tmp_path: Path, watcher_factory: Callable[..., TreeWatcher]
):
    base = tmp_path / "project"
    write_tree(base, {"a.txt": "", "b.txt": ""})
    watcher = watcher_factory(base, ["."], follow=False)
    watcher.drain()
    limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    (base / "late").mkdir()
    descriptors = [os.open(base / name, os.O_WRONLY) for name in ("a.txt", "b.txt")]
    try:
        for index in range(limit + 10):
            os.write(descriptors[index % 2], b"x")
    finally:
        for fd in descriptors:
            os.close(fd)
    (base / "late/created-during-the-flood").mkdir()
    changes = watcher.drain()
    assert changes.full == "the inotify event queue overflowed"
    (base / "late/created-during-the-flood/f.txt").write_text("seen")
    after = watcher.drain()
    assert after.full is None
    assert "late/created-during-the-flood/f.txt" in after.rescan


class _LimitedInotify:
    """An inotify instance whose watch table is full after ``room`` watches."""

    def __init__(self, real: Any, room: int) -> None:
        self.real, self.room = real, room

    def add_watch(self, path: str, mask: int) -> int:
        if self.room <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.room -= 1
        wd: int = self.real.add_watch(path, mask)
        return wd

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def test_the_watch_limit_means_full_scans(
    tmp_path: Path, watcher_factory: Callable[..., TreeWatcher], monkeypatch: pytest.MonkeyPatch
):
    base = tmp_path / "project"
    start_tree(base)
    real = inotify.new_inotify
    monkeypatch.setattr(inotify, "new_inotify", lambda: _LimitedInotify(real(), 3))
    watcher = watcher_factory(base, ["."])
    assert watcher.broken is not None and "max_user_watches" in watcher.broken
    assert watcher.drain().full == watcher.broken
    (base / "README.md").write_text("changed\n")
    assert watcher.drain().full == watcher.broken


def test_a_new_directory_past_the_watch_limit_means_full_scans(
    tmp_path: Path, watcher_factory: Callable[..., TreeWatcher], monkeypatch: pytest.MonkeyPatch
):
    base = tmp_path / "project"
    write_tree(base, {"a.txt": ""})
    real = inotify.new_inotify
    monkeypatch.setattr(inotify, "new_inotify", lambda: _LimitedInotify(real(), 1))
    watcher = watcher_factory(base, ["."])
    assert watcher.drain().full == "the watch has just started"
    (base / "newdir").mkdir()
    assert watcher.drain().full is not None


def test_a_network_filesystem_means_full_scans(
    tmp_path: Path, watcher_factory: Callable[..., TreeWatcher], monkeypatch: pytest.MonkeyPatch
):
    base = tmp_path / "project"
    start_tree(base)
    monkeypatch.setattr(directories, "filesystem_type", lambda path: "nfs4")
    watcher = watcher_factory(base, ["."])
    assert watcher.broken is not None and "nfs4" in watcher.broken
    assert watcher.drain().full == watcher.broken


def test_an_unwatchable_directory_is_rescanned_every_time(
    tmp_path: Path, watcher_factory: Callable[..., TreeWatcher], monkeypatch: pytest.MonkeyPatch
):
    base = tmp_path / "project"
    start_tree(base)
    real = inotify.new_inotify

    class Denying(_LimitedInotify):
        def add_watch(self, path: str, mask: int) -> int:
            if path.endswith("src/pkg"):
                raise OSError(errno.EACCES, os.strerror(errno.EACCES))
            return super().add_watch(path, mask)

    monkeypatch.setattr(inotify, "new_inotify", lambda: Denying(real(), 1000))
    watcher = watcher_factory(base, ["."])
    watcher.drain()
    assert watcher.drain().rescan == {"src/pkg"}
    assert watcher.drain().rescan == {"src/pkg"}


def test_a_replaced_base_directory_means_a_full_scan(
    tmp_path: Path, watcher_factory: Callable[..., TreeWatcher]
):
    base = tmp_path / "project"
    start_tree(base)
    watcher = watcher_factory(base, ["src"])
    watcher.drain()
    os.rename(tmp_path, tmp_path.parent / (tmp_path.name + "-moved"))
    try:
        os.makedirs(base)
        start_tree(base)
        assert watcher.drain().full is not None
        (base / "src/app.py").write_text("in the new directory\n")
        assert watcher.drain().rescan == {"src/app.py"}
    finally:
        shutil.rmtree(tmp_path, ignore_errors=True)
        os.rename(tmp_path.parent / (tmp_path.name + "-moved"), tmp_path)


@pytest.mark.parametrize("name", [".snapstoreignore", ".gitignore"])
def test_an_exclude_file_change_means_a_full_scan(
    tmp_path: Path, watcher_factory: Callable[..., TreeWatcher], name: str
):
    base = tmp_path / "project"
    start_tree(base)
    watcher = watcher_factory(base, ["."])
    watcher.drain()
    (base / "src" / name).write_text("*.py\n")
    assert watcher.drain().full is not None


def test_too_many_changes_mean_a_full_scan(
    tmp_path: Path, watcher_factory: Callable[..., TreeWatcher], monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(watch_changes, "MAX_TRACKED", 5)
    base = tmp_path / "project"
    write_tree(base, {f"f{i}.txt": "" for i in range(10)})
    watcher = watcher_factory(base, ["."])
    watcher.drain()
    for index in range(10):
        (base / f"f{index}.txt").write_text("changed")
    assert watcher.drain().full == "more than 5 paths changed"


def test_the_store_inside_the_project_is_not_watched(
    tmp_path: Path, watcher_factory: Callable[..., TreeWatcher]
):
    base = tmp_path / "project"
    start_tree(base)
    store = SnapStore(base / ".snapstore", durable=False)
    watcher = TreeWatcher(str(base), ["."], str(base / ".snapstore"))
    watcher.start()
    try:
        watcher.drain()
        store.create("s", "n", ["."], base_dir=base)
        store.create("s", "m", ["."], base_dir=base)
        changes = watcher.drain()
        assert all(not path.startswith(".snapstore/") for path in changes.rescan)
    finally:
        watcher.close()


def test_watched_creates_through_the_watch_set(tmp_path: Path):
    """The watch set tracks the checkpoint to build on, hands the library exactly the changes
    since it (drained when the library asks), and builds on nothing after a failure."""
    base = tmp_path / "project"
    start_tree(base)
    store = SnapStore(tmp_path / "store", durable=False)
    calls: list[ChangedPaths | None] = []

    def checking_create(
        store: SnapStore,
        arguments: dict[str, Any],
        parent: Any,
        changes: ChangeSource,
        progress: Any,
    ) -> IncrementalReport:
        def recording() -> ChangedPaths | None:
            calls.append(changes())
            return calls[-1]

        report = store.create_incremental(
            **arguments, parent=parent, changes=recording, progress=progress
        )
        known = calls[-1]
        if report.scan == "incremental":
            assert known is not None and parent is not None
            previous = store.get(parent.session, f"{parent.name}-copy")
            store.create("s", "full", arguments["paths"], base_dir=arguments["base_dir"])
            full = store.get("s", "full")
            expected = as_rows(full.entries)
            found = Changes(rescan=known.rescan, refresh=known.refresh)
            assert as_rows(incremental_result(previous, found, full)) == expected
            assert as_rows(store.get(report.info.session, report.info.name).entries) == expected
        store.create("s", f"{report.info.name}-copy", arguments["paths"], base_dir=base)
        return report

    watches = WatchSet(str(tmp_path / "store"), incremental=checking_create)
    arguments = {
        "session": "s",
        "name": "n",
        "paths": ["src", "README.md"],
        "base_dir": str(base),
        "exclude": [],
        "default_excludes": True,
        "gitignore": False,
        "rehash": False,
    }
    try:
        _, status = watches.create(store, dict(arguments), None)
        assert status["scan"] == "full" and status["active"] is True
        assert status["reason"] == "the watch has just started"
        (base / "src/app.py").write_text("edited\n")
        _, status = watches.create(store, dict(arguments), None)
        assert status["scan"] == "incremental" and status["rescanned"] >= 1
        assert calls[-1] is not None and calls[-1].rescan == {"src/app.py"}
        _, status = watches.create(store, {**arguments, "rehash": True}, None)
        assert status["scan"] == "full" and status["reason"] == "rehash reads everything"
        with pytest.raises(SnapshotExistsError):
            watches.create(store, {**arguments, "if_exists": "error"}, None)
        (base / "README.md").write_text("edited\n")
        _, status = watches.create(store, dict(arguments), None)
        assert status["scan"] == "full"
        assert status["reason"] == "no checkpoint to build on yet"
        (base / "README.md").write_text("edited again\n")
        _, status = watches.create(store, dict(arguments), None)
        assert status["scan"] == "incremental"
        assert calls[-1] is not None and calls[-1].rescan == {"README.md"}
        assert watches.stop(["README.md", "src"], str(base)) is True
        assert watches.stop(["README.md", "src"], str(base)) is False
    finally:
        watches.close()


@pytest.mark.skipif(sys.platform != "linux", reason="Linux only")
def test_filesystem_type_finds_this_one(tmp_path: Path):
    assert mounts.filesystem_type(str(tmp_path))
