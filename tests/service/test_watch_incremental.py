"""Watched creates through the library's incremental create: random edits followed by inotify
give what full creates give; an overflowed queue, a change made during a create, a create
waiting for a restore, and a server killed mid-create never leave a stale checkpoint."""

from __future__ import annotations

import functools
import os
import signal
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import edits
from helpers.service import Server
from helpers.trees import write_tree
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from snapstore import SnapStore
from snapstore.errors import SnapstoreError
from snapstore.internals import repository, target_locks
from snapstore.models import SnapshotInfo
from snapstore.service import watch
from snapstore.service.watch import TreeWatcher, WatchSet
from snapstore.worktree import ingest, statcache

pytestmark = pytest.mark.skipif(
    not watch.watch_support()["available"], reason="inotify (Linux and the watch extra) needed"
)


def arguments_for(base: Path, paths: list[str], **options: Any) -> dict[str, Any]:
    """What the server hands ``WatchSet.create`` for a ``create`` request."""
    return {
        "session": "s",
        "name": "n",
        "paths": paths,
        "base_dir": str(base),
        "exclude": [],
        "default_excludes": True,
        "gitignore": False,
        "rehash": False,
        **options,
    }


def rows_of(store: SnapStore, info: SnapshotInfo) -> list[tuple[Any, ...]]:
    return [tuple(entry) for entry in store.get(info.session, info.name).entries]


def same_as_full(store: SnapStore, info: SnapshotInfo, base: Path, paths: list[str]) -> None:
    """``info`` records what a full create, reading every file, records now."""
    full = store.create("s", "full", paths, base_dir=base, rehash=True)
    assert rows_of(store, info) == rows_of(store, full)
    assert (info.file_count, info.total_bytes) == (full.file_count, full.total_bytes)
    read = repository(store).catalog.read
    assert read(info.session, info.name).tree == read(full.session, full.name).tree


@pytest.fixture
def trusting(monkeypatch: pytest.MonkeyPatch) -> None:
    """No racy window: files written by the test just before a create are not read again by
    the next one, so the creates build on their parents as they would on an older tree."""
    monkeypatch.setattr(statcache, "RACY_NS", -1)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=edits.batches(), paths=st.sampled_from([["."], ["a", "c.txt", "b/a", "missing"]]))
def test_random_edits_seen_by_the_watch_record_what_full_creates_record(
    batches: list[list[edits.Edit]], paths: list[str]
):
    """The property the watch and the incremental create promise together: whatever the
    edits, a watched checkpoint equals a full create made right after it (or both fail
    alike), and every one after the first builds on the one before."""
    with tempfile.TemporaryDirectory() as scratch, pytest.MonkeyPatch.context() as patch:
        patch.setattr(statcache, "RACY_NS", -1)
        base, root = Path(scratch) / "p", Path(scratch) / "store"
        edits.make_initial(base)
        store = SnapStore(root, durable=False)
        watches = WatchSet(str(root))
        arguments = arguments_for(base, paths)
        try:
            _, status = watches.create(store, dict(arguments), None)
            assert status["scan"] == "full"
            previous_ok = True
            for batch in batches:
                for edit in batch:
                    edits.apply(base, edit)
                previous_ok = _check_one(store, watches, arguments, previous_ok)
        finally:
            watches.close()


def _check_one(
    store: SnapStore, watches: WatchSet, arguments: dict[str, Any], previous_ok: bool
) -> bool:
    base, paths = Path(arguments["base_dir"]), arguments["paths"]
    try:
        info, status = watches.create(store, dict(arguments), None)
    except SnapstoreError as error:
        with pytest.raises(type(error)):
            store.create("s", "full", paths, base_dir=base, rehash=True)
        return False
    assert status["scan"] == "incremental" or not previous_ok, status
    same_as_full(store, info, base, paths)
    return True


def test_a_queue_overflow_means_a_full_scan_then_incremental_ones_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, trusting: None
):
    monkeypatch.setattr(
        TreeWatcher, "start", functools.partialmethod(TreeWatcher.start, follow=False)
    )
    base = tmp_path / "p"
    write_tree(base, {"a.txt": "a", "b.txt": "b", "sub/c.txt": "c"})
    store = SnapStore(tmp_path / "store", durable=False)
    watches = WatchSet(str(tmp_path / "store"))
    arguments = arguments_for(base, ["."])
    try:
        watches.create(store, dict(arguments), None)
        limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
        descriptors = [os.open(base / name, os.O_WRONLY) for name in ("a.txt", "b.txt")]
        try:
            for index in range(limit + 10):
                os.write(descriptors[index % 2], b"x")
        finally:
            for fd in descriptors:
                os.close(fd)
        (base / "sub/new.txt").write_text("lost in the overflow\n")
        info, status = watches.create(store, dict(arguments), None)
        assert status["scan"] == "full"
        assert status["reason"] == "the inotify event queue overflowed"
        same_as_full(store, info, base, ["."])
        (base / "sub/new.txt").write_text("after the watches were rebuilt\n")
        info, status = watches.create(store, dict(arguments), None)
        assert status["scan"] == "incremental" and status["rescanned"] == 1
        assert store.read("s", "n", "sub/new.txt") == b"after the watches were rebuilt\n"
        same_as_full(store, info, base, ["."])
    finally:
        watches.close()


def test_a_change_made_during_a_create_is_in_the_next_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, trusting: None
):
    """A checkpoint records the tree as of the moment it took its change set; a file changed
    while it reads others keeps its earlier entry there, and the next checkpoint reads it."""
    base = tmp_path / "p"
    write_tree(base, {"read.txt": "one\n", "other.txt": "before\n"})
    store = SnapStore(tmp_path / "store", durable=False)
    watches = WatchSet(str(tmp_path / "store"))
    arguments = arguments_for(base, ["."])
    real = ingest.open_source

    def changing_another_file(path: str, dir_fd: int | None = None) -> int:
        (base / "other.txt").write_text("changed during the create\n")
        return real(path, dir_fd)

    try:
        watches.create(store, dict(arguments), None)
        (base / "read.txt").write_text("two\n")
        monkeypatch.setattr(ingest, "open_source", changing_another_file)
        info, status = watches.create(store, dict(arguments), None)
        monkeypatch.setattr(ingest, "open_source", real)
        assert status["scan"] == "incremental"
        assert store.read("s", "n", "read.txt") == b"two\n"
        assert store.read("s", "n", "other.txt") == b"before\n"
        info, status = watches.create(store, dict(arguments), None)
        assert status["scan"] == "incremental" and status["rescanned"] == 1
        assert store.read("s", "n", "other.txt") == b"changed during the create\n"
        same_as_full(store, info, base, ["."])
    finally:
        watches.close()


def test_a_create_that_waits_for_a_restore_records_the_tree_after_it(
    tmp_path: Path, trusting: None
):
    """The change set is taken once the base directory's lock is held: what a restore (or
    anything else) changes while the create waits is in it."""
    base = tmp_path / "p"
    write_tree(base, {"kept.txt": "kept\n", "restored.txt": "before\n"})
    store = SnapStore(tmp_path / "store", durable=False)
    watches = WatchSet(str(tmp_path / "store"))
    arguments = arguments_for(base, ["."])
    results: list[Any] = []
    try:
        watches.create(store, dict(arguments), None)
        with target_locks(store).restoring(os.path.realpath(base)):
            waiting = threading.Thread(
                target=lambda: results.append(watches.create(store, dict(arguments), None))
            )
            waiting.start()
            time.sleep(0.3)
            assert waiting.is_alive()
            (base / "restored.txt").write_text("written while the create waited\n")
        waiting.join(30)
        (info, status) = results[0]
        assert status["scan"] == "incremental"
        assert store.read("s", "n", "restored.txt") == b"written while the create waited\n"
        same_as_full(store, info, base, ["."])
    finally:
        watches.close()


def test_a_replaced_base_directory_means_a_full_scan(tmp_path: Path, trusting: None):
    base = tmp_path / "p"
    write_tree(base, {"a.txt": "a\n"})
    store = SnapStore(tmp_path / "store", durable=False)
    watches = WatchSet(str(tmp_path / "store"))
    arguments = arguments_for(base, ["."])
    try:
        watches.create(store, dict(arguments), None)
        os.rename(base, tmp_path / "moved")
        write_tree(base, {"a.txt": "a\n", "b.txt": "in the new directory\n"})
        info, status = watches.create(store, dict(arguments), None)
        assert status["scan"] == "full" and status["reason"] in (
            "the base directory was moved or deleted",
            f"{base} is no longer the directory being watched",
        )
        same_as_full(store, info, base, ["."])
    finally:
        watches.close()


def test_a_server_killed_mid_create_leaves_the_old_checkpoint_or_the_new_one(tmp_path: Path):
    """``kill -9`` while a watched create reads the files it found changed: the store holds
    the checkpoint before or the complete new one and verifies; the next server, whose watch
    starts afresh, scans everything and records what a full create records."""
    base, root = tmp_path / "p", tmp_path / "store"
    write_tree(base, {f"d{i % 20}/f{i}.bin": os.urandom(8192) for i in range(1500)})
    params = {"session": "s", "name": "n", "paths": ["."], "base_dir": str(base), "watch": True}
    server = Server(root, tmp_path)
    try:
        server.call("create", params)
        before = rows_of(SnapStore(root), SnapStore(root).get("s", "n").info)
        for path in sorted(base.rglob("*.bin")):
            path.write_bytes(os.urandom(8192))
        server.send("create", {**params, "progress": True})
        assert server.read_message()["method"] == "progress"
        server.process.send_signal(signal.SIGKILL)
        assert server.process.wait(30) == -signal.SIGKILL
    finally:
        server.close()
    store = SnapStore(root)
    after = rows_of(store, store.get("s", "n").info)
    full = store.create("s", "full", ["."], base_dir=base, rehash=True)
    assert after in (before, rows_of(store, full))
    assert store.verify(deep=True).ok
    with Server(root, tmp_path) as again:
        result = again.call("create", params)
        assert result["watch"]["scan"] == "full"
        assert result["watch"]["reason"] == "the watch has just started"
    same_as_full(store, store.get("s", "n").info, base, ["."])
