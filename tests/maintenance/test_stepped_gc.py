"""gc works in steps: creates go on while it marks, and a create that commits between its
steps never loses a blob, even one gc had found unreferenced."""

from __future__ import annotations

import multiprocessing
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers.blobs import two_file_packs
from helpers.seam import FastFileSystem, HookedFileSystem

from snapstore import SnapStore
from snapstore.errors import MissingBlobError
from snapstore.internals import repository
from snapstore.maintenance import gcnoted, gcsteps, packgc
from snapstore.maintenance.fold import drop_sources, write_merged
from snapstore.maintenance.foldpolicy import FoldPolicy
from snapstore.repo.gcjournal import GcJournal
from snapstore.repo.packset import PackSet
from snapstore.repo.trees import Marks

SMALL = b"small content reused after gc marked it\n"
LARGE = b"large content, stored loose\n" * 200_000  # over the pack threshold: a loose blob


def _write(base: Path, data: bytes) -> None:
    base.mkdir(parents=True, exist_ok=True)
    (base / "file.bin").write_bytes(data)


@pytest.mark.parametrize("content", [SMALL, LARGE], ids=["packed", "loose"])
def test_a_create_between_marking_and_deleting_keeps_the_blob_it_reuses(
    root: Path, tmp_path: Path, content: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = tmp_path / "base"
    _write(base, content)
    store = SnapStore(root, fold_threshold=0, lock_timeout=10)
    store.create("s", "first", ["."], base_dir=base)
    store.delete("s", "first")  # its blob is garbage now
    original = packgc.prepare

    def create_while_gc_copies(*args: Any, **kwargs: Any) -> packgc.PackWork:
        work = original(*args, **kwargs)
        other = SnapStore(root, fold_threshold=0, lock_timeout=10)
        other.create("s", "again", ["."], base_dir=base)  # reuses the garbage blob
        other.close()
        return work

    monkeypatch.setattr(packgc, "prepare", create_while_gc_copies)
    report = store.gc()
    assert not report.skipped and not report.problems
    fresh = SnapStore(root)
    assert fresh.read("s", "again", "file.bin") == content
    assert fresh.verify(deep=True).ok


def test_without_noting_commits_the_reused_blob_would_be_lost(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The test above fails if commits are not noted: what the journal is for."""
    monkeypatch.setattr(GcJournal, "note", lambda self, name: None)
    with pytest.raises(MissingBlobError):
        test_a_create_between_marking_and_deleting_keeps_the_blob_it_reuses(
            root, tmp_path, SMALL, monkeypatch
        )


def test_a_create_started_while_gc_marks_finishes_before_gc_does(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """gc marks holding the gc lock shared: a create started meanwhile commits at once,
    instead of waiting for the whole collection."""
    base = tmp_path / "base"
    _write(base, b"one\n")
    store = SnapStore(root, fold_threshold=0, lock_timeout=30)
    for n in range(3):
        (base / "file.bin").write_bytes(f"version {n}\n".encode())
        store.create("s", f"n{n}", ["."], base_dir=base)
    store.delete("s", "n0")
    finished: list[bool] = []
    original = Marks.add_manifest

    def create_during_marking(self: Marks, *args: Any) -> None:
        original(self, *args)
        if finished:
            return
        other = SnapStore(root, fold_threshold=0, lock_timeout=30)

        def create() -> None:
            (tmp_path / "other").mkdir(exist_ok=True)
            (tmp_path / "other" / "x.txt").write_text("during gc\n")
            other.create("t", "during", ["."], base_dir=tmp_path / "other")

        thread = threading.Thread(target=create)
        thread.start()
        thread.join(timeout=20)
        finished.append(not thread.is_alive())
        thread.join()
        other.close()

    monkeypatch.setattr(Marks, "add_manifest", create_during_marking)
    report = store.gc()
    assert finished == [True]
    assert not report.skipped
    assert SnapStore(root).read("t", "during", "x.txt") == b"during gc\n"


def test_gc_deletes_in_several_short_holds(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gcsteps, "STEP_ITEMS", 3)
    base = tmp_path / "base"
    store = SnapStore(root, fold_threshold=0, lock_timeout=10)
    for n in range(12):
        _write(base, f"version {n}\n".encode())
        store.create("s", f"n{n}", ["."], base_dir=base)
        repository(store).blobs.close()  # a pack each, as processes of their own leave
    for n in range(10):
        store.delete("s", f"n{n}")
    runs: list[gcsteps.StepResult] = []
    original = gcsteps.Steps.run

    def recorded(self: gcsteps.Steps) -> gcsteps.StepResult:
        result = original(self)
        runs.append(result)
        return result

    monkeypatch.setattr(gcsteps.Steps, "run", recorded)
    report = store.gc()
    assert report.packs_deleted >= 10
    assert runs[0].steps >= 4  # 10 packs and more, 3 per step
    fresh = SnapStore(root)
    assert [i.name for i in fresh.list()] == ["n10", "n11"]
    assert fresh.verify(deep=True).ok


def test_a_second_gc_is_skipped_while_one_runs(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = tmp_path / "base"
    _write(base, b"x\n")
    store = SnapStore(root, fold_threshold=0, lock_timeout=10)
    store.create("s", "n", ["."], base_dir=base)
    reports = []
    original = packgc.prepare

    def second_gc(*args: Any, **kwargs: Any) -> packgc.PackWork:
        reports.append(SnapStore(root, lock_timeout=1).gc())
        return original(*args, **kwargs)

    monkeypatch.setattr(packgc, "prepare", second_gc)
    assert not store.gc().skipped
    assert reports[0].skipped and reports[0].locked
    assert "gc-run" in (reports[0].reason or "")


def test_a_journal_left_by_a_dead_gc_is_ignored(root: Path, tmp_path: Path) -> None:
    """A token without a running gc (its holder died) makes commits note nothing."""
    base = tmp_path / "base"
    _write(base, b"x\n")
    store = SnapStore(root, fold_threshold=0)
    store.create("s", "a", ["."], base_dir=base)
    cache = root / "cache"
    (cache / "gc-marking").write_text("0123456789abcdef")
    store.create("s", "b", ["."], base_dir=base)
    assert not [p for p in cache.iterdir() if p.name.startswith("gc-noted-")]
    report = store.gc()
    assert not report.skipped
    assert not (cache / "gc-marking").exists()


def _churn(root: str, base: str, session: str, rounds: int) -> None:
    """Create and delete snapshots whose contents come back again and again (so creates keep
    reusing blobs a concurrent gc may have found unreferenced)."""
    store = SnapStore(root, fold_threshold=0, lock_timeout=60)
    folder = Path(base)
    folder.mkdir(parents=True, exist_ok=True)
    for n in range(rounds):
        (folder / "a.txt").write_text(f"content {n % 4}\n")
        (folder / "b.bin").write_bytes(bytes([n % 3]) * (300_000 if n % 5 == 0 else 10))
        store.create(session, f"n{n}", ["."], base_dir=folder)
        if n >= 2:
            store.delete(session, f"n{n - 2}")
    store.close()


def _check_every_snapshot(root: Path) -> None:
    fresh = SnapStore(root)
    for info in fresh.list():
        entries = fresh.get(info.session, info.name).entries
        for entry in entries:
            if entry.kind == "file":
                fresh.read(info.session, info.name, entry.path)
    report = fresh.verify(deep=True)
    assert report.ok, report.problems


def test_creates_in_threads_while_gc_runs_in_steps_lose_nothing(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gcsteps, "STEP_ITEMS", 2)
    SnapStore(root)
    threads = [
        threading.Thread(target=_churn, args=(str(root), str(tmp_path / f"b{k}"), f"s{k}", 30))
        for k in range(3)
    ]
    for thread in threads:
        thread.start()
    collector = SnapStore(root, lock_timeout=60)
    while any(thread.is_alive() for thread in threads):
        assert not collector.gc().problems
    for thread in threads:
        thread.join()
    assert not collector.gc().problems
    _check_every_snapshot(root)


def test_creates_in_processes_while_gc_runs_in_steps_lose_nothing(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gcsteps, "STEP_ITEMS", 2)
    SnapStore(root)
    context = multiprocessing.get_context("fork")
    workers = [
        context.Process(target=_churn, args=(str(root), str(tmp_path / f"b{k}"), f"s{k}", 25))
        for k in range(2)
    ]
    for worker in workers:
        worker.start()
    collector = SnapStore(root, lock_timeout=60)
    while any(worker.is_alive() for worker in workers):
        assert not collector.gc().problems
    for worker in workers:
        worker.join()
        assert worker.exitcode == 0
    assert not collector.gc().problems
    _check_every_snapshot(root)


def test_a_process_that_followed_an_earlier_step_does_not_count_on_a_pack_a_later_one_drops(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every step that drops packs starts a new pack log: a process whose view followed the
    log of an earlier step lists the packs again, instead of reusing a blob of a pack a later
    step dropped (and committing a snapshot that names a missing blob)."""
    monkeypatch.setattr(gcsteps, "STEP_ITEMS", 1)
    base = tmp_path / "base"
    store = SnapStore(root, fold_threshold=0, lock_timeout=10)
    contents = [f"garbage {n}\n".encode() for n in range(5)]
    for n, content in enumerate(contents):
        _write(base, content)
        (base / "file.bin").rename(base / f"f{n}.bin")
        store.create("s", f"g{n}", [f"f{n}.bin"], base_dir=base)
        repository(store).blobs.close()  # a pack each, as processes of their own leave
        store.delete("s", f"g{n}")
    bridge = SnapStore(root, fold_threshold=0, lock_timeout=10)
    other = tmp_path / "other"
    _write(other, b"unrelated\n")
    bridge.create("b", "before", ["."], base_dir=other)
    calls: list[int] = []
    original = PackSet.remove_unindexed

    def between_steps(self: Any, pack_ids: list[str]) -> None:
        original(self, pack_ids)
        calls.append(len(pack_ids))
        if len(calls) == 1:
            assert bridge.read("b", "before", "file.bin") == b"unrelated\n"  # follows the log
        if len(calls) == len(contents):
            bridge.create("b", "reuse", [f"f{n}.bin" for n in range(5)], base_dir=base)

    monkeypatch.setattr(PackSet, "remove_unindexed", between_steps)
    assert not store.gc().problems
    assert len(calls) == len(contents)
    fresh = SnapStore(root)
    for n, content in enumerate(contents):
        assert fresh.read("b", "reuse", f"f{n}.bin") == content
    assert fresh.verify(deep=True).ok


def test_a_fold_deletes_nothing_while_a_gc_runs(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """gc counts on the packs it planned with staying; a fold that deleted its sources while
    gc drops the fold's merged pack (as garbage, or a copy of what a kept pack holds) would
    leave a blob in neither. So between gc's steps a fold deletes nothing, and runs later."""
    base = tmp_path / "base"
    store = SnapStore(root, fold_threshold=0, lock_timeout=10)
    for n in range(4):
        _write(base, f"version {n}\n".encode())
        store.create("s", f"n{n}", ["."], base_dir=base)
        repository(store).blobs.close()  # a pack each, as processes of their own leave
    folder = SnapStore(root, fold_threshold=0)
    fold = write_merged(repository(folder), FoldPolicy(threshold=2))
    assert fold is not None
    dropped: list[bool] = []
    original = PackSet.remove_unindexed

    def fold_between_steps(self: Any, pack_ids: list[str]) -> None:
        original(self, pack_ids)
        if not dropped:
            dropped.append(drop_sources(repository(folder), fold))

    monkeypatch.setattr(PackSet, "remove_unindexed", fold_between_steps)
    assert not store.gc().problems
    assert dropped == [False]
    monkeypatch.setattr(PackSet, "remove_unindexed", original)
    assert drop_sources(repository(folder), fold)  # after the gc: done, or no longer needed
    fresh = SnapStore(root)
    for n in range(4):
        assert fresh.read("s", f"n{n}", "file.bin") == f"version {n}\n".encode()
    assert fresh.verify(deep=True).ok


class HeldCommit(HookedFileSystem):
    """Holds the rename that commits a manifest (after the commit was noted for gc) until
    ``release`` is set; ``noted`` is set when it is reached."""

    def __init__(self) -> None:
        super().__init__()
        self.noted = threading.Event()
        self.release = threading.Event()

    def replace(self, src: str, dst: str, **kw: Any) -> None:
        if dst.endswith(".manifest") and not self.noted.is_set():
            self.noted.set()
            assert self.release.wait(30), "gc never marked"
        super().replace(src, dst, **kw)


def test_a_commit_gc_marks_half_way_is_marked_again_under_the_lock(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A create that replaces a snapshot notes its manifest for gc, then writes it. gc's
    look at the noted manifests before a step takes the lock may fall between the two: it
    reads the snapshot's previous manifest under that name. If that look counted the note
    as done, no step marked the new manifest, and a blob it reuses that gc had found
    unreferenced was deleted (seen in the mixed workload test: a tree of a snapshot read
    back as missing)."""
    old, reused = tmp_path / "old", tmp_path / "reused"
    _write(old, b"the snapshot's previous version\n")
    _write(reused, SMALL)
    store = SnapStore(root, fold_threshold=0, lock_timeout=10)
    store.create("s", "name", ["."], base_dir=old)
    other = SnapStore(root, fold_threshold=0, lock_timeout=10)
    other.create("s", "garbage", ["."], base_dir=reused)  # a pack of its own
    other.delete("s", "garbage")  # SMALL is unreferenced when gc marks: its pack goes
    held = HeldCommit()
    writer = SnapStore(root, fs=held, fold_threshold=0, lock_timeout=10)
    errors: list[BaseException] = []

    def replace_the_snapshot() -> None:
        try:
            writer.create("s", "name", ["."], base_dir=reused)  # reuses SMALL
        except BaseException as error:
            errors.append(error)
            held.noted.set()

    original = gcnoted.NewCommits.mark_ahead
    creator = threading.Thread(target=replace_the_snapshot)

    def mark_while_the_commit_is_half_way(
        commits: gcnoted.NewCommits, marks: Marks, clock: Callable[[], float]
    ) -> str | None:
        if not creator.is_alive() and not held.noted.is_set():
            creator.start()
            assert held.noted.wait(30)
            try:
                return original(commits, marks, clock)
            finally:
                held.release.set()
        return original(commits, marks, clock)

    monkeypatch.setattr(gcnoted.NewCommits, "mark_ahead", mark_while_the_commit_is_half_way)
    report = SnapStore(root, fold_threshold=0, lock_timeout=10).gc()
    creator.join(30)
    assert not errors, errors
    assert held.release.is_set(), "the create never reached its commit while gc ran"
    assert not report.problems
    fresh = SnapStore(root)
    assert fresh.read("s", "name", "file.bin") == SMALL
    assert fresh.verify(deep=True).ok


class SlowUnlinks(FastFileSystem):
    """A disk whose unlinks became slow after gc measured its pace: each one takes
    ``seconds`` on the clock gc's steps read (``clock``), without sleeping."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.slow = False
        self.offset = 0.0
        self.unlinks = 0

    def clock(self) -> float:
        return time.monotonic() + self.offset

    def unlink(self, path: str, *, dir_fd: int | None = None) -> None:
        if self.slow:
            self.offset += self.seconds
            self.unlinks += 1
        super().unlink(path, dir_fd=dir_fd)


def test_a_step_ends_early_when_unlinks_slow_down_and_gc_still_completes(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A step reads the clock between its deletions: when each unlink takes 5 s, a step
    makes one (the steps' pace, measured while the disk was fast, would have put 20 in the
    first step). A batch of packs whose deletions were logged but whose indexes the step had
    no time to unlink is checked and logged again by later steps; gc deletes everything."""
    seam = SlowUnlinks(seconds=5.0)
    monkeypatch.setattr(gcsteps, "monotonic", seam.clock)
    base = tmp_path / "base"
    store = two_file_packs(SnapStore(root, fs=seam, fold_threshold=0, lock_timeout=10))
    for n in range(3):  # loose blobs no snapshot names: garbage
        repository(store).blobs.put_bytes(f"garbage {n}\n".encode())
    for n in range(8):
        _write(base, f"version {n}\n".encode())
        store.create("s", f"n{n}", ["."], base_dir=base)
    for n in range(6):
        store.delete("s", f"n{n}")
    runs: list[gcsteps.StepResult] = []
    original = gcsteps.Steps.run

    def recorded(self: gcsteps.Steps) -> gcsteps.StepResult:
        seam.slow = True
        try:
            result = original(self)
        finally:
            seam.slow = False
        runs.append(result)
        return result

    monkeypatch.setattr(gcsteps.Steps, "run", recorded)
    report = store.gc()
    assert not report.skipped and not report.problems
    assert report.packs_deleted >= 6 and report.blobs_deleted >= 3 + 6
    (run,) = runs
    assert run.longest_hold < 2 * seam.seconds  # one slow unlink per hold, not a pace's worth
    assert run.steps >= 3 + report.packs_deleted  # each loose blob, each pack: a step each
    fresh = SnapStore(root)
    assert [info.name for info in fresh.list()] == ["n6", "n7"]
    assert fresh.read("s", "n7", "file.bin") == b"version 7\n"
    assert fresh.verify(deep=True).ok and not fresh.verify().garbage


def test_a_step_out_of_time_logs_only_the_packs_it_unlinks(root: Path, tmp_path: Path) -> None:
    """gc writes a pack's deletion in the pack log just before it unlinks its index: the
    packs of a batch a step has no time left for are neither logged nor unlinked, so no
    process that follows the log stops counting on a pack that stays."""
    base = tmp_path / "base"
    store = two_file_packs(SnapStore(root, fold_threshold=0))
    for n in range(3):
        _write(base, f"version {n}\n".encode())
        store.create("s", f"n{n}", ["."], base_dir=base)
    packs = repository(store).blobs.packs
    with repository(store).gc_lock.exclusive():
        packs.refresh()
        batch = packs.indexes()
        assert len(batch) == 3
        taken = packs.unindex(batch, fits=lambda unlinked: False)
    assert taken == batch[:1]
    log = (root / "packs" / "log").read_text()
    assert f"-{batch[0].pack_id}" in log
    assert not any(f"-{index.pack_id}" in log for index in batch[1:])
    assert not (root / "packs" / f"{batch[0].pack_id}.idx").exists()
    assert all((root / "packs" / f"{index.pack_id}.idx").exists() for index in batch[1:])
    assert {index.pack_id for index in packs.indexes()} == {i.pack_id for i in batch[1:]}
