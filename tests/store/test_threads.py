"""Threads sharing one ``SnapStore``: every public method is safe from any number of threads."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import blake3
import pytest
from helpers.trees import read_tree, write_tree

from snapstore import SnapStore
from snapstore.internals import repository
from snapstore.repo.packs import PackWriter
from snapstore.repo.packset import PackSet

THREADS = 4
ROUNDS = 12


def _run_threads(work: Callable[[int], None]) -> None:
    """Run ``work(i)`` in THREADS threads started together; re-raise the first failure."""
    errors: list[BaseException] = []
    barrier = threading.Barrier(THREADS)

    def body(i: int) -> None:
        try:
            barrier.wait()
            work(i)
        except BaseException as error:  # reported below, on the main thread
            errors.append(error)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


def test_concurrent_creates_listings_and_reads_in_one_store(tmp_path: Path) -> None:
    """Each create packs its new small blobs; another thread's pack refresh must never drop
    a pack this thread just published (a false MissingBlobError at commit)."""
    store = SnapStore(tmp_path / "store", lock_timeout=30)
    bases = []
    for i in range(THREADS):
        base = tmp_path / f"p{i}"
        bases.append(base)

    def work(i: int) -> None:
        for round_ in range(ROUNDS):
            files = {f"f{k:02}.txt": f"thread {i} round {round_} file {k}\n" for k in range(40)}
            write_tree(bases[i], files)
            store.create(f"s{i}", f"r{round_}", ["."], base_dir=bases[i])
            assert len(store.list()) >= round_ + 1
            assert store.read(f"s{i}", f"r{round_}", "f07.txt") == files["f07.txt"].encode()
            store.sessions()

    _run_threads(work)
    assert len(store.list()) == THREADS * ROUNDS
    assert store.verify(deep=True).ok


def test_concurrent_restores_deletes_and_gc_in_one_store(tmp_path: Path) -> None:
    store = SnapStore(tmp_path / "store", lock_timeout=30)
    source = tmp_path / "src"
    write_tree(source, {f"d/f{k}.txt": f"content {k}\n" for k in range(40)})
    store.create("s", "base", ["."], base_dir=source)
    expected = read_tree(source)

    def work(i: int) -> None:
        target = tmp_path / f"t{i}"
        for round_ in range(ROUNDS):
            store.restore("s", "base", target)
            assert read_tree(target) == expected
            store.create(f"s{i}", "tmp", ["."], base_dir=target)
            store.delete(f"s{i}", "tmp")
            if round_ % 4 == i % 4:
                store.gc()
            store.list()

    _run_threads(work)
    assert store.verify(deep=True).ok


def test_a_pack_registered_during_a_refresh_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The interleaving behind a false MissingBlobError: thread A lists ``packs/``, thread B
    publishes and registers a pack, thread A then applies its (older) listing."""
    store = SnapStore(tmp_path / "store")
    packs = repository(store).blobs.packs
    real_listed = PackSet._listed
    registered: list[bytes] = []

    def publish_in_another_thread() -> None:
        writer = PackWriter(repository(store).backend)
        writer.add(blake3.blake3(b"x").digest(), b"x")
        packs.register(writer.publish())
        registered.append(blake3.blake3(b"x").digest())

    def listed_then_interleaved(self: PackSet) -> tuple[set[str], set[str]]:
        listing = real_listed(self)
        other = threading.Thread(target=publish_in_another_thread)
        other.start()
        other.join(0.5)  # with the listing done under the lock, the other thread waits
        return listing

    monkeypatch.setattr(PackSet, "_listed", listed_then_interleaved)
    packs.refresh()
    monkeypatch.setattr(PackSet, "_listed", real_listed)
    for _ in range(100):
        if registered:
            break
        time.sleep(0.01)
    assert registered and packs.locate(registered[0]) is not None


def test_concurrent_listings_of_many_snapshots(tmp_path: Path) -> None:
    """Listings share a per-process map of decoded headers, changed while others read it."""
    roots = [tmp_path / f"store{i}" for i in range(2)]
    source = tmp_path / "src"
    write_tree(source, {"a.txt": "a\n"})
    for root in roots:
        seed = SnapStore(root)
        for n in range(150):
            seed.create("s", f"n{n}", ["a.txt"], base_dir=source)

    def work(i: int) -> None:
        for round_ in range(ROUNDS):
            store = SnapStore(roots[i % 2])
            store.create("s", f"extra-{i}-{round_}", ["a.txt"], base_dir=source)
            assert len(store.list()) >= 150
            store.delete("s", f"extra-{i}-{round_}")

    _run_threads(work)
