"""A fold of appendable packs: their writers append under the gc lock held shared, so the
fold checks and deletes them only within its barrier's exclusive instant (see
docs/concurrency.md, "Small packs fold themselves", "Appendable packs")."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from helpers.fork import ChildProcess
from helpers.seam import FastFileSystem

from snapstore import SnapStore
from snapstore.internals import repository
from snapstore.maintenance.fold import drop_sources, unindex_sources, write_merged
from snapstore.maintenance.foldpolicy import FoldPolicy

APPEND_WAIT = 2.0
"""Seconds the fold gives the writer to append at the instant of its first pack unlink."""


def wait_for(path: Path, limit: float = 30.0) -> bool:
    deadline = time.monotonic() + limit
    while not path.exists():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def edit(base: Path, name: str, text: str) -> None:
    base.mkdir(parents=True, exist_ok=True)
    (base / name).write_text(text)


def pack_files(root: Path) -> set[str]:
    return {path.stem for path in (root / "packs").glob("*.pack")}


def writer_keeping_its_pack_open(root: Path, base: Path, signals: Path) -> ChildProcess:
    """A process that leaves three closed appendable packs and one it keeps appending to
    (snapshot ``w1``), says ``ready``, and on ``go`` checkpoints ``w2`` (one new blob,
    appended to its open pack if that is still in place), then says ``done``."""

    def work() -> None:
        store = SnapStore(root, fold_threshold=0, lock_timeout=30)
        for n in range(3):
            edit(base, f"f{n}.txt", f"file {n}\n")
            store.create("s", f"p{n}", ["."], base_dir=base)
            repository(store).blobs.close()  # a pack each, as processes of their own leave
        edit(base, "w.txt", "writer\n")
        store.create("s", "w1", ["."], base_dir=base)
        (signals / "ready").touch()
        assert wait_for(signals / "go")
        edit(base, "w.txt", "writer, appended while the fold deletes\n")
        store.create("s", "w2", ["."], base_dir=base)
        (signals / "done").touch()

    return ChildProcess(work)


def test_a_fold_never_deletes_an_appendable_pack_its_writer_appends_to_meanwhile(
    tmp_path: Path,
) -> None:
    """The writer is let append to its pack at the instant the fold unlinks the first folded
    pack, after the fold judged whether they grew. Judged and unlinked under a shared hold,
    the append goes into a pack that is then unlinked, and ``w2`` names a blob stored
    nowhere; within the exclusive instant the writer waits, finds its pack gone, and
    starts another."""
    root, base, signals = tmp_path / "store", tmp_path / "p", tmp_path / "signals"
    signals.mkdir()
    writer = writer_keeping_its_pack_open(root, base, signals)
    assert wait_for(signals / "ready")

    class AppendingAtTheFirstPackUnlink(FastFileSystem):
        def unlink(self, path: str, *, dir_fd: int | None = None) -> None:
            if path.endswith(".pack") and not (signals / "go").exists():
                (signals / "go").touch()
                wait_for(signals / "done", APPEND_WAIT)
            super().unlink(path, dir_fd=dir_fd)

    folder = repository(
        SnapStore(root, fs=AppendingAtTheFirstPackUnlink(), fold_threshold=0, lock_timeout=10)
    )
    fold = write_merged(folder, FoldPolicy(threshold=2))
    assert fold is not None and len(fold.sources) == 4
    assert drop_sources(folder, fold, wait=5.0)
    assert writer.wait(), "the writer failed (see its traceback above)"
    with SnapStore(root, fold_threshold=0) as fresh:
        assert fresh.read("s", "w2", "w.txt") == b"writer, appended while the fold deletes\n"
        assert fresh.read("s", "w1", "w.txt") == b"writer\n"
        report = fresh.verify(deep=True)
        assert report.ok, report.problems


def test_a_folds_shared_half_leaves_appendable_packs_to_its_barrier(tmp_path: Path) -> None:
    """The shared half deletes no appendable pack (a writer may be appending to one); the
    barrier deletes those that did not grow, and keeps the one that did."""
    root, base, signals = tmp_path / "store", tmp_path / "p", tmp_path / "signals"
    signals.mkdir()
    writer = writer_keeping_its_pack_open(root, base, signals)
    assert wait_for(signals / "ready")
    small = pack_files(root)
    folder = repository(SnapStore(root, fold_threshold=0, lock_timeout=10))
    fold = write_merged(folder, FoldPolicy(threshold=2))
    assert fold is not None and set(fold.sources) == small
    assert unindex_sources(folder, fold)
    assert pack_files(root) >= small  # nothing deleted under the shared hold
    (signals / "go").touch()  # the writer appends w2 to its open pack
    assert writer.wait(), "the writer failed (see its traceback above)"
    assert drop_sources(folder, fold, wait=5.0)
    kept = pack_files(root) & small
    assert len(kept) == 1  # the writer's pack, grown since the fold read it
    with SnapStore(root, fold_threshold=0) as fresh:
        assert fresh.read("s", "w2", "w.txt") == b"writer, appended while the fold deletes\n"
        report = fresh.verify(deep=True)
        assert report.ok, report.problems


def test_a_fold_on_a_thread_of_the_writers_own_process_never_deletes_its_grown_pack(
    tmp_path: Path,
) -> None:
    """The automatic fold runs on a thread of the process that keeps the pack open: one
    view, one open pack. The writer's thread checkpoints ``w2`` at the instant the fold
    unlinks its first folded pack; the pack it appends to must stay (or the append go to a
    new pack), never be deleted under ``w2``."""
    root, base = tmp_path / "store", tmp_path / "p"
    go, appended = threading.Event(), threading.Event()
    armed = threading.Event()

    class AppendingAtTheFirstPackUnlink(FastFileSystem):
        def unlink(self, path: str, *, dir_fd: int | None = None) -> None:
            if armed.is_set() and path.endswith(".pack") and not go.is_set():
                go.set()
                appended.wait(APPEND_WAIT)
            super().unlink(path, dir_fd=dir_fd)

    store = SnapStore(root, fs=AppendingAtTheFirstPackUnlink(), fold_threshold=0, lock_timeout=30)
    repo = repository(store)
    for n in range(3):
        edit(base, f"f{n}.txt", f"file {n}\n")
        store.create("s", f"p{n}", ["."], base_dir=base)
        repo.blobs.close()
    edit(base, "w.txt", "writer\n")
    store.create("s", "w1", ["."], base_dir=base)
    fold = write_merged(repo, FoldPolicy(threshold=2))
    assert fold is not None and len(fold.sources) == 4
    armed.set()
    dropped: list[bool] = []
    folding = threading.Thread(target=lambda: dropped.append(drop_sources(repo, fold, wait=5.0)))
    folding.start()
    assert go.wait(10)
    edit(base, "w.txt", "writer, appended while the fold deletes\n")
    store.create("s", "w2", ["."], base_dir=base)
    appended.set()
    folding.join()
    assert dropped == [True]
    with SnapStore(root, fold_threshold=0) as fresh:
        assert fresh.read("s", "w2", "w.txt") == b"writer, appended while the fold deletes\n"
        report = fresh.verify(deep=True)
        assert report.ok, report.problems
