"""A fold thread yields to the creates of its store: it copies and deletes only while no
create of the store is in progress in its process (within a bounded wait, so a store that
never stops creating still folds), and a process killed while its fold waits leaves a store
that reads, verifies and folds as before."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from snapstore import SnapStore
from snapstore.internals import autofold, repository
from snapstore.maintenance import autofold as autofold_module

WAIT_FOR_THREAD = 30.0


def pack_count(root: Path) -> int:
    return sum(1 for name in (root / "packs").iterdir() if name.suffix == ".pack")


def content(number: int) -> bytes:
    return f"version {number}\n".encode() * 3


def checkpoint(store: SnapStore, project: Path, number: int) -> None:
    project.mkdir(exist_ok=True)
    (project / "f.txt").write_bytes(content(number))
    store.create("s", f"c{number:03d}", ["f.txt"], base_dir=project)


def small_packs(tmp_path: Path, count: int = 4) -> Path:
    """A store with ``count`` checkpoints of session "s", a small pack each."""
    root = tmp_path / "store"
    with SnapStore(root, fold_threshold=0) as writer:
        for number in range(count):
            checkpoint(writer, tmp_path / "p", number)
            repository(writer).blobs.close()  # a pack each, as processes of their own leave
    return root


def assert_all_readable(root: Path, count: int) -> None:
    with SnapStore(root, fold_threshold=0) as fresh:
        for number in range(count):
            assert fresh.read("s", f"c{number:03d}", "f.txt") == content(number)
        report = fresh.verify(deep=True)
        assert report.ok, report.problems


def wait_until(condition: object, what: str) -> None:
    deadline = time.monotonic() + WAIT_FOR_THREAD
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.005)


@pytest.fixture
def patient(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fold that waits for creates as long as the test needs."""
    monkeypatch.setattr(autofold_module, "PAUSE_LIMIT", 60.0)
    monkeypatch.setattr(autofold_module, "PAUSE_BUDGET", 60.0)


@pytest.mark.usefixtures("patient")
def test_a_fold_waits_for_the_create_in_progress_then_folds(tmp_path: Path) -> None:
    root = small_packs(tmp_path)
    store = SnapStore(root, fold_threshold=4)
    folding = autofold(store)
    with folding.creating():
        folding.after_commit()
        wait_until(lambda: folding.gate.waiting > 0, "the fold waits for the create")
        assert folding.steps == 0
        assert pack_count(root) == 4
    store.close()
    assert folding.steps == 1
    assert pack_count(root) == 1
    assert_all_readable(root, 4)


def test_a_create_counts_as_in_progress_from_its_start_to_its_return(tmp_path: Path) -> None:
    """What the fold thread waits for is the whole create: its checks, its scan, its
    commit, and the start of the fold thread itself."""
    seen: list[bool] = []
    project = tmp_path / "p"
    project.mkdir()
    (project / "f.txt").write_bytes(b"x" * 100)
    with SnapStore(tmp_path / "store") as store:
        gate = autofold(store).gate

        def progress(done: int, total: int) -> None:
            seen.append(gate.busy)

        store.create("s", "a", ["f.txt"], base_dir=project, progress=progress)
        assert seen and all(seen)
        assert not gate.busy


def test_a_store_that_never_stops_creating_still_folds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(autofold_module, "PAUSE_LIMIT", 0.01)
    monkeypatch.setattr(autofold_module, "PAUSE_BUDGET", 0.05)
    root = small_packs(tmp_path)
    store = SnapStore(root, fold_threshold=4)
    folding = autofold(store)
    with folding.creating():
        folding.after_commit()
        folding.join()
    assert folding.steps == 1
    assert pack_count(root) == 1
    store.close()
    assert_all_readable(root, 4)


@pytest.mark.usefixtures("patient")
def test_a_fold_stops_waiting_for_creates_once_a_gc_announced_itself(tmp_path: Path) -> None:
    """While a gc waits for the fold's shared hold of the gc lock, the creates of the store
    wait for the gc: the fold then goes on without waiting for them."""
    store = SnapStore(small_packs(tmp_path), fold_threshold=4)
    folding = autofold(store)
    assert not folding.gc_announced()
    with folding.creating():
        with repository(store).gc_intent.exclusive():
            assert folding.gc_announced()
            waits: list[float] = []
            folding.gate.wait_idle = lambda limit: waits.append(limit) or False  # type: ignore[method-assign]
            hurried = autofold_module.Yielder(folding.gate, folding.gc_announced, budget=60.0)
            hurried._slice_end = 0.0
            hurried()
            hurried._slice_end = 0.0
            hurried()
            assert waits == [] and hurried.left == 0.0
        patient = autofold_module.Yielder(folding.gate, folding.gc_announced, budget=60.0)
        patient._slice_end = 0.0
        patient()
        assert waits == [autofold_module.PAUSE_LIMIT]
    store.close()


@pytest.mark.usefixtures("patient")
def test_creates_in_another_thread_while_the_fold_waits(tmp_path: Path) -> None:
    """The fold waits (holding nothing a create needs) while creates of the same store go
    on; then it folds the packs, and every checkpoint reads back."""
    root = small_packs(tmp_path)
    store = SnapStore(root, fold_threshold=4)
    folding = autofold(store)
    with folding.creating():
        folding.after_commit()
        wait_until(lambda: folding.gate.waiting > 0, "the fold waits for the create")
        for number in range(4, 8):
            checkpoint(store, tmp_path / "p", number)
        assert folding.steps == 0
    store.close()
    assert folding.steps >= 1
    assert pack_count(root) < 8
    assert_all_readable(root, 8)


def test_a_process_killed_while_its_fold_waits_mid_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed while its fold thread holds the gc lock shared and has copied part of the
    small packs (waiting for a create): nothing is lost, and the next fold folds them."""
    root = small_packs(tmp_path)
    pid = os.fork()
    if pid == 0:
        try:
            monkeypatch.setattr(autofold_module, "SLICE_SECONDS", 0.0)
            pauses = 0
            original = autofold_module.Yielder.__call__

            def pause_then_die(self: autofold_module.Yielder) -> None:
                nonlocal pauses
                pauses += 1
                if pauses == 3:
                    os.kill(os.getpid(), signal.SIGKILL)
                original(self)

            monkeypatch.setattr(autofold_module.Yielder, "__call__", pause_then_die)
            store = SnapStore(root, fold_threshold=4)
            folding = autofold(store)
            with folding.creating():
                folding.after_commit()
                folding.join()
        finally:
            os._exit(3)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == -signal.SIGKILL
    assert_all_readable(root, 4)
    with SnapStore(root, fold_threshold=2) as store:
        checkpoint(store, tmp_path / "p", 4)
        autofold(store).join()
        assert autofold(store).steps >= 1
    assert_all_readable(root, 5)
