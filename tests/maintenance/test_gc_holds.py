"""What a gc step does while it holds the gc lock exclusively (every create waits meanwhile):
the commits made since the last step are checked there by a ``stat`` each, not read again
and not unlinked; a hold that runs out of time checking them deletes nothing, and gc still
completes, deleting only what no snapshot names."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers.blobs import two_file_packs
from helpers.seam import HookedFileSystem

from snapstore import SnapStore
from snapstore.backend import packlog
from snapstore.backend.seam import Handle, Kind
from snapstore.internals import repository
from snapstore.maintenance import gcnoted, gcsteps
from snapstore.repo.catalog import manifest_name
from snapstore.repo.gcjournal import NOTED_PREFIX
from snapstore.repo.trees import Marks


def _write(base: Path, data: bytes) -> None:
    base.mkdir(parents=True, exist_ok=True)
    (base / "file.bin").write_bytes(data)


class Counting(HookedFileSystem):
    """Counts the unlinks made while ``counting`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.counting = False
        self.unlinks = 0

    def before(self, operation: str, fd: int | None = None, data: Any = None) -> None:
        super().before(operation, fd, data)
        if self.counting and operation == "unlink":
            self.unlinks += 1


def test_a_settle_under_the_lock_marks_no_manifest_marked_ahead_and_unlinks_nothing(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Commits made while gc marked are read and marked ahead of the lock; under it each is
    checked by its bytes alone (no tree walked, no entry unlinked: that waits for the lock
    to go). One replaced after the look ahead is marked again there, even when its file's
    version looks unchanged (an inode number reused, a coarse clock)."""
    seam = Counting()
    store = SnapStore(root, fs=seam, fold_threshold=0)
    repo = repository(store)
    journal = repo.sessions.gc_journal
    base = tmp_path / "base"
    with journal.run_lock.exclusive():
        commits = gcnoted.NewCommits(repo, journal.start())
        for n in range(20):
            _write(base, f"version {n}\n".encode())
            store.create("s", f"n{n}", ["."], base_dir=base)
        marks = Marks()
        assert commits.mark_ahead(marks, time.monotonic) is None
        handle = Handle(Kind.MANIFEST, manifest_name("s", "n3"))
        before = repo.backend.stat(handle)
        _write(base, b"replaced after the look ahead\n")
        store.create("s", "n3", ["."], base_dir=base)  # a new version of a marked manifest
        original_stat = type(repo.backend).stat

        def same_version(backend: Any, asked: Handle) -> Any:
            return before if asked == handle else original_stat(backend, asked)

        monkeypatch.setattr(type(repo.backend), "stat", same_version)
        marked: list[str] = []
        original_mark = gcnoted.mark_manifest

        def counted(repo: Any, manifest: Any, marks: Marks, **kwargs: Any) -> Any:
            marked.append(manifest.info.name)
            return original_mark(repo, manifest, marks, **kwargs)

        monkeypatch.setattr(gcnoted, "mark_manifest", counted)
        seam.counting = True
        with repo.gc_lock.exclusive():
            assert commits.settle(marks, time.monotonic, time.monotonic() + 60) == (True, None)
        seam.counting = False
        assert marked == ["n3"]
        assert seam.unlinks == 0
        assert commits.settled_entries == 21
        digest = repo.blobs.put_bytes(b"replaced after the look ahead\n")
        assert digest in marks.sizes  # the version read under the lock is marked
        assert len(repo.backend.names(Kind.CACHE, NOTED_PREFIX)) == 21
        commits.release()
        assert repo.backend.names(Kind.CACHE, NOTED_PREFIX) == []
        journal.clear()


class Ticking:
    """A clock that moves ``tick`` seconds at every reading: every timed part of a step
    looks slow, so each hold checks about one noted commit before its time is up."""

    def __init__(self, tick: float) -> None:
        self.tick = tick
        self.now = 0.0

    def __call__(self) -> float:
        self.now += self.tick
        return self.now


def test_a_hold_out_of_time_while_settling_deletes_nothing_and_gc_still_completes(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Commits made while gc marks (one of them reusing a blob gc found unreferenced) are
    checked in holds so short that each checks about one: no hold deletes anything before
    every commit noted is checked, gc ends with everything it may delete deleted, and the
    reused blob stays."""
    clock = Ticking(gcsteps.STEP_SECONDS / 3)
    monkeypatch.setattr(gcsteps, "monotonic", clock)
    reused, other = tmp_path / "reused", tmp_path / "other"
    _write(reused, b"unreferenced when gc marks, reused after\n")
    store = two_file_packs(SnapStore(root, fold_threshold=0, lock_timeout=10))
    store.create("s", "garbage", ["."], base_dir=reused)
    store.delete("s", "garbage")
    for n in range(4):
        _write(other, f"old version {n}\n".encode())
        store.create("s", f"old{n}", ["."], base_dir=other)
        store.delete("s", f"old{n}")
    _write(other, b"kept\n")
    store.create("s", "kept", ["."], base_dir=other)
    writer = two_file_packs(SnapStore(root, fold_threshold=0, lock_timeout=10))
    original_ahead = gcnoted.NewCommits.mark_ahead
    made: list[int] = []

    def commit_then_mark(
        commits: gcnoted.NewCommits, marks: Marks, ticking: Callable[[], float]
    ) -> str | None:
        if not made:
            made.append(1)
            writer.create("t", "again", ["."], base_dir=reused)  # reuses the garbage blob
            for n in range(5):
                _write(tmp_path / f"w{n}", f"during gc {n}\n".encode())
                writer.create("t", f"w{n}", ["."], base_dir=tmp_path / f"w{n}")
        return original_ahead(commits, marks, ticking)

    monkeypatch.setattr(gcnoted.NewCommits, "mark_ahead", commit_then_mark)
    open_at_deletion: list[int] = []
    original_step = gcsteps.Steps._step

    def step(steps: gcsteps.Steps, deadline: float) -> Any:
        open_at_deletion.append(len(steps.commits.open))
        return original_step(steps, deadline)

    monkeypatch.setattr(gcsteps.Steps, "_step", step)
    runs: list[gcsteps.StepResult] = []
    original_run = gcsteps.Steps.run

    def recorded(steps: gcsteps.Steps) -> gcsteps.StepResult:
        runs.append(original_run(steps))
        return runs[-1]

    monkeypatch.setattr(gcsteps.Steps, "run", recorded)
    report = store.gc()
    assert not report.skipped and not report.problems
    assert set(open_at_deletion) == {0}  # no deletion while a noted commit was unchecked
    (run,) = runs
    assert run.steps > len(open_at_deletion)  # some holds only checked commits
    assert report.packs_deleted == 4  # the old versions; the reused blob's pack stays
    fresh = SnapStore(root)
    assert fresh.read("t", "again", "file.bin") == b"unreferenced when gc marks, reused after\n"
    assert fresh.read("s", "kept", "file.bin") == b"kept\n"
    assert fresh.verify(deep=True).ok and not fresh.verify().garbage
    assert repository(fresh).backend.names(Kind.CACHE, NOTED_PREFIX) == []


def test_a_new_gc_removes_an_earlier_gcs_entries_after_its_opening_hold(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Entries a gc that died left behind are removed, but not while the opening hold keeps
    every create waiting."""
    store = SnapStore(root, fold_threshold=0)
    repo = repository(store)
    for n in range(30):
        repo.backend.write(Handle(Kind.CACHE, f"{NOTED_PREFIX}dead-{n}"), b"s/x", durable=False)
    held: list[bool] = []
    original = repo.sessions.gc_journal.clear

    def clear(*, keep: str | None = None) -> None:
        held.append(_holds_gc_lock_exclusively(root))
        original(keep=keep)

    monkeypatch.setattr(repo.sessions.gc_journal, "clear", clear)
    store.gc()
    assert held and not any(held)
    assert repo.backend.names(Kind.CACHE, NOTED_PREFIX) == []


def _holds_gc_lock_exclusively(root: Path) -> bool:
    """Whether someone holds the gc lock exclusively now (a shared try fails at once)."""
    probe = SnapStore(root, fold_threshold=0, lock_timeout=0.01)
    try:
        with repository(probe).gc_lock.shared(timeout=0):
            return False
    except Exception:
        return True
    finally:
        probe.close()


def test_gc_lets_the_pack_log_grow_so_no_process_lists_the_packs_mid_gc(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new pack log makes every process list ``packs/`` at its next refresh. gc logs a
    line per pack it deletes; past the usual length (here 200 bytes, a few lines) it goes on
    appending instead of starting a new log mid-gc, so a process that follows the log
    between steps never lists, and drops every deleted pack; gc's end starts a new log."""
    monkeypatch.setattr(packlog, "RESTART_BYTES", 200)
    monkeypatch.setattr(gcsteps, "STEP_ITEMS", 2)
    base = tmp_path / "base"
    store = two_file_packs(SnapStore(root, fold_threshold=0, lock_timeout=10))
    for n in range(12):
        _write(base, f"version {n}\n".encode())
        store.create("s", f"n{n}", ["."], base_dir=base)
        store.delete("s", f"n{n}")
    follower = SnapStore(root, fold_threshold=0)
    packs = repository(follower).blobs.packs
    packs.refresh()
    listed: list[int] = []
    original_list = packs._list_all

    def counted(*, whole: bool = False) -> None:
        listed.append(1)
        original_list(whole=whole)

    monkeypatch.setattr(packs, "_list_all", counted)  # the follower's listings only
    original_note = gcsteps.Steps._note

    def and_follow(steps: gcsteps.Steps, hold: Any) -> None:
        original_note(steps, hold)
        packs.refresh()

    monkeypatch.setattr(gcsteps.Steps, "_note", and_follow)
    log = root / "packs" / "log"
    report = store.gc()
    assert report.packs_deleted == 12
    assert listed == []  # followed the log through every step
    assert packs.indexes() == []  # and dropped every pack gc deleted
    assert len(log.read_bytes()) < 100  # gc's end started a new log


def test_gc_finishes_while_every_hold_brings_more_commits_than_it_can_check(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two commits arrive before every step (as while it waits for the lock), and each hold
    has time to check about one: a hold out of time checks for twice as long the next
    time, so some hold finishes and deletes, and gc ends, keeping the blob a commit made
    during it reuses."""
    clock = Ticking(gcsteps.STEP_SECONDS / 3)
    monkeypatch.setattr(gcsteps, "monotonic", clock)
    reused = tmp_path / "reused"
    _write(reused, b"unreferenced when gc marks, reused after\n")
    store = two_file_packs(SnapStore(root, fold_threshold=0, lock_timeout=10))
    store.create("s", "garbage", ["."], base_dir=reused)
    store.delete("s", "garbage")
    for n in range(4):
        _write(tmp_path / "old", f"old version {n}\n".encode())
        store.create("s", f"old{n}", ["."], base_dir=tmp_path / "old")
        store.delete("s", f"old{n}")
    writer = two_file_packs(SnapStore(root, fold_threshold=0, lock_timeout=10))
    original_ahead = gcnoted.NewCommits.mark_ahead
    looks: list[int] = []

    def commits_keep_coming(
        commits: gcnoted.NewCommits, marks: Marks, ticking: Callable[[], float]
    ) -> str | None:
        found = original_ahead(commits, marks, ticking)
        looks.append(1)
        assert len(looks) < 60, "gc did not finish"
        writer.create("t", f"again{len(looks)}", ["."], base_dir=reused)  # reuses the garbage
        _write(tmp_path / "w", f"during gc {len(looks)}\n".encode())
        writer.create("t", f"w{len(looks)}", ["."], base_dir=tmp_path / "w")
        return found

    monkeypatch.setattr(gcnoted.NewCommits, "mark_ahead", commits_keep_coming)
    report = store.gc()
    assert not report.skipped and not report.problems
    assert report.packs_deleted == 4
    fresh = SnapStore(root)
    assert fresh.read("t", "again1", "file.bin") == b"unreferenced when gc marks, reused after\n"
    assert fresh.verify(deep=True).ok


class Ordered(HookedFileSystem):
    """Logs flushes of directories and unlinks, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[tuple[str, str]] = []

    def unlink(self, path: str, *, dir_fd: int | None = None) -> None:
        self.log.append(("unlink", path))
        super().unlink(path, dir_fd=dir_fd)

    def fsync_dir(self, path: str, *, dir_fd: int | None = None) -> None:
        self.log.append(("fsync_dir", path))
        super().fsync_dir(path, dir_fd=dir_fd)


def test_gc_makes_deletions_a_killed_deleter_left_unflushed_durable_before_deleting_blobs(
    root: Path, tmp_path: Path
) -> None:
    """A sweep flushes a session's directory once per hold; killed within one, it leaves
    manifest unlinks nobody flushed. gc, which finds those snapshots gone, flushes every
    session's directory before it deletes a blob or a pack they named: a power cut then
    cannot bring back a snapshot whose blobs are gone."""
    base = tmp_path / "base"
    store = two_file_packs(SnapStore(root, fold_threshold=0))
    for n in range(3):
        _write(base, f"version {n}\n".encode())
        store.create("s", f"n{n}", ["."], base_dir=base)
    repo = repository(store)
    repo.catalog.remove(manifest_name("s", "n0"), durable=False)  # as a killed sweep left it
    seam = Ordered()
    report = SnapStore(root, fs=seam, fold_threshold=0).gc()
    assert report.packs_deleted >= 1
    kept = Handle(Kind.MANIFEST, manifest_name("s", "n1"))
    session_dir = str(Path(repo.backend.describe(kept)).parent)
    flushed = seam.log.index(("fsync_dir", session_dir))
    first_deletion = next(
        i for i, (call, path) in enumerate(seam.log) if call == "unlink" and "/packs/" in path
    )
    assert flushed < first_deletion


def test_a_snapshot_committed_during_gc_then_deleted_unflushed_is_durably_gone_before_its_blob(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A snapshot committed while gc runs, reusing a blob gc found unreferenced, then
    deleted without a flush (a sweep in the middle of a hold, or killed in one): gc finds
    its manifest missing, and flushes its session's directory before it deletes the pack
    that held the blob, so a power cut cannot bring the snapshot back without its blob."""
    reused = tmp_path / "reused"
    _write(reused, b"garbage when gc marks, reused during gc\n")
    store = two_file_packs(SnapStore(root, fold_threshold=0))
    store.create("s", "garbage", ["."], base_dir=reused)
    store.delete("s", "garbage")
    writer = two_file_packs(SnapStore(root, fold_threshold=0))
    seam = Ordered()
    original = gcnoted.NewCommits.mark_ahead
    handle = Handle(Kind.MANIFEST, manifest_name("t", "again"))

    def commit_then_delete_unflushed(
        commits: gcnoted.NewCommits, marks: Marks, clock: Callable[[], float]
    ) -> str | None:
        if not seam.log or seam.log[0][0] != "MARK":
            writer.create("t", "again", ["."], base_dir=reused)
            seam.log.insert(0, ("MARK", ""))
            repository(writer).catalog.remove(handle.name, durable=False)
        return original(commits, marks, clock)

    monkeypatch.setattr(gcnoted.NewCommits, "mark_ahead", commit_then_delete_unflushed)
    report = two_file_packs(SnapStore(root, fs=seam, fold_threshold=0)).gc()
    assert report.packs_deleted >= 1
    session_dir = str(Path(repository(writer).backend.describe(handle)).parent)
    first_pack = next(
        i for i, (call, path) in enumerate(seam.log) if call == "unlink" and "/packs/" in path
    )
    assert ("fsync_dir", session_dir) in seam.log[:first_pack]
