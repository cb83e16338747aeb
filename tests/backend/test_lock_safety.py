"""Lock files that vanish or are replaced, and a gc that overlapping readers could starve."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from snapstore import LockTimeout, SnapStore
from snapstore.backend.filelock import FileLock
from snapstore.fs.stamps import file_id
from snapstore.internals import repository


def _holding_blobs(store: SnapStore, held: threading.Event, release: threading.Event) -> None:
    with repository(store).blobs_in_use():
        held.set()
        release.wait(10)


def test_removing_the_gc_lock_file_while_a_writer_holds_it_does_not_let_gc_in(
    root: Path, project: Path
) -> None:
    writer = SnapStore(root)
    held, release = threading.Event(), threading.Event()
    thread = threading.Thread(target=_holding_blobs, args=(writer, held, release))
    thread.start()
    try:
        assert held.wait(10)
        (root / "locks" / "gc").unlink()
        report = SnapStore(root, lock_timeout=0.3).gc()
        assert report.skipped, "gc ran while a writer held the gc lock"
    finally:
        release.set()
        thread.join()
    assert not SnapStore(root, lock_timeout=5).gc().skipped


def test_a_lock_file_replaced_between_open_and_lock_is_locked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process that opened the old file, then locked it after someone replaced the path,
    must notice and lock the file the path names now (held by another process)."""
    path = tmp_path / "lock"
    path.write_bytes(b"")
    stale = os.open(path, os.O_RDWR)
    stale_identity = file_id(os.fstat(stale))
    path.unlink()
    holder = FileLock(str(path), "namespace", timeout=1)
    late = FileLock(str(path), "namespace", timeout=0.3)
    opened = [stale]
    real_open = FileLock._open

    def open_stale_first(self: FileLock, pid: int) -> Any:
        return (opened.pop(), stale_identity, None) if opened else real_open(self, pid)

    monkeypatch.setattr(FileLock, "_open", open_stale_first)
    with holder.exclusive(), pytest.raises(LockTimeout):  # noqa: SIM117
        with late.exclusive():
            pass
    assert not opened, "the stale file was never tried"


def test_overlapping_readers_cannot_starve_gc(root: Path, project: Path) -> None:
    """Two readers whose shared holds overlap leave no moment with the gc lock free; the gc
    intent lock makes new readers wait, so gc gets in once the current holds end."""
    store = SnapStore(root, lock_timeout=5)
    store.create("s", "a", ["."], base_dir=project)
    stop = threading.Event()

    def reader(offset: float) -> None:
        time.sleep(offset)
        while not stop.is_set():
            with repository(store).blobs_in_use():
                time.sleep(0.05)

    readers = [threading.Thread(target=reader, args=(i * 0.025,)) for i in range(2)]
    for thread in readers:
        thread.start()
    try:
        time.sleep(0.2)
        report = SnapStore(root, lock_timeout=2).gc()
    finally:
        stop.set()
        for thread in readers:
            thread.join()
    assert not report.skipped, report.reason
