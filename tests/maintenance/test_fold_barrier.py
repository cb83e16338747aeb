"""A fold deletes its folded packs without stopping the creates: their indexes go and their
deletion is logged under the gc lock held shared, and the pack files go only after a barrier
(the gc lock taken exclusively for an instant), once every process that may have counted on
them since before has let go. A restore or a create in another process, paused half-way
while a fold runs, loses nothing; a process listing the packs while their indexes are being
unlinked does not keep counting on them."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers.blobs import two_file_packs
from helpers.fork import ChildProcess
from helpers.seam import FastFileSystem

from snapstore import SnapStore
from snapstore.backend import packlog
from snapstore.internals import repository
from snapstore.maintenance.fold import drop_sources, write_merged
from snapstore.maintenance.foldpolicy import FoldPolicy
from snapstore.repo.packmap import PackMap
from snapstore.repo.packset import PackSet

PAUSE_LIMIT = 30.0


class PausingFileSystem(FastFileSystem):
    """Stops once, before the first ``open`` or ``replace`` of a path ``matches`` accepts,
    until the test creates ``go`` in ``signals`` (it creates ``paused`` there first)."""

    def __init__(self, signals: Path, matches: Callable[[str], bool]) -> None:
        self.signals = signals
        self.matches = matches
        self.paused = False

    def _pause_at(self, path: str) -> None:
        if self.paused or not self.matches(path):
            return
        self.paused = True
        (self.signals / "paused").touch()
        deadline = time.monotonic() + PAUSE_LIMIT
        while not (self.signals / "go").exists():
            if time.monotonic() > deadline:
                raise TimeoutError("the test never said go")
            time.sleep(0.005)

    def open(self, path: str, flags: int, mode: int = 0o666, *, dir_fd: int | None = None) -> int:
        self._pause_at(path)
        return super().open(path, flags, mode, dir_fd=dir_fd)

    def replace(
        self, src: str, dst: str, *, src_dir_fd: int | None = None, dst_dir_fd: int | None = None
    ) -> None:
        self._pause_at(dst)
        super().replace(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)


def is_pack_log(path: str) -> bool:
    """The pack log, which a create opens to note its new pack, just before its commit."""
    return path.endswith(f"packs{os.sep}log")


def wait_for(path: Path) -> None:
    deadline = time.monotonic() + PAUSE_LIMIT
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} never came"
        time.sleep(0.005)


def content(name: str, number: int) -> bytes:
    return f"{name} as of checkpoint {number}\n".encode() * 4


def store_of_small_packs(root: Path, project: Path, count: int = 4) -> None:
    """Checkpoint ``c<n>`` of session "s" adds ``f<n>`` to the project: each of the ``count``
    checkpoints stores one new small pack with an index file of its own (the order of a
    fold's shared half is about index files; appendable packs: test_fold_appendable), and the
    last one names a blob of every pack."""
    project.mkdir(parents=True)
    with two_file_packs(SnapStore(root, fold_threshold=0)) as writer:
        for number in range(count):
            (project / f"f{number}").write_bytes(content(f"f{number}", number))
            writer.create("s", f"c{number}", ["."], base_dir=project)


def pack_files(root: Path) -> set[str]:
    return {path.stem for path in (root / "packs").glob("*.pack")}


def index_files(root: Path) -> set[str]:
    return {path.stem for path in (root / "packs").glob("*.idx")}


def assert_whole(root: Path, expected: dict[str, dict[str, bytes]]) -> None:
    """A new process reads every file of every snapshot named, and verify finds no problem."""
    with SnapStore(root, fold_threshold=0) as fresh:
        for name, files in expected.items():
            for path, data in files.items():
                assert fresh.read("s", name, path) == data, (name, path)
        report = fresh.verify(deep=True)
        assert report.ok, report.problems


def test_a_restore_in_another_process_reads_the_packs_a_fold_deletes_meanwhile(
    tmp_path: Path,
) -> None:
    """The restore counts on the small packs from the moment it took the gc lock: its undo
    backup claims their blobs, then it reads from them. A fold that runs while the restore is
    paused unlinks their indexes but keeps the pack files until the restore lets go; deleting
    them at once (no barrier) makes the restore fail half-way."""
    root, project, signals = tmp_path / "store", tmp_path / "project", tmp_path / "signals"
    store_of_small_packs(root, project)
    signals.mkdir()
    small = pack_files(root)
    (project / "f0").write_bytes(b"edited after the last checkpoint\n")

    def restore() -> None:
        seam = PausingFileSystem(signals, lambda path: "journal" in path)
        with SnapStore(root, fs=seam, fold_threshold=0, lock_timeout=10) as restorer:
            report = restorer.restore("s", "c1", project)
        assert seam.paused and report.backup is not None

    child = ChildProcess(restore)
    wait_for(signals / "paused")
    folder = repository(SnapStore(root, fold_threshold=0, lock_timeout=10))
    fold = write_merged(folder, FoldPolicy(threshold=2))
    assert fold is not None and set(fold.sources) == small
    assert not drop_sources(folder, fold, wait=0.2)  # the restore still holds the gc lock
    assert not index_files(root) & small  # taken out under the shared lock...
    assert pack_files(root) >= small  # ...but their files stay while the restore may read
    (signals / "go").touch()
    assert child.wait(), "the restore failed (see its traceback above)"
    assert drop_sources(folder, fold, wait=1.0)
    assert not pack_files(root) & small
    assert sorted(path.name for path in project.iterdir()) == ["f0", "f1"]
    for number in range(2):
        assert (project / f"f{number}").read_bytes() == content(f"f{number}", number)
    last = {f"f{n}": content(f"f{n}", n) for n in range(4)}
    assert_whole(root, {"c3": last})
    with SnapStore(root) as fresh:
        backup = fresh.backups("s")[-1].name
    changed = {"f0": b"edited after the last checkpoint\n", "f2": last["f2"], "f3": last["f3"]}
    assert_whole(root, {backup: changed})  # the backup holds what the restore changed


def test_a_create_in_another_process_paused_before_its_commit_loses_no_blob(
    tmp_path: Path,
) -> None:
    """The create claims blobs of the small packs (it stores them no more), stores its own
    new pack, then waits, before it checks its claims and commits, while a fold folds and
    takes out those packs: its checkpoint is whole afterwards, read by a new process and
    after a gc."""
    root, project, signals = tmp_path / "store", tmp_path / "project", tmp_path / "signals"
    store_of_small_packs(root, project)
    signals.mkdir()
    small = pack_files(root)
    (project / "f4").write_bytes(content("f4", 4))

    def create() -> None:
        seam = PausingFileSystem(signals, is_pack_log)
        with SnapStore(root, fs=seam, fold_threshold=0, lock_timeout=10) as creator:
            creator.create("s", "c4", ["."], base_dir=project)
        assert seam.paused

    child = ChildProcess(create)
    wait_for(signals / "paused")
    folder = repository(SnapStore(root, fold_threshold=0, lock_timeout=10))
    fold = write_merged(folder, FoldPolicy(threshold=2))
    assert fold is not None and small <= set(fold.sources)
    assert not drop_sources(folder, fold, wait=0.2)  # the create still holds the gc lock
    (signals / "go").touch()
    assert child.wait(), "the create failed (see its traceback above)"
    assert drop_sources(folder, fold, wait=1.0)
    assert not pack_files(root) & small
    expected = {"c4": {f"f{n}": content(f"f{n}", n) for n in range(5)}}
    assert_whole(root, expected)
    with SnapStore(root, fold_threshold=0) as collector:
        assert not collector.gc().problems
    assert_whole(root, expected)


def test_a_create_whose_own_process_folds_meanwhile_finds_its_claims_in_the_merged_pack(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fold takes the folded packs out of its process's view while another thread of the
    process is between its claims and its commit. Where that view found a claimed blob in a
    folded pack rather than the merged one (its map prefers the larger pack of two; here the
    preference is turned round, as when a merged pack comes out smaller), the fold points
    the view at the merged pack for those blobs, and the create's check of its claims lists
    the packs once more before it says a blob vanished: it fails only with neither."""
    root, project, signals = tmp_path / "store", tmp_path / "project", tmp_path / "signals"
    store_of_small_packs(root, project)
    signals.mkdir()
    small = pack_files(root)
    (project / "f4").write_bytes(content("f4", 4))

    def smaller_first(self: Any) -> None:
        self._where = PackMap()
        for index in sorted(self._indexes.values(), key=lambda index: -index.pack_size):
            self._where.add(index)

    monkeypatch.setattr(PackSet, "_rebuild", smaller_first)
    seam = PausingFileSystem(signals, is_pack_log)
    store = two_file_packs(SnapStore(root, fs=seam, fold_threshold=0, lock_timeout=10))
    errors: list[BaseException] = []

    def create() -> None:
        try:
            store.create("s", "c4", ["."], base_dir=project)
        except BaseException as error:  # reported below
            errors.append(error)

    creator = threading.Thread(target=create)
    creator.start()
    wait_for(signals / "paused")
    repo = repository(store)
    fold = write_merged(repo, FoldPolicy(threshold=2))
    assert fold is not None and small <= set(fold.sources)
    packs = repo.blobs.packs
    packs._rebuild()  # as a listing since the merge would: the map names the folded packs
    assert all(packs.by_digest()[d].pack_id in fold.sources for d in fold.merged[0].entries)
    assert not drop_sources(repo, fold, wait=0.2)  # the create still holds the gc lock
    (signals / "go").touch()
    creator.join()
    assert not errors, errors
    assert drop_sources(repo, fold, wait=1.0)
    assert_whole(root, {"c4": {f"f{n}": content(f"f{n}", n) for n in range(5)}})


def test_a_fold_that_starts_a_new_log_still_sees_packs_published_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under the shared lock another process may publish a pack between the fold's refresh
    and its deletion lines; if the deletion starts a new log (the old one is long), the
    folding process must not follow the new log from its start, which would skip that
    publication: it lists the packs at its next refresh instead."""
    root, project, other_project = tmp_path / "store", tmp_path / "project", tmp_path / "o"
    store_of_small_packs(root, project)
    other_project.mkdir()
    (other_project / "new").write_bytes(b"published by another process meanwhile\n" * 8)
    published: list[set[str]] = []

    class PublishingAtTheFirstIndexUnlink(FastFileSystem):
        def unlink(self, path: str, *, dir_fd: int | None = None) -> None:
            if path.endswith(".idx") and not published:
                with two_file_packs(SnapStore(root, fold_threshold=0)) as other:
                    other.create("o", "x", ["."], base_dir=other_project)
                published.append(index_files(root) - seen_before)
            super().unlink(path, dir_fd=dir_fd)

    seen_before = index_files(root)
    folder = repository(SnapStore(root, fs=PublishingAtTheFirstIndexUnlink(), fold_threshold=0))
    fold = write_merged(folder, FoldPolicy(threshold=2))
    assert fold is not None
    seen_before |= {index.pack_id for index in fold.merged}
    monkeypatch.setattr(packlog, "RESTART_BYTES", 0)  # the deletion starts a new log
    assert drop_sources(folder, fold, wait=1.0)
    (new_pack,) = published[0]
    with folder.blobs_in_use():
        seen = {index.pack_id for index in folder.blobs.packs.indexes()}
    assert new_pack in seen, "the folding process skipped a pack published meanwhile"


def test_a_process_listing_the_packs_while_a_fold_unlinks_their_indexes_drops_them(
    tmp_path: Path,
) -> None:
    """A process that lists ``packs/`` (a new one) just as the fold starts unlinking indexes
    still sees them; the deletion lines come after the unlinks, so its next refresh reads them
    and it stops counting on packs whose files are gone. With the lines first, its log
    position would lie past them and it would count on the deleted packs for good."""
    root, project = tmp_path / "store", tmp_path / "project"
    store_of_small_packs(root, project)
    small = pack_files(root)
    newcomers: list[SnapStore] = []

    class ListingAtTheFirstIndexUnlink(FastFileSystem):
        def unlink(self, path: str, *, dir_fd: int | None = None) -> None:
            if path.endswith(".idx") and not newcomers:
                newcomer = SnapStore(root, fold_threshold=0)
                with repository(newcomer).blobs_in_use():  # lists: a new process
                    seen = {index.pack_id for index in repository(newcomer).blobs.packs.indexes()}
                assert small <= seen
                newcomers.append(newcomer)
            super().unlink(path, dir_fd=dir_fd)

    folder = repository(SnapStore(root, fs=ListingAtTheFirstIndexUnlink(), fold_threshold=0))
    fold = write_merged(folder, FoldPolicy(threshold=2))
    assert fold is not None
    assert drop_sources(folder, fold, wait=1.0)
    assert newcomers and not pack_files(root) & small
    newcomer = repository(newcomers[0])
    with newcomer.blobs_in_use():
        still = {index.pack_id for index in newcomer.blobs.packs.indexes()} & small
    assert not still, f"counts on deleted packs {sorted(still)}"
    for number in range(4):
        assert newcomers[0].read("s", "c3", f"f{number}") == content(f"f{number}", number)


def test_bridges_creating_and_reading_in_threads_while_a_fold_loops(tmp_path: Path) -> None:
    """Three bridges (a store object each, so a view of the packs each) checkpoint and read
    back their earlier checkpoints while another store folds as fast as it can: no create
    fails, no read misses a blob, and every checkpoint is whole at the end."""
    root = tmp_path / "store"
    SnapStore(root).close()
    errors: list[BaseException] = []
    done = threading.Event()

    def bridge(session: str) -> None:
        project = tmp_path / session
        project.mkdir()
        try:
            with SnapStore(root, fold_threshold=0, lock_timeout=20) as store:
                for number in range(30):
                    (project / "f").write_bytes(content(session, number))
                    store.create(session, f"c{number:03d}", ["f"], base_dir=project)
                    earlier = number // 2
                    read = store.read(session, f"c{earlier:03d}", "f")
                    assert read == content(session, earlier)
        except BaseException as error:  # reported below
            errors.append(error)

    def fold_loop() -> None:
        folder = repository(SnapStore(root, fold_threshold=0, lock_timeout=20))
        policy = FoldPolicy(threshold=2)
        try:
            while not done.is_set():
                fold = write_merged(folder, policy)
                while fold is not None and not drop_sources(folder, fold, wait=0.05):
                    time.sleep(0.001)
        except BaseException as error:  # reported below
            errors.append(error)

    bridges = [threading.Thread(target=bridge, args=(f"s{k}",)) for k in range(3)]
    folder_thread = threading.Thread(target=fold_loop)
    folder_thread.start()
    for thread in bridges:
        thread.start()
    for thread in bridges:
        thread.join()
    done.set()
    folder_thread.join()
    assert not errors, errors
    with SnapStore(root, fold_threshold=0) as fresh:
        for k in range(3):
            for number in range(30):
                assert fresh.read(f"s{k}", f"c{number:03d}", "f") == content(f"s{k}", number)
        assert fresh.verify(deep=True).ok
