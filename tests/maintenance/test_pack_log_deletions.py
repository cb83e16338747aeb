"""The pack log records deleted packs: a gc step or a fold no longer makes every other process
list ``packs/``; each drops the deleted packs from its view when it reads their lines, and
none counts on a deleted pack, in this process or another, killed or not."""

from __future__ import annotations

import errno
import multiprocessing
import os
from pathlib import Path
from typing import Any

import pytest
from helpers.blobs import two_file_packs
from helpers.fork import in_a_killed_child
from helpers.seam import KILLED_EXIT, FailingOperation, FastFileSystem

from snapstore import SnapStore
from snapstore.backend.packlog import RESTART_BYTES, PackLog, deleted_ids, published_ids
from snapstore.backend.seam import Kind
from snapstore.format.packfile import KIND_DATA
from snapstore.fs.seam import FileSystem
from snapstore.internals import repository
from snapstore.maintenance import gcsteps
from snapstore.maintenance.fold import drop_sources, write_merged
from snapstore.maintenance.foldpolicy import FoldPolicy
from snapstore.repo.packs import PackWriter
from snapstore.repo.packset import PackSet

ID_A, ID_B, ID_C = "a" * 32, "b" * 32, "c" * 32


def _log(root: Path, fs: FileSystem | None = None) -> PackLog:
    (root / "tmp").mkdir(parents=True, exist_ok=True)
    return PackLog(str(root / "log"), fs or FileSystem(), str(root / "tmp"))


def _garbage_packs(store: SnapStore, base: Path, count: int) -> list[bytes]:
    """``count`` packs holding only unreferenced blobs; their contents."""
    contents = [f"garbage {n}\n".encode() for n in range(count)]
    base.mkdir(parents=True, exist_ok=True)
    for n, content in enumerate(contents):
        (base / f"f{n}.bin").write_bytes(content)
        store.create("s", f"g{n}", [f"f{n}.bin"], base_dir=base)
        repository(store).blobs.close()  # a pack each, as processes of their own leave
        store.delete("s", f"g{n}")
    return contents


def _pack_ids(store: SnapStore) -> set[str]:
    return {index.pack_id for index in repository(store).blobs.packs.indexes()}


def _count_listings(store: SnapStore, monkeypatch: pytest.MonkeyPatch) -> list[Kind]:
    backend = repository(store).backend
    names = backend.names
    listings: list[Kind] = []

    def counted(kind: Kind, prefix: str = "") -> list[str]:
        if kind in (Kind.PACK, Kind.INDEX):
            listings.append(kind)
        return names(kind, prefix)

    monkeypatch.setattr(backend, "names", counted)
    return listings


# ---------------------------------------------------------------- the log itself


def test_deletion_lines_are_told_apart_from_publications(tmp_path: Path) -> None:
    log = _log(tmp_path)
    log.restart()
    _, start = log.read(None)
    log.add(ID_A)
    assert log.record_deletions([ID_B, ID_C])
    log.add(ID_C)
    ids, _ = log.read(start)
    assert ids == [(ID_A, None), (ID_C, None)]
    lines, _ = log.read_lines(start)
    assert lines is not None
    assert published_ids(lines) == [ID_A, ID_C]
    assert deleted_ids(lines) == [ID_B, ID_C]


def test_only_whole_lines_are_read() -> None:
    """A line is one full match of one form, or skipped: a torn line, or a line of a form
    this version does not read, is neither a publication nor a deletion."""
    torn = b"-" + ID_A[:5].encode() + ID_B.encode() + b"\n"
    assert deleted_ids(torn) == [] and published_ids(torn) == []
    assert published_ids(b"-" + ID_A.encode() + b"\n") == []
    assert published_ids(ID_A.encode() + b" 1f\n") == deleted_ids(ID_A.encode() + b" 1f\n") == []
    assert published_ids(b"x" + ID_A.encode() + b"\n" + ID_B.encode() + b"\n") == [ID_B]


def test_a_line_left_torn_by_a_failed_append_cannot_swallow_a_deletion(tmp_path: Path) -> None:
    """A publication cut short (a full disk; its writer ignores the error) ends without a
    newline; the deleter's lines start after a newline of their own, so a reader still
    reads the deletion as a whole line."""
    log = _log(tmp_path)
    log.restart()
    _, start = log.read(None)
    with open(log.path, "ab") as file:
        file.write(ID_A[:7].encode())
    assert log.record_deletions([ID_B])
    lines, _ = log.read_lines(start)
    assert lines is not None and deleted_ids(lines) == [ID_B]


def test_a_deleter_starts_a_new_log_when_there_is_none(tmp_path: Path) -> None:
    log = _log(tmp_path)
    assert not log.record_deletions([ID_A])
    _, position = log.read(None)
    assert position is not None and position.offset == 33


def test_a_long_log_is_started_again_at_a_deletion(tmp_path: Path) -> None:
    log = _log(tmp_path)
    log.restart()
    _, start = log.read(None)
    assert start is not None
    with open(log.path, "ab") as file:
        file.write((ID_A + "\n").encode() * (RESTART_BYTES // 33))
    assert not log.record_deletions([ID_B])
    ids, position = log.read(start)
    assert ids is None and position is not None and position.token != start.token
    assert os.path.getsize(log.path) == 33


def test_a_failed_append_of_a_deletion_starts_a_new_log(tmp_path: Path) -> None:
    """A reader following the log must not miss a deletion: if the line cannot be appended,
    the deleter starts a new log (every reader lists the packs)."""
    log = _log(tmp_path, FailingOperation("write", OSError(errno.ENOSPC, "full"), nth=2))
    log.restart()
    _, start = log.read(None)
    assert not log.record_deletions([ID_A])
    ids, position = log.read(start)
    assert ids is None and position is not None  # a new token: the reader lists


def test_a_deleter_that_can_neither_append_nor_start_a_log_raises(tmp_path: Path) -> None:
    """Then the caller deletes nothing (a reader could count on the pack)."""

    class Full(FileSystem):
        def write(self, fd: int, data: bytes | memoryview) -> None:
            raise OSError(errno.ENOSPC, "full")

    _log(tmp_path).restart()
    with pytest.raises(OSError):
        _log(tmp_path, Full()).record_deletions([ID_A])


# ---------------------------------------------------------------- gc and folds


def test_other_processes_follow_gc_steps_without_listing_the_packs(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each step writes the packs it drops in the pack log; a process that refreshes between
    steps drops them from its view without listing ``packs/`` (before, every step started a
    new log, and every process listed the packs and rebuilt its map after each)."""
    monkeypatch.setattr(gcsteps, "STEP_ITEMS", 1)
    store = SnapStore(root, fold_threshold=0, lock_timeout=10)
    _garbage_packs(store, tmp_path / "base", 4)
    bridge = SnapStore(root, fold_threshold=0, lock_timeout=10)
    other = tmp_path / "other"
    other.mkdir()
    (other / "file.bin").write_bytes(b"unrelated\n")
    bridge.create("b", "before", ["."], base_dir=other)
    listings = _count_listings(bridge, monkeypatch)
    seen: list[tuple[set[str], set[str]]] = []
    original = PackSet.remove_unindexed

    def between_steps(self: PackSet, pack_ids: list[str]) -> None:
        original(self, pack_ids)
        assert bridge.read("b", "before", "file.bin") == b"unrelated\n"  # a refresh
        seen.append((set(pack_ids), _pack_ids(bridge)))

    monkeypatch.setattr(PackSet, "remove_unindexed", between_steps)
    assert not store.gc().problems
    assert len(seen) >= 4
    dropped: set[str] = set()
    for gone, view in seen:
        dropped |= gone
        assert not dropped & view
    assert listings == []
    assert SnapStore(root).verify(deep=True).ok


def test_a_fold_is_followed_without_listing_and_its_blobs_stay_found(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process that follows the log through a fold's deletion lines finds every blob of
    the folded packs in the merged pack, without listing and without a miss."""
    base = tmp_path / "base"
    base.mkdir()
    store = SnapStore(root, fold_threshold=0)
    for n in range(6):
        (base / f"f{n}.txt").write_text(f"version {n}\n")
        store.create("s", f"n{n}", [f"f{n}.txt"], base_dir=base)
        repository(store).blobs.close()  # a pack each, as processes of their own leave
    reader = SnapStore(root, fold_threshold=0)
    assert reader.read("s", "n0", "f0.txt") == b"version 0\n"  # a view that lists once
    folded_before = _pack_ids(reader)
    listings = _count_listings(reader, monkeypatch)
    repo = repository(store)
    fold = write_merged(repo, FoldPolicy(threshold=2))
    assert fold is not None and drop_sources(repo, fold, wait=1.0)
    for n in range(6):
        assert reader.read("s", f"n{n}", f"f{n}.txt") == f"version {n}\n".encode()
    view = _pack_ids(reader)
    assert not view & set(fold.sources) and set(fold.sources) <= folded_before
    assert {index.pack_id for index in fold.merged} <= view
    assert listings == []


def _bridge(root: Path, count: int, base: Path, ready: Any, start: Any, done: Any) -> None:
    """A process that counts on the garbage packs (its first checkpoint reuses their blobs),
    waits for ``start``, then checkpoints the same files again, having followed the log: it
    must store them again, without listing the packs. Puts the listings it made in ``done``."""
    bridge = SnapStore(root, fold_threshold=0, lock_timeout=10)
    files = [f"f{n}.bin" for n in range(count)]
    bridge.create("b", "before", files, base_dir=base)
    listings: list[str] = []
    backend = repository(bridge).backend
    names = backend.names

    def counted(kind: Kind, prefix: str = "") -> list[str]:
        if kind in (Kind.PACK, Kind.INDEX):
            listings.append(kind.name)
        return names(kind, prefix)

    backend.names = counted  # type: ignore[method-assign]
    ready.set()
    start.wait(60)
    bridge.create("b", "reuse", files, base_dir=base)
    done.put(listings)


def test_a_process_following_the_log_never_counts_on_a_pack_gc_dropped(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bridge in another process whose view holds the packs gc drops, one per step,
    checkpoints their contents after the last step: it read their deletion lines, so it
    stores the blobs again instead of naming blobs of deleted packs, and it never listed."""
    monkeypatch.setattr(gcsteps, "STEP_ITEMS", 1)
    base = tmp_path / "base"
    store = SnapStore(root, fold_threshold=0, lock_timeout=10)
    contents = _garbage_packs(store, base, 4)
    context = multiprocessing.get_context("fork")
    ready, start, done = context.Event(), context.Event(), context.Queue()
    child = context.Process(target=_bridge, args=(root, len(contents), base, ready, start, done))
    child.start()
    assert ready.wait(60)
    store.delete("b", "before")  # the packs' blobs are garbage again
    calls: list[list[str]] = []
    original = PackSet.remove_unindexed

    def between_steps(self: PackSet, pack_ids: list[str]) -> None:
        original(self, pack_ids)
        calls.append(pack_ids)
        if len(calls) == len(contents):
            start.set()
            assert done.get(timeout=60) == []

    monkeypatch.setattr(PackSet, "remove_unindexed", between_steps)
    assert not store.gc().problems
    child.join(30)
    assert child.exitcode == 0 and len(calls) == len(contents)
    fresh = SnapStore(root)
    for n, content in enumerate(contents):
        assert fresh.read("b", "reuse", f"f{n}.bin") == content
    assert fresh.verify(deep=True).ok


class _KilledAtAnIndexUnlink(FastFileSystem):
    """Dies just before the first index is unlinked (its deletion line already written)."""

    def unlink(self, path: str, *, dir_fd: int | None = None) -> None:
        if path.endswith(".idx"):
            os._exit(KILLED_EXIT)
        super().unlink(path, dir_fd=dir_fd)


def test_a_gc_killed_after_writing_a_deletion_leaves_every_reader_right(
    root: Path, tmp_path: Path
) -> None:
    """Killed between a deletion line and the unlink of that pack's index: a process that
    read the line has dropped a pack that is still there (it stores its blobs again, at
    worst), a new process lists and finds it, and the next gc takes it out."""
    base = tmp_path / "base"
    store = two_file_packs(SnapStore(root, fold_threshold=0, lock_timeout=10))
    contents = _garbage_packs(store, base, 3)
    files = [f"f{n}.bin" for n in range(len(contents))]
    reader = two_file_packs(SnapStore(root, fold_threshold=0, lock_timeout=10))
    reader.create("b", "before", files, base_dir=base)  # counts on the garbage packs
    reader.delete("b", "before")
    in_a_killed_child(lambda: SnapStore(root, fs=_KilledAtAnIndexUnlink(), lock_timeout=10).gc())
    log = (root / "packs" / "log").read_bytes()
    gone = set(deleted_ids(log))
    assert gone and all((root / "packs" / f"{pack_id}.idx").exists() for pack_id in gone)
    reader.create("b", "reuse", files, base_dir=base)
    assert not _pack_ids(reader) & gone
    assert gone <= _pack_ids(SnapStore(root))  # a new process lists: the packs are there
    assert not SnapStore(root, lock_timeout=10).gc().problems
    fresh = SnapStore(root)
    for name, content in zip(files, contents, strict=True):
        assert fresh.read("b", "reuse", name) == content
    assert fresh.verify(deep=True).ok


def test_a_process_that_lists_between_the_halves_of_a_fold_follows_it_without_a_miss(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process whose first look comes after the merged pack is published and before the
    folded packs go sees every blob twice; it counts on the merged (larger) pack, so the
    deletion lines take nothing from its map and its reads list nothing more."""
    base = tmp_path / "base"
    base.mkdir()
    store = SnapStore(root, fold_threshold=0)
    for n in range(6):
        (base / f"f{n}.txt").write_text(f"version {n}\n" * (n + 1))
        store.create("s", f"n{n}", [f"f{n}.txt"], base_dir=base)
        repository(store).blobs.close()  # a pack each, as processes of their own leave
    repo = repository(store)
    fold = write_merged(repo, FoldPolicy(threshold=2))
    assert fold is not None
    reader = SnapStore(root, fold_threshold=0)
    reader_packs = repository(reader).blobs.packs
    reader_packs.refresh()
    known = dict(reader_packs.by_digest())
    listings = _count_listings(reader, monkeypatch)
    assert drop_sources(repo, fold, wait=1.0)
    reader_packs.refresh()
    assert set(reader_packs.by_digest()) == set(known)
    for n in range(6):
        assert reader.read("s", f"n{n}", f"f{n}.txt") == f"version {n}\n".encode() * (n + 1)
    assert listings == []


def test_a_blob_whose_pack_went_is_found_in_another_pack_that_holds_it(
    root: Path, tmp_path: Path
) -> None:
    """A reader's map names one pack per blob; when the log says that pack went, the blob
    leaves the map even if another pack holds it too. A read that misses it lists the packs,
    and the listing builds the map again, finding the other pack (it found nothing when the
    set of packs listed was the one the reader already had)."""
    base = tmp_path / "base"
    base.mkdir()
    (base / "kept.txt").write_bytes(b"held by two packs\n")
    (base / "other.txt").write_bytes(b"makes the first pack the larger one\n" * 50)
    store = two_file_packs(SnapStore(root, fold_threshold=0))
    store.create("s", "a", ["kept.txt", "other.txt"], base_dir=base)
    repo = repository(store)
    repo.blobs.refresh()
    ((digest, location),) = [
        (d, repo.blobs.packs.locate(d))
        for d in repo.blobs.packs.by_digest()
        if repo.blobs.read(d) == b"held by two packs\n"
    ]
    assert location is not None
    second = PackWriter(repo.backend)
    second.add(digest, b"held by two packs\n", KIND_DATA)
    second.publish()
    reader = SnapStore(root, fold_threshold=0)
    reader_packs = repository(reader).blobs.packs
    reader_packs.refresh()
    assert reader_packs.locate(digest).pack_id == location.pack_id  # the larger pack
    with repo.gc_lock.exclusive():
        repo.blobs.refresh()
        (index,) = [i for i in repo.blobs.packs.indexes() if i.pack_id == location.pack_id]
        repo.blobs.packs.unindex([index])
    reader_packs.refresh()
    assert reader_packs.locate(digest) is None  # left the map with the pack
    assert repository(reader).blobs.read(digest) == b"held by two packs\n"


def test_forgetting_a_deleted_packs_blocks_costs_its_blocks_not_the_cache() -> None:
    """gc drops packs step after step while its cache is full of the blocks it copied: each
    step looked at every cached block (a fifth of a 4,000-pack gc's time), now only at the
    dropped packs' own blocks."""
    from collections import OrderedDict

    from snapstore.repo.packset import BlockCache

    class NotIterated(OrderedDict[tuple[str, int], bytes]):
        def __iter__(self) -> Any:
            raise AssertionError("the whole cache was walked")

    cache = BlockCache()
    cache._blocks = NotIterated()
    for key, data in (((ID_A, 0), b"aa"), ((ID_A, 1), b"aaa"), ((ID_B, 0), b"bbbb")):
        cache.put(key, data)
    cache.forget([(ID_A, 0), (ID_A, 1), (ID_A, 2)])
    assert cache.get((ID_A, 0)) is None and cache.get((ID_B, 0)) == b"bbbb"
    assert cache._bytes == 4


def test_a_gc_whose_last_new_log_cannot_be_started_still_reports_what_it_did(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The new log at gc's end only keeps the log small (a deleter restarts a long one): a
    gc that cannot start it, the disk full or the store busy, has still deleted what it
    reports, and the log it leaves is followed as before."""
    store = SnapStore(root, fold_threshold=0, lock_timeout=10)
    _garbage_packs(store, tmp_path / "base", 2)

    def full(self: PackSet) -> None:
        raise OSError(errno.ENOSPC, "full")

    monkeypatch.setattr(PackSet, "announce_deletions", full)
    report = store.gc()
    assert not report.skipped and not report.problems and report.packs_deleted >= 2
    assert SnapStore(root).verify(deep=True).ok
