"""A scan with nothing to reuse (the first snapshot of a base directory, or ``rehash``) lists
the files it must read without an lstat each: the fstat each is opened with stands for it.
What is recorded is the same as with the scan's stat; hard links are found when read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers.trees import write_tree

from snapstore import SnapStore
from snapstore.errors import UnreadablePathError
from snapstore.worktree import ingest, ingestscan, statcache
from snapstore.worktree.scan import Scanner
from snapstore.worktree.statcache import StatCache


@pytest.fixture
def trusting(monkeypatch: pytest.MonkeyPatch) -> None:
    """No racy window: the stat cache trusts a file written a moment ago."""
    monkeypatch.setattr(statcache, "RACY_NS", -1)


@pytest.fixture
def stats_given(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, bool]]:
    """(path, whether the scan gave its lstat) of each file the create reads, in order."""
    given: list[tuple[str, bool]] = []
    real = ingestscan._Ingest.read

    def spying(
        self: ingestscan._Ingest, path: str, absolute: str, info: os.stat_result | None
    ) -> None:
        given.append((path, info is not None))
        real(self, path, absolute, info)

    monkeypatch.setattr(ingestscan._Ingest, "read", spying)
    return given


def test_a_first_snapshot_reads_its_files_without_a_scan_stat_and_a_later_one_with_it(
    tmp_path: Path, stats_given: list[tuple[str, bool]], trusting: None
) -> None:
    base = tmp_path / "p"
    write_tree(base, {"a.txt": "a\n", "d/b.txt": "b\n", "d/e/c.txt": "c\n"})
    store = SnapStore(tmp_path / "store", durable=False)
    store.create("s", "one", ["."], base_dir=base)
    assert sorted(stats_given) == [("a.txt", False), ("d/b.txt", False), ("d/e/c.txt", False)]

    stats_given.clear()
    (base / "d/b.txt").write_text("changed, and longer\n")
    store.create("s", "two", ["."], base_dir=base)
    assert stats_given == [("d/b.txt", True)]  # the stat cache needed its stat
    assert store.read("s", "two", "d/b.txt") == b"changed, and longer\n"
    assert store.read("s", "two", "d/e/c.txt") == b"c\n"


def test_rehash_reads_every_file_without_a_scan_stat(
    tmp_path: Path, stats_given: list[tuple[str, bool]], trusting: None
) -> None:
    base = tmp_path / "p"
    write_tree(base, {"a.txt": "a\n", "b.txt": "b\n"})
    store = SnapStore(tmp_path / "store", durable=False)
    store.create("s", "one", ["."], base_dir=base)
    stats_given.clear()
    store.create("s", "two", ["."], base_dir=base, rehash=True)
    assert sorted(stats_given) == [("a.txt", False), ("b.txt", False)]


def test_the_same_rows_with_and_without_the_scan_stat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = tmp_path / "p"
    write_tree(base, {"a.txt": "a\n", "d/b.txt": b"\x00" * 70_000, "d/l": "->a.txt", "e": None})
    os.chmod(base / "a.txt", 0o600)
    os.link(base / "d/b.txt", base / "d/b-link.txt")
    entries = {}
    for stat_files in (True, False):
        scanner = Scanner(str(base), stat_files=stat_files)
        scanner.add(".")
        assert all((info is not None) == stat_files for _, _, info in scanner.result.to_read)
        assert bool(scanner.result.links) == stat_files  # found at the read, without it
        with monkeypatch.context() as patched:  # a first snapshot, scanned as if it had a cache
            patched.setattr(StatCache, "empty", not stat_files)
            store = SnapStore(tmp_path / f"store-{stat_files}", durable=False)
            store.create("s", "n", ["."], base_dir=base)
        entries[stat_files] = [
            (e.path, e.kind, e.mode, e.size, e.digest, e.target, e.link)
            for e in store.get("s", "n").entries
        ]
    assert entries[True] == entries[False]
    links = {row[0]: row[-1] for row in entries[False]}
    assert {links["d/b.txt"], links["d/b-link.txt"]} == {None, "d/b.txt"} or {
        links["d/b.txt"],
        links["d/b-link.txt"],
    } == {None, "d/b-link.txt"}


def test_a_file_gone_between_the_listing_and_its_read_fails_or_is_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Listed without a stat, a file removed before it is opened is an unreadable file, as
    one removed after the scan's stat always was: the create fails, or with
    ``skip_unreadable`` commits without it."""
    base = tmp_path / "p"
    write_tree(base, {"a.txt": "a\n", "b.txt": "b\n"})
    real = ingest.open_source

    def removing_b(path: str, dir_fd: int | None = None) -> int:
        if path.endswith("b.txt") and os.path.exists(path):
            os.unlink(path)
        return real(path, dir_fd)

    monkeypatch.setattr(ingest, "open_source", removing_b)
    store = SnapStore(tmp_path / "store", durable=False)
    with pytest.raises(FileNotFoundError):
        store.create("s", "one", ["."], base_dir=base)
    assert store.list("s") == []
    write_tree(base, {"b.txt": "b\n"})
    info = store.create("s", "one", ["."], base_dir=base, skip_unreadable=True)
    assert [skipped.path for skipped in info.skipped] == ["b.txt"]
    assert [entry.path for entry in store.get("s", "one").entries] == ["a.txt"]


def test_a_file_listed_as_regular_and_opened_as_a_directory_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = tmp_path / "p"
    write_tree(base, {"a.txt": "a\n"})
    real = ingest.open_source

    def swapping(path: str, dir_fd: int | None = None) -> int:
        if os.path.isfile(path):
            os.unlink(path)
            os.mkdir(path)
        return real(path, dir_fd)

    monkeypatch.setattr(ingest, "open_source", swapping)
    store = SnapStore(tmp_path / "store", durable=False)
    with pytest.raises(UnreadablePathError, match="no longer a regular file"):
        store.create("s", "one", ["."], base_dir=base)
    assert store.list("s") == []
