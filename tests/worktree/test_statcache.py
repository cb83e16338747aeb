"""The stat cache: unchanged files are not read again, yet the cache can only cost speed,
never correctness: racy, changed, stale-blob, torn or corrupt entries fall back to reading."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers.trees import read_tree, write_tree

from snapstore import SnapStore
from snapstore.worktree import ingest, statcache


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Paths ingest actually opened and read, in order."""
    opened: list[str] = []
    real = ingest.open_source

    def counting(path: str, dir_fd: int | None = None) -> int:
        opened.append(os.path.basename(path))
        return real(path, dir_fd)

    monkeypatch.setattr(ingest, "open_source", counting)
    return opened


@pytest.fixture
def trusting(monkeypatch: pytest.MonkeyPatch) -> None:
    """Trust files changed before the scan began (no racy window), so tests need not wait."""
    monkeypatch.setattr(statcache, "RACY_NS", -1)


def _tree(tmp_path: Path) -> Path:
    base = tmp_path / "p"
    write_tree(base, {"a.txt": "alpha", "b.txt": "bravo", "sub/c.txt": "charlie"})
    return base


def test_unchanged_files_are_not_read_again(
    store: SnapStore, tmp_path: Path, reads: list[str], trusting: None
) -> None:
    base = _tree(tmp_path)
    store.create("s", "one", ["."], base_dir=base)
    assert sorted(reads) == ["a.txt", "b.txt", "c.txt"]
    reads.clear()
    (base / "b.txt").write_text("bravo, longer")
    store.create("s", "two", ["."], base_dir=base)
    assert reads == ["b.txt"]
    assert store.read("s", "two", "b.txt") == b"bravo, longer"
    assert store.read("s", "two", "a.txt") == b"alpha"
    assert store.verify(deep=True).ok


def test_racy_files_are_read_every_time(store: SnapStore, tmp_path: Path, reads: list[str]) -> None:
    base = _tree(tmp_path)
    store.create("s", "one", ["."], base_dir=base)
    reads.clear()
    store.create("s", "two", ["."], base_dir=base)
    assert sorted(reads) == ["a.txt", "b.txt", "c.txt"]


def test_same_size_and_mtime_but_new_ctime_is_read(
    store: SnapStore, tmp_path: Path, reads: list[str], trusting: None
) -> None:
    base = _tree(tmp_path)
    store.create("s", "one", ["."], base_dir=base)
    before = os.stat(base / "a.txt")
    (base / "a.txt").write_text("ALPHA")
    os.utime(base / "a.txt", ns=(before.st_atime_ns, before.st_mtime_ns))
    reads.clear()
    store.create("s", "two", ["."], base_dir=base)
    assert reads == ["a.txt"]
    assert store.read("s", "two", "a.txt") == b"ALPHA"


def test_a_cached_digest_whose_blob_is_gone_is_read_again(
    store: SnapStore, tmp_path: Path, reads: list[str], trusting: None
) -> None:
    base = _tree(tmp_path)
    store.create("s", "one", ["."], base_dir=base)
    store.delete("s", "one")
    assert store.gc().blobs_deleted == 5  # three files, two directory listings (base, sub/)
    reads.clear()
    store.create("s", "two", ["."], base_dir=base)
    assert sorted(reads) == ["a.txt", "b.txt", "c.txt"]
    assert store.verify(deep=True).ok
    store.restore("s", "two", tmp_path / "out")
    assert read_tree(tmp_path / "out") == read_tree(base)


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage", "other_base"])
def test_a_damaged_cache_only_costs_speed(
    store: SnapStore, root: Path, tmp_path: Path, reads: list[str], trusting: None, damage: str
) -> None:
    base = _tree(tmp_path)
    store.create("s", "one", ["."], base_dir=base)
    (cache,) = (root / "cache").glob("stat-*")
    data = cache.read_bytes()
    if damage == "truncate":
        cache.write_bytes(data[: len(data) // 2])
    elif damage == "flip":
        cache.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    elif damage == "garbage":
        cache.write_bytes(b"not a cache at all")
    else:
        other = statcache.encode({"a.txt": [1, 2, 3, 4, 5, b"x" * 32]}, "/elsewhere")
        cache.write_bytes(other)
    (base / "a.txt").write_text("changed")
    reads.clear()
    store.create("s", "two", ["."], base_dir=base)
    assert sorted(reads) == ["a.txt", "b.txt", "c.txt"]
    assert store.read("s", "two", "a.txt") == b"changed"


def test_malformed_entries_are_misses(
    store: SnapStore, root: Path, tmp_path: Path, reads: list[str], trusting: None
) -> None:
    base = _tree(tmp_path)
    store.create("s", "one", ["."], base_dir=base)
    info = os.stat(base / "a.txt")
    key = [info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino, info.st_dev]
    entries = {"a.txt": [*key, b"short"], "b.txt": "nonsense", "sub/c.txt": [*key]}
    (cache,) = (root / "cache").glob("stat-*")
    cache.write_bytes(statcache.encode(entries, str(base)))
    reads.clear()
    store.create("s", "two", ["."], base_dir=base)
    assert sorted(reads) == ["a.txt", "b.txt", "c.txt"]


def test_partial_snapshots_keep_the_rest_of_the_cache(
    store: SnapStore, tmp_path: Path, reads: list[str], trusting: None
) -> None:
    base = _tree(tmp_path)
    store.create("s", "one", ["."], base_dir=base)
    store.create("s", "part", ["sub"], base_dir=base)
    reads.clear()
    store.create("s", "two", ["."], base_dir=base)
    assert reads == []


def test_restore_in_place_trusts_the_cache_for_unchanged_files(
    store: SnapStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, trusting: None
) -> None:
    from snapstore.restore import plan as restore

    base = _tree(tmp_path)
    store.create("s", "one", ["."], base_dir=base)
    (base / "b.txt").write_text("BRAVO")
    hashed: list[str] = []
    real = restore.same_content

    def counting(path: str, entry: object) -> bool:
        hashed.append(os.path.basename(path))
        return real(path, entry)  # type: ignore[arg-type]

    monkeypatch.setattr(restore, "same_content", counting)
    report = store.restore("s", "one")
    assert report.written == ["b.txt"]
    assert hashed == ["b.txt"]
    assert (base / "b.txt").read_text() == "bravo"
