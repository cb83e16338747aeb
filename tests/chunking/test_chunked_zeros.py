"""Zeros a large file holds on disk are data in its chunked map, only the filesystem's real
holes are holes: a preallocated file is restored fully allocated, zero blocks never cut a
file into tiny pieces, a map no reader would accept is never committed, and
``SnapStore.read`` limits hole bytes only."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from snapstore import FileTooLargeError, SnapStore
from snapstore.errors import ExtentMapTooLargeError
from snapstore.format.extents import CHUNK_PARAMS
from snapstore.internals import repository
from snapstore.repo import contents
from snapstore.repo.contents import load_map
from snapstore.worktree import ingest

MIB = 1 << 20
BLOCK = 4096


def random_bytes(size: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(size)


def write_allocated(path: Path, data: bytes) -> None:
    """Write ``data`` in full, zeros included, so every block is allocated."""
    path.write_bytes(data)
    assert os.lstat(path).st_blocks * 512 >= len(data)


def extents_of(store: SnapStore, name: str, path: str) -> list[contents.Extent]:
    entry = store.get("s", name).entry(path)
    assert entry is not None and entry.digest is not None and entry.extents
    repository(store).blobs.refresh()
    return load_map(repository(store).blobs, entry.digest, entry.size)


def test_written_zeros_in_a_large_file_are_restored_allocated(
    store: SnapStore, tmp_path: Path
) -> None:
    base = tmp_path / "project"
    base.mkdir()
    data = bytearray(random_bytes(2 * MIB, 1))
    data[MIB : MIB + 2 * BLOCK] = bytes(2 * BLOCK)  # 8 KiB of zeros, written like the rest
    write_allocated(base / "db.img", bytes(data))
    store.create("s", "v1", ["."], base_dir=base)

    extents = extents_of(store, "v1", "db.img")
    assert sum(extent.length for extent in extents) == len(data)  # no hole recorded
    target = tmp_path / "restored"
    store.restore("s", "v1", target)
    restored = target / "db.img"
    assert restored.read_bytes() == bytes(data)
    assert os.lstat(restored).st_blocks * 512 >= len(data)  # no hole punched into it


def test_zero_blocks_never_cut_a_large_file_into_tiny_chunks(
    store: SnapStore, tmp_path: Path
) -> None:
    base = tmp_path / "project"
    base.mkdir()
    data = b"".join(random_bytes(BLOCK, n) + bytes(BLOCK) for n in range(MIB // BLOCK))
    write_allocated(base / "striped.bin", data)  # 2 MiB: 4 KiB of data, 4 KiB of zeros, ...
    store.create("s", "v1", ["."], base_dir=base)

    extents = extents_of(store, "v1", "striped.bin")
    assert len(extents) <= len(data) // CHUNK_PARAMS.min
    assert all(extent.length >= CHUNK_PARAMS.min for extent in extents[:-1])
    assert store.read("s", "v1", "striped.bin") == data


def test_real_holes_of_a_large_file_stay_holes(store: SnapStore, tmp_path: Path) -> None:
    base = tmp_path / "project"
    base.mkdir()
    path = base / "sparse.img"
    with open(path, "wb") as handle:
        handle.write(random_bytes(MIB, 2))
        handle.seek(5 * MIB)
        handle.write(bytes(64 * 1024) + random_bytes(MIB, 3))  # zeros written: data
    store.create("s", "v1", ["."], base_dir=base)

    extents = extents_of(store, "v1", "sparse.img")
    assert sum(extent.length for extent in extents) == 2 * MIB + 64 * 1024
    target = tmp_path / "restored"
    store.restore("s", "v1", target)
    assert (target / "sparse.img").read_bytes() == path.read_bytes()
    assert os.lstat(target / "sparse.img").st_blocks * 512 < 4 * MIB


def test_a_file_whose_map_no_reader_accepts_fails_and_nothing_is_committed(
    store: SnapStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = tmp_path / "project"
    base.mkdir()
    write_allocated(base / "big.bin", random_bytes(4 * MIB, 4))
    (base / "note.txt").write_text("kept\n")
    monkeypatch.setattr(ingest, "MAX_MAP_BYTES", 200)  # a 4 MiB file needs more rows
    monkeypatch.setattr(contents, "MAX_MAP_BYTES", 200)

    with pytest.raises(ExtentMapTooLargeError, match=r"big\.bin"):
        store.create("s", "v1", ["."], base_dir=base)
    assert store.list("s") == []

    info = store.create("s", "v2", ["."], base_dir=base, skip_unreadable=True)
    assert [skipped.path for skipped in info.skipped] == ["big.bin"]
    assert store.read("s", "v2", "note.txt") == b"kept\n"
    assert store.verify(deep=True).ok
    assert not store.gc().skipped


def test_the_whole_file_read_limit_counts_hole_bytes_only(
    store: SnapStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = tmp_path / "project"
    base.mkdir()
    one_hole = random_bytes(3 * MIB, 5)
    with open(base / "one_hole.bin", "wb") as handle:
        handle.write(one_hole[: 2 * MIB])
        handle.seek(2 * MIB + 64 * 1024)
        handle.write(one_hole[2 * MIB + 64 * 1024 :])
    write_allocated(base / "whole.bin", one_hole)
    with open(base / "mostly_holes.bin", "wb") as handle:
        handle.truncate(3 * MIB)
        handle.write(b"x")
    store.create("s", "v1", ["."], base_dir=base)
    monkeypatch.setattr(contents, "MAX_READ_WITH_HOLES", MIB)

    expected = one_hole[: 2 * MIB] + bytes(64 * 1024) + one_hole[2 * MIB + 64 * 1024 :]
    assert store.read("s", "v1", "one_hole.bin") == expected
    assert store.read("s", "v1", "whole.bin") == one_hole
    with pytest.raises(FileTooLargeError, match="restore it instead"):
        store.read("s", "v1", "mostly_holes.bin")
