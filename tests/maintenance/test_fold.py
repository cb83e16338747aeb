"""Small packs fold themselves: after enough creates, a background step merges the small
packs into one and deletes them, never while a reader or a create holds the gc lock, never
losing a blob when two processes fold at once or gc runs between the two halves of a fold.
(Kills and power cuts during a fold: the ``fold`` scenario of tests/crash and tests/faults.)"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from snapstore import SnapStore
from snapstore.backend.memory import MemoryBackend
from snapstore.errors import InvalidValueError
from snapstore.internals import autofold, repository
from snapstore.maintenance.fold import drop_sources, write_merged
from snapstore.maintenance.foldpolicy import FOLD_ENV, FoldPolicy


def pack_count(root: Path) -> int:
    return sum(1 for name in (root / "packs").iterdir() if name.suffix == ".pack")


def content(session: str, number: int) -> bytes:
    return f"{session} version {number}\n".encode() * 3


def checkpoint(store: SnapStore, project: Path, session: str, number: int) -> None:
    """One create of a one-file project (one new small pack: the store then stops
    appending to it, as if each create ran in a process of its own)."""
    project.mkdir(exist_ok=True)
    (project / "f.txt").write_bytes(content(session, number))
    store.create(session, f"c{number:03d}", ["f.txt"], base_dir=project)
    repository(store).blobs.close()


def four_small_packs(tmp_path: Path) -> Path:
    """A store (returned) with four checkpoints of session "s", a small pack each."""
    root = tmp_path / "store"
    with SnapStore(root, fold_threshold=0) as writer:
        for number in range(4):
            checkpoint(writer, tmp_path / "p", "s", number)
    return root


def assert_all_readable(root: Path, sessions: dict[str, int]) -> None:
    """Every checkpoint holds its own content, and verify finds nothing wrong."""
    with SnapStore(root, fold_threshold=0) as fresh:
        for session, count in sessions.items():
            for number in range(count):
                assert fresh.read(session, f"c{number:03d}", "f.txt") == content(session, number)
        report = fresh.verify(deep=True)
        assert report.ok, report.problems


def test_packs_fold_once_the_threshold_is_reached_and_not_before(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with SnapStore(root, fold_threshold=4) as store:
        for number in range(3):
            checkpoint(store, tmp_path / "p", "s", number)
        autofold(store).join()
        assert pack_count(root) == 3 and autofold(store).steps == 0
        checkpoint(store, tmp_path / "p", "s", 3)
        autofold(store).join()
        assert autofold(store).steps == 1
        assert pack_count(root) == 1
    assert_all_readable(root, {"s": 4})


def test_a_long_series_keeps_the_small_packs_under_the_threshold(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with SnapStore(root, fold_threshold=5) as store:
        for number in range(40):
            checkpoint(store, tmp_path / "p", "s", number)
            autofold(store).join()
            assert pack_count(root) < 5
    assert_all_readable(root, {"s": 40})


def test_folding_off_by_argument_or_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with SnapStore(tmp_path / "a", fold_threshold=0) as store:
        for number in range(6):
            checkpoint(store, tmp_path / "p", "s", number)
        autofold(store).join()
    assert pack_count(tmp_path / "a") == 6
    monkeypatch.setenv(FOLD_ENV, "off")
    with SnapStore(tmp_path / "b") as store:
        assert autofold(store).policy.threshold == 0
        for number in range(40):
            checkpoint(store, tmp_path / "p", "s", number)
    assert pack_count(tmp_path / "b") == 40
    monkeypatch.setenv(FOLD_ENV, "3")
    assert autofold(SnapStore(tmp_path / "c")).policy.threshold == 3
    assert autofold(SnapStore(tmp_path / "c", fold_threshold=7)).policy.threshold == 7


@pytest.mark.parametrize("bad", [1, -1, 2.5, True, "4"])
def test_a_bad_threshold_is_refused(tmp_path: Path, bad: object) -> None:
    with pytest.raises(InvalidValueError, match="fold_threshold"):
        SnapStore(tmp_path / "store", fold_threshold=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["1", "many", "-3"])
def test_a_bad_threshold_in_the_environment_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bad: str
) -> None:
    monkeypatch.setenv(FOLD_ENV, bad)
    with pytest.raises(InvalidValueError, match=FOLD_ENV):
        SnapStore(tmp_path / "store")


def test_a_store_without_a_pack_log_does_not_fold() -> None:
    store = SnapStore(MemoryBackend(), fold_threshold=2)
    assert not autofold(store).applies


def test_a_reader_holding_the_store_keeps_the_folded_packs(tmp_path: Path) -> None:
    """A reader may have resolved a blob to a pack being folded: the fold publishes its merged
    pack meanwhile but deletes nothing until the reader lets go of the gc lock."""
    root = four_small_packs(tmp_path)
    reader = SnapStore(root, fold_threshold=0)
    folder = SnapStore(root, fold_threshold=2)
    with repository(reader).blobs_in_use():
        thread = threading.Thread(target=autofold(folder).run_steps, args=(1,))
        thread.start()
        thread.join()
        assert autofold(folder).pending
        assert pack_count(root) == 5
        for number in range(4):
            assert reader.read("s", f"c{number:03d}", "f.txt") == content("s", number)
    autofold(folder).run_steps(1)
    assert not autofold(folder).pending
    assert pack_count(root) == 1
    for number in range(4):
        assert reader.read("s", f"c{number:03d}", "f.txt") == content("s", number)
    assert_all_readable(root, {"s": 4})


@pytest.mark.parametrize("first", ["a", "b"])
def test_two_processes_folding_the_same_packs(tmp_path: Path, first: str) -> None:
    """Both publish a merged pack of the same small packs; whichever deletes second finds
    them gone, or deletes the other's merged pack as one of its own sources."""
    root = four_small_packs(tmp_path)
    policy = FoldPolicy(threshold=2)
    a, b = repository(SnapStore(root)), repository(SnapStore(root))
    fold_a = write_merged(a, policy)
    fold_b = write_merged(b, policy)
    assert fold_a is not None and fold_b is not None
    assert set(fold_a.sources) <= set(fold_b.sources)
    order = [(a, fold_a), (b, fold_b)] if first == "a" else [(b, fold_b), (a, fold_a)]
    for repo, fold in order:
        assert drop_sources(repo, fold)
    assert pack_count(root) == 1  # b folded a's merged pack too
    assert_all_readable(root, {"s": 4})


def test_gc_between_the_two_halves_of_a_fold(tmp_path: Path) -> None:
    """gc merges the fold's new pack with everything else; the fold then deletes nothing."""
    root = four_small_packs(tmp_path)
    folder = repository(SnapStore(root))
    fold = write_merged(folder, FoldPolicy(threshold=2))
    assert fold is not None
    with SnapStore(root, fold_threshold=0) as other:
        checkpoint(other, tmp_path / "q", "t", 0)
        other.gc()
    assert drop_sources(folder, fold)
    assert_all_readable(root, {"s": 4, "t": 1})


def test_creates_in_several_threads_while_packs_fold(tmp_path: Path) -> None:
    """Each thread's store starts folds after its creates; every checkpoint stays readable.
    How far the folds get depends on the scheduling (a store whose fold finds another's
    running skips its run; on a quiet machine one pack is left), so only that some ran is
    asserted: without folding, the 75 creates leave 75 packs."""
    root = tmp_path / "store"
    SnapStore(root).close()
    errors: list[BaseException] = []

    def bridge(session: str) -> None:
        try:
            with SnapStore(root, fold_threshold=4) as store:
                for number in range(25):
                    checkpoint(store, tmp_path / session, session, number)
        except BaseException as error:  # reported below
            errors.append(error)

    threads = [threading.Thread(target=bridge, args=(f"s{k}",)) for k in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    assert pack_count(root) < 75
    assert_all_readable(root, {f"s{k}": 25 for k in range(3)})


def test_a_damaged_small_pack_is_not_folded(tmp_path: Path) -> None:
    """A blob that fails its digest stops the step before anything is written or deleted."""
    root = four_small_packs(tmp_path)
    pack = sorted((root / "packs").glob("*.pack"))[0]
    (index,) = [
        i for i in repository(SnapStore(root)).blobs.packs.indexes() if i.pack_id == pack.stem
    ]
    pack.chmod(0o644)
    data = bytearray(pack.read_bytes())
    data[index.blocks[-1].offset + index.blocks[-1].stored - 3] ^= 0xFF  # a blob's bytes
    pack.write_bytes(bytes(data))
    before = sorted(path.name for path in (root / "packs").iterdir())
    folder = SnapStore(root, fold_threshold=2)
    assert autofold(folder).run_steps(1) == 0
    assert sorted(path.name for path in (root / "packs").iterdir()) == before


def test_one_shot_command_line_creates_fold_before_the_process_ends(tmp_path: Path) -> None:
    """Each `snapstore create` is a process of its own: the fold it starts finishes as the
    process ends (the interpreter's shutdown refuses new thread pools: the fold needs none)."""
    project = tmp_path / "p"
    project.mkdir()
    env = {**os.environ, FOLD_ENV: "3"}
    for number in range(6):
        (project / "f.txt").write_bytes(content("s", number))
        command = [sys.executable, "-m", "snapstore", "--root", str(tmp_path / "store")]
        command += ["create", "s", "f.txt", "--base", str(project)]
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=60)
        assert done.returncode == 0, done.stderr
        assert "fold" not in done.stderr, done.stderr
    assert pack_count(tmp_path / "store") < 3


def test_a_process_skips_its_fold_while_another_process_folds(tmp_path: Path) -> None:
    """One process of a store folds at a time: while another holds the ``fold`` lock, a
    process that reaches the threshold skips its run instead of copying the same packs."""
    root = tmp_path / "store"
    with SnapStore(root, fold_threshold=4) as store:
        holder = repository(store).backend.lock("fold")
        with holder.exclusive_if_free() as held:
            assert held
            for number in range(4):
                checkpoint(store, tmp_path / "p", "s", number)
            autofold(store).join()
            assert autofold(store).steps == 0 and pack_count(root) == 4
        checkpoint(store, tmp_path / "p", "s", 4)
        autofold(store).join()
        assert autofold(store).steps == 1 and pack_count(root) == 1
    assert_all_readable(root, {"s": 5})
