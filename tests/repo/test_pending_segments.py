"""Segments another process appended stay pending in a view until something needs them: a
create's dedupe never loads them (a blob only there is stored again, never lost), every other
reader of the view loads them first, and gc and folds judge only a complete view."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from snapstore import SnapStore
from snapstore.format.hashing import new_hasher
from snapstore.format.packfile import PackIndex
from snapstore.internals import repository
from snapstore.maintenance.fold import drop_sources, write_merged
from snapstore.maintenance.foldpolicy import FoldPolicy
from snapstore.repo import packset, segmented
from snapstore.repo.packmap import PackMap

SAME = b"the same bytes, stored by two bridges\n"


def digest_bytes(data: bytes) -> bytes:
    hasher = new_hasher(len(data))
    hasher.update(data)
    return hasher.digest()


def _edit(base: Path, name: str, data: bytes) -> None:
    base.mkdir(parents=True, exist_ok=True)
    (base / name).write_bytes(data)


def _bridge_create(root: Path, base: Path, session: str, name: str) -> None:
    """A create by another process (a bridge of its own)."""
    code = (
        "import sys; from snapstore import SnapStore; "
        "SnapStore(sys.argv[1], fold_threshold=0).create(sys.argv[2], sys.argv[3], ['.'], "
        "base_dir=sys.argv[4])"
    )
    subprocess.run(
        [sys.executable, "-c", code, str(root), session, name, str(base)], check=True, timeout=60
    )


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The packs whose segments are loaded (``segmented.load``), in order."""
    seen: list[str] = []
    load = segmented.load

    def counted(backend: Any, pack_id: str, *args: Any) -> Any:
        seen.append(pack_id)
        return load(backend, pack_id, *args)

    monkeypatch.setattr(segmented, "load", counted)
    return seen


def _own_pack(store: SnapStore) -> str:
    return repository(store).blobs.open_pack._pack_id


def _holders(store: SnapStore, digest: bytes) -> set[str]:
    packs = repository(store).blobs.packs
    packs.refresh(full=True)
    return {location.pack_id for location in packs.locate_all(digest)}


def _started(root: Path, tmp_path: Path) -> tuple[SnapStore, Path]:
    """A bridge that made one create (its view loaded, following the pack log), and the
    other bridge's project, after that other bridge's first create and a second one that
    stored ``SAME`` in a segment appended to its pack."""
    mine = tmp_path / "mine"
    _edit(mine, "own.txt", b"mine\n")
    bridge = SnapStore(root, fold_threshold=0)
    bridge.create("b", "first", ["."], base_dir=mine)
    other = tmp_path / "other"
    _edit(other, "other.txt", b"other\n")
    _bridge_create(root, other, "a", "first")
    _edit(other, "same.txt", SAME)
    _bridge_create(root, other, "a", "second")
    return bridge, mine


def test_a_create_stores_again_a_blob_only_in_a_pending_segment(
    root: Path, tmp_path: Path, loads: list[str]
) -> None:
    bridge, mine = _started(root, tmp_path)
    loads.clear()  # its own first segment, read back once
    _edit(mine, "same.txt", SAME)
    bridge.create("b", "second", ["."], base_dir=mine)
    assert loads == []  # the create's dedupe loaded nothing the other bridge appended
    holders = _holders(bridge, digest_bytes(SAME))
    assert len(holders) == 2 and _own_pack(bridge) in holders  # a duplicate, never a loss
    for session, name, base in (("a", "second", tmp_path / "other"), ("b", "second", mine)):
        target = tmp_path / f"restored-{session}"
        bridge.restore(session, name, target)
        assert (target / "same.txt").read_bytes() == SAME
        assert SnapStore(root).read(session, name, "same.txt") == SAME
        assert sorted(p.name for p in target.iterdir()) == sorted(p.name for p in base.iterdir())
    assert SnapStore(root).verify(deep=True).ok


def test_a_create_loads_nothing_pending_when_nothing_is_shared(
    root: Path, tmp_path: Path, loads: list[str]
) -> None:
    bridge, mine = _started(root, tmp_path)
    loads.clear()  # its own first segment, read back once
    for n in range(3):
        _edit(mine, "own.txt", f"mine {n}\n".encode())
        bridge.create("b", f"e{n}", ["."], base_dir=mine)
        _edit(tmp_path / "other", "other.txt", f"other {n}\n".encode())
        _bridge_create(root, tmp_path / "other", "a", f"e{n}")
    assert loads == []
    assert repository(bridge).blobs.packs._pending  # what the other bridge appended


READERS: dict[str, Callable[[SnapStore], bool]] = {
    "locate": lambda s: repository(s).blobs.packs.locate(digest_bytes(SAME)) is not None,
    "packed_size": lambda s: repository(s).blobs.packs.packed_size(digest_bytes(SAME)) == len(SAME),
    "holds": lambda s: repository(s).blobs.packs.holds(digest_bytes(SAME)),
    "by_digest": lambda s: digest_bytes(SAME) in repository(s).blobs.packs.by_digest(),
    "indexes": lambda s: any(
        digest_bytes(SAME) in index.entries for index in repository(s).blobs.packs.indexes()
    ),
    "iter_digests": lambda s: digest_bytes(SAME) in set(repository(s).blobs.packs.iter_digests()),
    "Blobs.has": lambda s: repository(s).blobs.has(digest_bytes(SAME), len(SAME)),
    "first_missing": lambda s: (
        repository(s).blobs.first_missing(
            [("same.txt", "file", 0, len(SAME), 0, digest_bytes(SAME), None)]
        )
        is None
    ),
    "read": lambda s: s.read("a", "second", "same.txt") == SAME,
    "Blobs.size": lambda s: repository(s).blobs.size(digest_bytes(SAME)) == len(SAME),
    "damage": lambda s: repository(s).blobs.packs.damage(digest_bytes(SAME)) is None,
    "broken": lambda s: repository(s).blobs.packs.broken() == {},
    "verify": lambda s: s.verify(deep=True).ok,
}


@pytest.mark.parametrize("reader", sorted(READERS))
def test_every_complete_reader_loads_what_is_pending(
    root: Path, tmp_path: Path, loads: list[str], reader: str
) -> None:
    bridge, _ = _started(root, tmp_path)
    loads.clear()  # its own first segment, read back once
    packs = repository(bridge).blobs.packs
    with repository(bridge).blobs_in_use():  # the refresh a create or a read begins with
        assert packs._pending
        assert digest_bytes(SAME) not in packs.by_digest_possibly_stale()
        assert loads == []
        assert READERS[reader](bridge)
    assert loads  # the reader loaded the pending segments, it did not list packs/ again
    assert not packs._pending


def test_a_lookup_that_hits_loads_nothing(root: Path, tmp_path: Path, loads: list[str]) -> None:
    bridge, _ = _started(root, tmp_path)
    loads.clear()  # its own first segment, read back once
    packs = repository(bridge).blobs.packs
    with repository(bridge).blobs_in_use():
        assert bridge.read("b", "first", "own.txt") == b"mine\n"
    assert loads == [] and packs._pending


def test_the_small_packs_a_fold_counts_need_no_load(
    root: Path, tmp_path: Path, loads: list[str]
) -> None:
    bridge, _ = _started(root, tmp_path)
    loads.clear()  # its own first segment, read back once
    packs = repository(bridge).blobs.packs
    packs.refresh()
    sizes = packs.pack_sizes()
    assert loads == []
    assert sizes == {index.pack_id: index.pack_size for index in packs.indexes()}


@pytest.mark.parametrize("bound", ["segments", "bytes"])
def test_pending_segments_are_loaded_past_the_bound(
    root: Path, tmp_path: Path, loads: list[str], monkeypatch: pytest.MonkeyPatch, bound: str
) -> None:
    monkeypatch.setattr(packset, "PENDING_SEGMENTS", 3 if bound == "segments" else 1 << 30)
    monkeypatch.setattr(packset, "PENDING_BYTES", 1 << 30 if bound == "segments" else 2000)
    bridge, _ = _started(root, tmp_path)
    loads.clear()  # its own first segment, read back once
    packs = repository(bridge).blobs.packs
    packs.refresh()
    assert loads == [] and packs.pending_segments == 2  # the other bridge's two creates
    other = tmp_path / "other"
    counts = []
    while not loads:
        counts.append(packs.pending_segments)
        n = len(counts)
        _edit(other, f"n{n}.txt", bytes(range(256)) * 4 + str(n).encode())
        _bridge_create(root, other, "a", f"n{n}")
        packs.refresh()
        assert n < 20
    if bound == "segments":
        assert counts == [2, 3]  # loaded at the refresh that made four pending: past 3
    assert not packs._pending and packs.pending_segments == 0
    assert digest_bytes(SAME) in packs.by_digest_possibly_stale()


def test_a_fold_replacing_pending_segments_means_they_are_never_loaded(
    root: Path, tmp_path: Path, loads: list[str]
) -> None:
    bridge, _ = _started(root, tmp_path)
    loads.clear()  # its own first segment, read back once
    packs = repository(bridge).blobs.packs
    packs.refresh()
    pending = set(packs._pending)
    assert pending
    folder = SnapStore(root, fold_threshold=0, lock_timeout=10)
    fold = write_merged(repository(folder), FoldPolicy(threshold=2))
    assert fold is not None and pending <= set(fold.sources)
    assert drop_sources(repository(folder), fold, wait=5.0)
    loads.clear()
    packs.refresh()  # the deletion drops what was pending; the merged pack's index loads
    assert not packs._pending and packs.pending_segments == 0
    assert packs.holds(digest_bytes(SAME))
    assert bridge.read("a", "second", "same.txt") == SAME
    assert not [pack_id for pack_id in loads if pack_id in pending]


@pytest.mark.parametrize("maintenance", ["gc", "fold"])
def test_maintenance_after_creates_on_a_stale_view_keeps_every_blob(
    root: Path, tmp_path: Path, maintenance: str
) -> None:
    bridge, mine = _started(root, tmp_path)
    _edit(mine, "same.txt", SAME)
    bridge.create("b", "second", ["."], base_dir=mine)  # a duplicate of the pending copy
    for n in range(3):
        _edit(tmp_path / "other", "other.txt", f"other {n}\n".encode())
        _bridge_create(root, tmp_path / "other", "a", f"e{n}")
    assert repository(bridge).blobs.packs._pending
    bridge.delete("b", "first")
    if maintenance == "gc":
        report = bridge.gc()
        assert not report.problems
    else:
        repo = repository(bridge)
        fold = write_merged(repo, FoldPolicy(threshold=2))
        assert fold is not None
        assert drop_sources(repo, fold, wait=5.0)
    fresh = SnapStore(root)
    assert fresh.verify(deep=True).ok
    for info in fresh.list():
        target = tmp_path / f"out-{info.session}-{info.name}"
        fresh.restore(info.session, info.name, target)
    assert fresh.read("a", "e2", "other.txt") == b"other 2\n"
    assert fresh.read("a", "second", "same.txt") == SAME
    assert fresh.read("b", "second", "same.txt") == SAME


def test_only_a_creates_dedupe_asks_the_possibly_stale_view() -> None:
    """Every new caller of the opt-in is a decision to review: anything that may report a
    blob missing, or delete, must ask a complete reader instead."""
    package = Path(packset.__file__).parent.parent
    callers = sorted(
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if "by_digest_possibly_stale" in path.read_text()
    )
    assert callers == ["repo/batch.py", "repo/blobs.py", "repo/packlookups.py"]


@pytest.mark.parametrize("lookup", ["locate", "holds"])
def test_a_miss_that_crosses_another_threads_load_still_finds_the_blob(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lookup: str
) -> None:
    bridge, _ = _started(root, tmp_path)
    packs = repository(bridge).blobs.packs
    packs.refresh()
    assert packs._pending
    find, contains = PackMap.find, PackMap.__contains__
    crossed: list[bool] = []

    def then_another_thread_loads(result: Any) -> Any:
        if not crossed:  # between this lookup's miss and its look at what is pending
            crossed.append(True)
            packs._complete()
        return result

    monkeypatch.setattr(PackMap, "find", lambda m, d: then_another_thread_loads(find(m, d)))
    monkeypatch.setattr(
        PackMap, "__contains__", lambda m, d: then_another_thread_loads(contains(m, d))
    )
    digest = digest_bytes(SAME)
    assert (packs.locate(digest) is not None) if lookup == "locate" else packs.holds(digest)
    assert crossed and not packs._pending


def test_a_loaded_copy_of_the_wrong_size_makes_a_read_look_in_what_is_pending(
    root: Path, tmp_path: Path
) -> None:
    bridge, _ = _started(root, tmp_path)
    packs = repository(bridge).blobs.packs
    with repository(bridge).blobs_in_use():
        assert packs._pending
        own = packs._indexes[_own_pack(bridge)]
        digest = digest_bytes(SAME)
        wrong = PackIndex(own.pack_id, own.pack_size, {digest: (0, 0, len(SAME) + 1)}, own.blocks)
        packs._where[digest] = wrong  # a damaged or hostile index: the copy it names is wrong
        assert repository(bridge).blobs.read(digest, len(SAME)) == SAME


def test_a_forked_child_never_inherits_a_view_lock_held_at_the_fork(
    root: Path, tmp_path: Path
) -> None:
    bridge, _ = _started(root, tmp_path)
    packs = repository(bridge).blobs.packs
    packs.refresh()
    assert packs._pending
    with packs._lock:  # as a thread loading what is pending holds it
        child = os.fork()
        if child == 0:  # pragma: no cover - the child
            try:
                ok = packs.holds(digest_bytes(SAME))  # loads what is pending: takes the lock
            finally:
                os._exit(0 if ok else 1)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        done, status = os.waitpid(child, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.05)
    os.kill(child, 9)
    os.waitpid(child, 0)
    pytest.fail("the child waited for a lock its parent held at the fork")


def test_a_child_forked_during_a_listing_lists_again(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A thread listing ``packs/`` (verify, gc, a relist after a miss) has loaded a fold's
    merged pack but not yet rebuilt the map when another thread forks: the child must not
    answer from that half-built view (it would call ``SAME`` missing)."""
    bridge, _ = _started(root, tmp_path)
    folder = SnapStore(root, fold_threshold=0, lock_timeout=10)
    fold = write_merged(repository(folder), FoldPolicy(threshold=2))
    assert fold is not None and drop_sources(repository(folder), fold, wait=5.0)
    packs = repository(bridge).blobs.packs
    parent = os.getpid()
    listing, forked = threading.Event(), threading.Event()
    split = packset.split_readable

    def paused(indexes: Any) -> Any:  # every pack loaded, the map not rebuilt yet
        if os.getpid() == parent and not listing.is_set():
            listing.set()
            forked.wait(10)
        return split(indexes)

    monkeypatch.setattr(packset, "split_readable", paused)
    lister = threading.Thread(target=lambda: packs.refresh(full=True))
    lister.start()
    assert listing.wait(10)
    child = os.fork()
    if child == 0:  # pragma: no cover - the child
        try:
            ok = packs.holds(digest_bytes(SAME)) and bridge.read("a", "second", "same.txt") == SAME
        finally:
            os._exit(0 if ok else 1)
    forked.set()
    lister.join()
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert packs.holds(digest_bytes(SAME))
