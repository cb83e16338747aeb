"""Large files stored as content-defined chunks: round trips (with holes too), what an
overwrite or an insertion costs, dedup across files and sessions, reads of part of a file,
restores in place, gc, and an older store's files read as before."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from snapstore import SnapStore
from snapstore.backend.layout import FORMAT_MAJOR
from snapstore.format.extents import (
    CHUNK_PARAMS,
    CHUNKED_FROM_BYTES,
    CHUNKED_MAGIC,
    EXTENT_MAGIC,
)
from snapstore.internals import repository
from snapstore.models import FileEntry
from snapstore.repo.blobs import Blobs
from snapstore.repo.contents import load_map

MIB = 1 << 20


def random_bytes(size: int, seed: int = 1) -> bytes:
    return random.Random(seed).randbytes(size)


def project_with(tmp_path: Path, data: bytes, name: str = "big.bin") -> Path:
    """A project directory holding ``data`` as ``name``."""
    base = tmp_path / "project"
    base.mkdir()
    (base / name).write_bytes(data)
    return base


def entry_of(store: SnapStore, name: str, path: str = "big.bin", session: str = "s") -> FileEntry:
    entry = store.get(session, name).entry(path)
    assert entry is not None and entry.digest is not None
    return entry


def map_bytes(store: SnapStore, entry: FileEntry) -> bytes:
    assert entry.digest is not None
    repository(store).blobs.refresh()
    return repository(store).blobs.read(entry.digest)


def stored_bytes(store: SnapStore, name: str, session: str = "s") -> int:
    info = store.get(session, name).info
    assert info.stored_bytes is not None
    return info.stored_bytes


def test_a_large_file_is_stored_as_chunks_and_reads_back(store: SnapStore, tmp_path: Path) -> None:
    data = random_bytes(6 * MIB)
    base = project_with(tmp_path, data)
    (base / "small.txt").write_bytes(b"x" * (CHUNKED_FROM_BYTES - 1))
    store.create("s", "v1", ["."], base_dir=base)

    big = entry_of(store, "v1")
    assert big.extents and map_bytes(store, big).startswith(CHUNKED_MAGIC)
    extents = load_map(repository(store).blobs, big.digest, big.size)  # type: ignore[arg-type]
    assert len(extents) > 6 and sum(e.length for e in extents) == len(data)
    assert all(CHUNK_PARAMS.min <= e.length <= CHUNK_PARAMS.max for e in extents[:-1])
    assert not entry_of(store, "v1", "small.txt").extents  # small files stay one blob

    assert store.read("s", "v1", "big.bin") == data
    target = tmp_path / "restored"
    store.restore("s", "v1", target)
    assert (target / "big.bin").read_bytes() == data
    assert store.verify(deep=True).ok


def test_an_overwrite_and_an_insertion_cost_about_the_chunks_they_touch(
    store: SnapStore, tmp_path: Path
) -> None:
    base = tmp_path / "project"
    base.mkdir()
    data = bytearray(random_bytes(16 * MIB))
    path = base / "big.bin"
    path.write_bytes(data)
    store.create("s", "v1", ["."], base_dir=base)
    assert stored_bytes(store, "v1") > 16 * MIB * 0.99

    data[8 * MIB : 8 * MIB + 4096] = random_bytes(4096, seed=2)
    path.write_bytes(data)
    store.create("s", "v2", ["."], base_dir=base)
    data[5 * MIB : 5 * MIB] = random_bytes(100, seed=3)
    path.write_bytes(data)
    store.create("s", "v3", ["."], base_dir=base)

    budget = 2 * CHUNK_PARAMS.max + 64 * 1024  # at most two chunks, plus the map and trees
    assert stored_bytes(store, "v2") < budget
    assert stored_bytes(store, "v3") < budget
    assert store.read("s", "v3", "big.bin") == bytes(data)


def test_chunks_are_shared_across_files_snapshots_and_sessions(root: Path, tmp_path: Path) -> None:
    data = random_bytes(4 * MIB)
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    (one / "big.bin").write_bytes(data)
    (two / "copy.bin").write_bytes(data)
    (two / "longer.bin").write_bytes(data + b"tail")
    with SnapStore(root) as first:
        first.create("a", "v1", ["."], base_dir=one)
    with SnapStore(root) as second:  # another process's session, later
        second.create("b", "v1", ["."], base_dir=two)
        assert stored_bytes(second, "v1", "b") < CHUNK_PARAMS.max + 64 * 1024
        assert second.read("b", "v1", "longer.bin") == data + b"tail"
        assert second.verify(deep=True).ok


def test_a_large_file_with_holes_keeps_them(store: SnapStore, tmp_path: Path) -> None:
    base = tmp_path / "project"
    base.mkdir()
    path = base / "sparse.img"
    pieces = {0: random_bytes(300_000, 4), 40 * MIB: random_bytes(2 * MIB, 5)}
    with open(path, "wb") as handle:
        handle.truncate(64 * MIB)
        for offset, piece in pieces.items():
            handle.seek(offset)
            handle.write(piece)
    expected = path.read_bytes()
    store.create("s", "v1", ["."], base_dir=base)
    assert stored_bytes(store, "v1") < 3 * MIB  # the holes are never stored

    entry = entry_of(store, "v1", "sparse.img")
    extents = load_map(repository(store).blobs, entry.digest, entry.size)  # type: ignore[arg-type]
    assert sum(e.length for e in extents) < 3 * MIB
    target = tmp_path / "restored"
    store.restore("s", "v1", target)
    restored = target / "sparse.img"
    assert restored.read_bytes() == expected
    assert os.lstat(restored).st_blocks * 512 < 8 * MIB


def test_a_read_of_part_of_a_file_fetches_only_the_chunks_it_needs(
    store: SnapStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = random_bytes(32 * MIB)
    base = project_with(tmp_path, data)
    store.create("s", "v1", ["."], base_dir=base)
    entry = entry_of(store, "v1")
    chunk_count = len(load_map(repository(store).blobs, entry.digest, entry.size))  # type: ignore[arg-type]

    fetched: list[bytes] = []
    real_read = Blobs.read

    def counting_read(self: Blobs, digest: bytes, size: int | None = None) -> bytes:
        fetched.append(digest)
        return real_read(self, digest, size)

    monkeypatch.setattr(Blobs, "read", counting_read)
    part = store.read_slice("s", "v1", "big.bin", offset=20 * MIB, length=1000)
    assert part.data == data[20 * MIB : 20 * MIB + 1000] and part.size == len(data)
    # the map, the chunk(s) holding the first bytes (the binary probe) and the window
    assert len(fetched) <= 5 < chunk_count


def test_a_restore_in_place_rewrites_a_changed_large_file_and_keeps_an_unchanged_one(
    store: SnapStore, tmp_path: Path
) -> None:
    base = tmp_path / "project"
    base.mkdir()
    old = random_bytes(8 * MIB)
    (base / "big.bin").write_bytes(old)
    (base / "same.bin").write_bytes(random_bytes(3 * MIB, 9))
    store.create("s", "v1", ["."], base_dir=base)
    changed = bytearray(old)
    changed[4 * MIB : 4 * MIB + 4096] = bytes(4096)
    (base / "big.bin").write_bytes(changed)
    same_inode = os.stat(base / "same.bin").st_ino

    store.restore("s", "v1", base)
    assert (base / "big.bin").read_bytes() == old
    assert os.stat(base / "same.bin").st_ino == same_inode  # recognised unchanged: not written


def test_gc_keeps_the_chunks_of_kept_snapshots_and_drops_the_others(
    store: SnapStore, tmp_path: Path
) -> None:
    base = tmp_path / "project"
    base.mkdir()
    path = base / "big.bin"
    path.write_bytes(random_bytes(6 * MIB, 1))
    store.create("s", "v1", ["."], base_dir=base)
    kept = random_bytes(6 * MIB, 2)
    path.write_bytes(kept)
    store.create("s", "v2", ["."], base_dir=base)
    store.delete("s", "v1")
    report = store.gc()
    assert report.bytes_freed > 5 * MIB
    assert store.read("s", "v2", "big.bin") == kept
    assert store.verify(deep=True).ok


def test_files_stored_whole_or_with_fixed_cut_maps_by_an_older_version_still_read(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = random_bytes(20 * MIB)
    base = project_with(tmp_path, data)
    with open(base / "sparse.img", "wb") as handle:
        handle.truncate(8 * MIB)
        handle.seek(3 * MIB)
        handle.write(b"data" * 1000)
    sparse = (base / "sparse.img").read_bytes()
    with monkeypatch.context() as older:
        older.setattr("snapstore.worktree.ingest.CHUNKED_FROM_BYTES", 1 << 62)
        with SnapStore(root) as before:
            before.create("s", "old", ["."], base_dir=base)
            assert not entry_of(before, "old").extents
            assert map_bytes(before, entry_of(before, "old", "sparse.img")).startswith(EXTENT_MAGIC)
    with SnapStore(root) as now:
        assert now.read("s", "old", "big.bin") == data
        assert now.read("s", "old", "sparse.img") == sparse
        target = tmp_path / "restored"
        now.restore("s", "old", target)
        assert (target / "big.bin").read_bytes() == data
        assert (target / "sparse.img").read_bytes() == sparse
        now.restore("s", "old", base)  # compared the old way: nothing to write
        now.create("s", "new", ["."], base_dir=base)
        assert entry_of(now, "new").extents
        assert now.verify(deep=True).ok
        now.upgrade()
        assert now.read("s", "old", "big.bin") == data
        assert now.read("s", "new", "big.bin") == data


def test_a_format_1_store_reads_and_takes_chunked_files_then_upgrades(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from helpers.formatv1 import downgrade_to_format_1

    data = random_bytes(5 * MIB)
    base = project_with(tmp_path, data)
    with monkeypatch.context() as older:
        older.setattr("snapstore.worktree.ingest.CHUNKED_FROM_BYTES", 1 << 62)
        with SnapStore(root, durable=False) as before:
            before.create("s", "old", ["."], base_dir=base)
    downgrade_to_format_1(root)
    with SnapStore(root) as now:
        assert now.format_version == 1
        assert now.read("s", "old", "big.bin") == data
        changed = data[:MIB] + b"inserted" + data[MIB:]
        (base / "big.bin").write_bytes(changed)
        now.create("s", "new", ["."], base_dir=base)
        assert entry_of(now, "new").extents
        now.upgrade()
        assert now.format_version == FORMAT_MAJOR
        assert now.read("s", "old", "big.bin") == data
        assert now.read("s", "new", "big.bin") == changed
        assert now.verify(deep=True).ok


def test_a_map_sits_in_a_block_of_its_own(store: SnapStore, tmp_path: Path) -> None:
    """A create that reuses an unchanged large file reads its map to count on every chunk:
    that read never decompresses the file's data."""
    base = project_with(tmp_path, random_bytes(5 * MIB))
    (base / "after.txt").write_bytes(b"small file written after the map\n" * 100)
    store.create("s", "v1", ["."], base_dir=base)
    entry = entry_of(store, "v1")
    repository(store).blobs.refresh()
    location = repository(store).blobs.packs.locate(entry.digest)  # type: ignore[arg-type]
    assert location is not None
    assert location.block.raw == 4 + location.size  # its size head, then its bytes
