"""Sweep decides from manifests on disk; gc never deletes a blob anyone still needs."""

from __future__ import annotations

import multiprocessing
import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from helpers.trees import write_tree

from snapstore import InvalidValueError, SnapStore
from snapstore.internals import repository

DAY = timedelta(days=1)


def make(store: SnapStore, base: Path, session: str, name: str, **kwargs: object) -> None:
    store.create(session, name, ["."], base_dir=base, **kwargs)  # type: ignore[arg-type]


def test_sweep_by_ttl_uses_creation_time_on_disk(store: SnapStore, project: Path) -> None:
    make(store, project, "s", "old")
    make(store, project, "s", "new")
    created = {i.name: i.created_at for i in store.list()}
    now = created["new"] + timedelta(seconds=10)
    cutoff = (now - created["old"]).total_seconds() - 0.0001
    report = store.sweep(ttl=cutoff, now=now)
    assert report.deleted == [("s", "old")]
    assert [i.name for i in store.list()] == ["new"]


def test_sweep_keep_last_per_session(store: SnapStore, project: Path) -> None:
    for name in "abcd":
        make(store, project, "one", name)
    make(store, project, "two", "x")
    report = store.sweep(keep_last=2)
    assert sorted(report.deleted) == [("one", "a"), ("one", "b")]
    assert [(i.session, i.name) for i in store.list()] == [("one", "c"), ("one", "d"), ("two", "x")]


def test_sweep_with_ttl_and_keep_last_keeps_what_either_keeps(
    store: SnapStore, project: Path
) -> None:
    for name in "abc":
        make(store, project, "s", name)
    later = datetime.now(UTC) + 10 * DAY
    report = store.sweep(ttl=DAY, keep_last=1, now=later)
    assert report.deleted == [("s", "a"), ("s", "b")]


def test_sweep_removes_expired_snapshots_and_spares_state_without_expiry(
    store: SnapStore, project: Path
) -> None:
    make(store, project, "s", "short", ttl=60)
    make(store, project, "s", "long")
    store.put_state("conn", "cursor", 5)
    later = datetime.now(UTC) + timedelta(minutes=5)
    report = store.sweep(now=later)
    assert report.deleted == [("s", "short")]
    report = store.sweep(ttl=1, now=later + 10 * DAY)
    assert report.deleted == [("s", "long")]
    assert store.get_state("conn", "cursor") == 5


def test_sweep_dry_run_deletes_nothing(store: SnapStore, project: Path) -> None:
    make(store, project, "s", "a")
    assert store.sweep(keep_last=0, dry_run=True).deleted == [("s", "a")]
    assert len(store.list()) == 1


def test_sweep_rejects_bad_arguments(store: SnapStore) -> None:
    with pytest.raises(InvalidValueError):
        store.sweep(ttl=-5)
    with pytest.raises(InvalidValueError):
        store.sweep(keep_last=-1)
    with pytest.raises(InvalidValueError):
        store.sweep(ttl="1d")  # type: ignore[arg-type]


def _create_in_child(root: str, base: str, name: str) -> None:
    SnapStore(root).create("s", name, ["."], base_dir=base)


def test_long_lived_process_never_sweeps_snapshots_made_after_it_started(
    root: Path, project: Path
) -> None:
    long_lived = SnapStore(root)
    make(long_lived, project, "s", "mine")
    assert [i.name for i in long_lived.list()] == ["mine"]
    context = multiprocessing.get_context("spawn")
    child = context.Process(target=_create_in_child, args=(str(root), str(project), "theirs"))
    child.start()
    child.join(60)
    assert child.exitcode == 0
    report = long_lived.sweep(ttl=3600)
    assert report.deleted == []
    report = long_lived.sweep(keep_last=1)
    assert report.deleted == [("s", "mine")]
    assert [i.name for i in SnapStore(root).list()] == ["theirs"]


def test_gc_frees_only_unreferenced_blobs(store: SnapStore, tmp_path: Path) -> None:
    base = tmp_path / "p"
    write_tree(base, {"shared.txt": "shared"})
    (base / "only-a.txt").write_bytes(os.urandom(1000))  # incompressible: 1000 bytes stored
    make(store, base, "s", "a")
    (base / "only-a.txt").unlink()
    write_tree(base, {"only-b.txt": "b"})
    make(store, base, "s", "b")
    assert store.gc().blobs_deleted == 0
    store.delete("s", "a")
    dry = store.gc(dry_run=True)
    # only-a.txt's blob and the root tree of "a" (its directory listing)
    assert dry.blobs_deleted == 2 and dry.bytes_freed >= 1000
    report = store.gc()
    assert (report.blobs_deleted, report.bytes_freed) == (2, dry.bytes_freed)
    assert store.verify(deep=True).ok
    assert store.read("s", "b", "shared.txt") == b"shared"


def test_gc_removes_stale_temp_files(store: SnapStore, root: Path) -> None:
    (root / "tmp" / ".snapstore-tmp-deadbeef").write_bytes(b"leftover")
    report = store.verify()
    assert report.ok and any("deadbeef" in g for g in report.garbage)
    assert store.gc().temp_files_removed == 1
    assert os.listdir(root / "tmp") == []


def test_gc_refuses_to_delete_blobs_when_a_manifest_is_corrupt(
    store: SnapStore, project: Path
) -> None:
    make(store, project, "s", "a")
    make(store, project, "s", "b")
    path = Path(repository(store).catalog.manifest_path("s", "b"))
    path.chmod(0o644)
    path.write_bytes(b"\x00" * 10)
    store.delete("s", "a")
    report = store.gc()
    assert report.skipped and report.blobs_deleted == 0 and "corrupt" in (report.reason or "")
    assert not report.locked and len(report.problems) == 1 and "corrupt" in report.problems[0]


def test_gc_is_skipped_while_a_writer_holds_blobs(root: Path, project: Path) -> None:
    store = SnapStore(root, lock_timeout=0.2)
    with repository(store).gc_lock.shared():
        report = store.gc()
    assert report.skipped and "busy" in (report.reason or "")
    assert report.locked and report.problems == []


def _writer_loop(root: str, base: str, worker: int, rounds: int) -> None:
    store = SnapStore(root)
    for index in range(rounds):
        (Path(base) / f"w{worker}.txt").write_text(f"{worker}-{index}")
        store.create(f"w{worker}", "latest", ["."], base_dir=base)


def _gc_loop(root: str, seconds: float) -> None:
    store = SnapStore(root)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        store.gc()


def test_writers_racing_gc_never_lose_a_blob(root: Path, tmp_path: Path) -> None:
    SnapStore(root)
    context = multiprocessing.get_context("fork")
    processes = []
    for worker in range(3):
        base = tmp_path / f"p{worker}"
        write_tree(base, {"common.txt": "common", "own.bin": os.urandom(50_000)})
        processes.append(
            context.Process(target=_writer_loop, args=(str(root), str(base), worker, 15))
        )
    processes.append(context.Process(target=_gc_loop, args=(str(root), 3.0)))
    for process in processes:
        process.start()
    for process in processes:
        process.join(120)
        assert process.exitcode == 0
    store = SnapStore(root)
    assert store.verify(deep=True).ok
    for worker in range(3):
        assert store.read(f"w{worker}", "latest", f"w{worker}.txt") == f"{worker}-14".encode()


def test_gc_rewriting_a_pack_never_trusts_a_loose_copy_it_has_not_read(tmp_path: Path) -> None:
    """A damaged loose duplicate of a packed blob (same size, other bytes) must not stand in
    for the packed copy when gc rewrites that pack."""
    import blake3

    base = tmp_path / "p"
    keep = os.urandom(3000)
    write_tree(base, {"keep.bin": keep, "big.bin": os.urandom(200_000)})
    root = tmp_path / "store"
    store = SnapStore(root, durable=False)
    store.create("s", "a", ["."], base_dir=base)
    (base / "big.bin").unlink()
    store.create("s", "b", ["."], base_dir=base)
    digest = blake3.blake3(keep).hexdigest()
    loose = root / "blobs" / digest[:2] / digest[2:]
    loose.parent.mkdir(parents=True, exist_ok=True)
    loose.write_bytes(b"\0" * len(keep))
    store.delete("s", "a")
    report = store.gc()
    assert report.packs_written >= 1  # the pack, mostly garbage now, was rewritten
    assert store.read("s", "b", "keep.bin") == keep


@pytest.mark.parametrize("ttl", [float("nan"), 1e300, timedelta(days=10**8)])
def test_a_ttl_that_is_nan_or_beyond_a_thousand_years_is_refused(
    tmp_path: Path, ttl: float | timedelta
) -> None:
    """A NaN TTL compares with no age, so a sweep would keep nothing; a huge one has no
    expiry date. Both are refused everywhere a TTL is taken, and nothing is deleted."""
    base = tmp_path / "p"
    write_tree(base, {"a.txt": "a"})
    store = SnapStore(tmp_path / "store")
    store.create("s", "one", ["a.txt"], base_dir=base)
    with pytest.raises(InvalidValueError):
        store.sweep(ttl=ttl)
    with pytest.raises(InvalidValueError):
        store.create("s", "two", ["a.txt"], base_dir=base, ttl=ttl)
    with pytest.raises(InvalidValueError):
        store.put_state("s", "k", 1, ttl=ttl)
    assert [info.name for info in store.list("s")] == ["one"]


def _gc_store(tmp_path: Path, rounds: int, keep_last: int) -> SnapStore:
    project = tmp_path / "p"
    project.mkdir()
    store = SnapStore(tmp_path / "store", durable=False)
    for round_ in range(rounds):
        for index in range(20):
            (project / f"f{index}.txt").write_text(f"round {round_} file {index}\n" * (50 + round_))
        store.create("s", f"n{round_}", ["."], base_dir=project)
    store.sweep(keep_last=keep_last)
    return store


@pytest.mark.parametrize("rounds, keep_last", [(6, 2), (2, 2), (5, 0), (1, 1)])
def test_gc_dry_run_reports_what_gc_then_does(tmp_path: Path, rounds: int, keep_last: int):
    """The dry run compresses and lays out the packs gc would write (writing nowhere), so
    its bytes and pack counts are gc's own (they were an uncompressed estimate)."""
    store = _gc_store(tmp_path, rounds, keep_last)
    before = sorted(p.name for p in (tmp_path / "store" / "packs").rglob("*"))
    dry = store.gc(dry_run=True)
    assert sorted(p.name for p in (tmp_path / "store" / "packs").rglob("*")) == before
    real = store.gc()
    fields = ("blobs_deleted", "bytes_freed", "packs_deleted", "packs_written")
    assert [getattr(dry, f) for f in fields] == [getattr(real, f) for f in fields]
