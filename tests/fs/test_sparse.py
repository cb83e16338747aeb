"""Files with holes: stored as extent maps (holes never read, hashed or stored), restored
with their holes, and compared by their bytes whatever their holes on disk."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
from helpers.hostile import hostile_info, plant_snapshot
from helpers.seam import FailingOperation

import snapstore.fs.sparse as sparse
from snapstore import CorruptManifestError, RestoreError, SnapStore
from snapstore.errors import CorruptBlobError, FileTooLargeError, MissingBlobError
from snapstore.format.extents import (
    BLOCK_BYTES,
    PIECE_BYTES,
    Extent,
    data_blocks,
    decode_map,
    encode_map,
    map_digest,
)
from snapstore.format.tree import encode_tree
from snapstore.internals import repository

MIB = 1 << 20


@pytest.fixture(autouse=True)
def _fixed_cut_maps(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are about the fixed-cut extent maps of files with holes, which files
    below the chunking threshold get: the threshold is lifted here so that files of a few
    MiB take that path (chunked files with holes: tests/chunking)."""
    monkeypatch.setattr("snapstore.worktree.ingest.CHUNKED_FROM_BYTES", 1 << 62)


def make_sparse(path: Path, size: int, data: dict[int, bytes]) -> None:
    """A file of ``size`` bytes holding ``data`` at its offsets and holes elsewhere."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        handle.truncate(size)
        for offset, chunk in data.items():
            handle.seek(offset)
            handle.write(chunk)


def expected_bytes(size: int, data: dict[int, bytes]) -> bytes:
    content = bytearray(size)
    for offset, chunk in data.items():
        content[offset : offset + len(chunk)] = chunk
    return bytes(content)


def allocated(path: Path) -> int:
    return os.lstat(path).st_blocks * 512


def store_bytes(root: Path) -> int:
    return sum(f.stat().st_size for f in root.rglob("*") if f.is_file())


def holes_supported(tmp_path: Path) -> bool:
    probe = tmp_path / "probe"
    make_sparse(probe, 8 * MIB, {})
    supported = allocated(probe) < MIB
    probe.unlink()
    return supported


@pytest.fixture
def holes(tmp_path: Path) -> None:
    if not holes_supported(tmp_path):
        pytest.skip("the filesystem of the test directory keeps no holes")


LAYOUTS = {
    "hole at the start": (64 * MIB, {40 * MIB: b"tail data" * 1000}),
    "hole in the middle": (64 * MIB, {0: b"head" * 5000, 60 * MIB: b"end" * 3000}),
    "hole at the end": (64 * MIB, {0: os.urandom(3 * MIB)}),
    "holes everywhere": (
        64 * MIB,
        {5 * MIB + 17: b"a" * 10, 20 * MIB - 3: b"bc" * 4000, 64 * MIB - 1: b"z"},
    ),
    "only holes": (16 * MIB, {}),
}


@pytest.mark.parametrize("layout", LAYOUTS.values(), ids=LAYOUTS.keys())
def test_a_file_with_holes_is_stored_and_restored_with_them(
    holes: None, store: SnapStore, tmp_path: Path, layout: tuple[int, dict[int, bytes]]
) -> None:
    size, data = layout
    base = tmp_path / "project"
    make_sparse(base / "disk.img", size, data)
    store.create("s", "one", ["."], base_dir=base)
    entry = store.get("s", "one").entry("disk.img")
    assert entry is not None and entry.extents and entry.size == size
    payload = sum(len(chunk) for chunk in data.values())
    assert store_bytes(Path(store.root)) < payload + MIB  # no hole stored
    assert store.read("s", "one", "disk.img") == expected_bytes(size, data)
    target = tmp_path / "out"
    store.restore("s", "one", target)
    restored = target / "disk.img"
    assert restored.read_bytes() == expected_bytes(size, data)
    assert allocated(restored) <= allocated(base / "disk.img") + 2 * BLOCK_BYTES
    report = store.restore("s", "one", target)
    assert report.written == [] and "disk.img" in report.unchanged
    assert not store.diff("s", "one", target=target).changed
    assert store.verify().ok


def test_holes_are_never_read(
    holes: None, store: SnapStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = tmp_path / "project"
    make_sparse(base / "vm.img", 2 << 30, {1 << 30: b"x" * 5000})
    read = [0]
    real_pread = os.pread

    def counting_pread(fd: int, length: int, offset: int) -> bytes:
        chunk = real_pread(fd, length, offset)
        if os.fstat(fd).st_size == 2 << 30:  # the sparse file's reads, not the store's
            read[0] += len(chunk)
        return chunk

    monkeypatch.setattr(os, "pread", counting_pread)
    started = time.monotonic()
    store.create("s", "one", ["."], base_dir=base)
    assert read[0] <= 2 * BLOCK_BYTES * 2
    assert time.monotonic() - started < 10
    monkeypatch.undo()
    store.restore("s", "one", tmp_path / "out")
    assert allocated(tmp_path / "out" / "vm.img") < MIB


def test_an_unchanged_file_with_holes_is_not_read_again(
    holes: None, store: SnapStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = tmp_path / "project"
    make_sparse(base / "vm.img", 32 * MIB, {MIB: b"data" * 100})
    old = time.time() - 60
    os.utime(base / "vm.img", (old, old))
    time.sleep(0.01)
    store.create("s", "one", ["."], base_dir=base)
    calls = [0]
    monkeypatch.setattr(sparse, "read_pieces", lambda *a: calls.__setitem__(0, 1) or iter(()))
    store.create("s", "two", ["."], base_dir=base)
    assert calls == [0]
    assert store.get("s", "two").entry("vm.img") == store.get("s", "one").entry("vm.img")


def test_a_file_that_loses_its_holes_and_gets_them_back(
    holes: None, store: SnapStore, tmp_path: Path
) -> None:
    base = tmp_path / "project"
    data = {2 * MIB: b"kept" * 256}
    make_sparse(base / "f.bin", 8 * MIB, data)
    store.create("s", "sparse", ["."], base_dir=base)
    (base / "f.bin").write_bytes(os.urandom(8 * MIB))  # no hole any more
    store.create("s", "dense", ["."], base_dir=base)
    dense = store.get("s", "dense").entry("f.bin")
    assert dense is not None and not dense.extents
    store.restore("s", "sparse")
    assert (base / "f.bin").read_bytes() == expected_bytes(8 * MIB, data)
    assert allocated(base / "f.bin") < MIB
    store.restore("s", "dense")
    assert allocated(base / "f.bin") >= 8 * MIB


def test_the_same_bytes_without_holes_count_as_unchanged(
    holes: None, store: SnapStore, tmp_path: Path
) -> None:
    base = tmp_path / "project"
    data = {3 * MIB: b"same" * 1000}
    make_sparse(base / "f.bin", 8 * MIB, data)
    store.create("s", "one", ["."], base_dir=base)
    (base / "f.bin").write_bytes(expected_bytes(8 * MIB, data))  # zeros written out
    assert allocated(base / "f.bin") >= 8 * MIB
    assert not store.diff("s", "one").changed
    assert store.restore("s", "one").written == []
    (base / "f.bin").write_bytes(expected_bytes(8 * MIB, {3 * MIB: b"diff" * 1000}))
    assert store.diff("s", "one").modified == ["f.bin"]


def test_zeros_written_in_a_file_without_holes_are_stored_as_bytes(
    store: SnapStore, tmp_path: Path
) -> None:
    base = tmp_path / "project"
    base.mkdir()
    (base / "zeros.bin").write_bytes(bytes(4 * MIB))
    store.create("s", "one", ["."], base_dir=base)
    entry = store.get("s", "one").entry("zeros.bin")
    assert entry is not None and not entry.extents
    assert store.read("s", "one", "zeros.bin") == bytes(4 * MIB)


def test_without_seek_hole_files_are_read_whole(
    store: SnapStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sparse, "SEEK_HOLE", None)
    base = tmp_path / "project"
    data = {MIB: b"abc" * 100}
    make_sparse(base / "f.bin", 4 * MIB, data)
    store.create("s", "one", ["."], base_dir=base)
    entry = store.get("s", "one").entry("f.bin")
    assert entry is not None and not entry.extents
    store.restore("s", "one", tmp_path / "out")
    assert (tmp_path / "out" / "f.bin").read_bytes() == expected_bytes(4 * MIB, data)


def test_a_filesystem_refusing_the_probe_reads_the_file_whole(
    store: SnapStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_lseek = os.lseek

    def refusing(fd: int, offset: int, how: int) -> int:
        if how == sparse.SEEK_HOLE:
            raise OSError(22, "Invalid argument")
        return real_lseek(fd, offset, how)

    monkeypatch.setattr(os, "lseek", refusing)
    base = tmp_path / "project"
    make_sparse(base / "f.bin", 4 * MIB, {MIB: b"q"})
    store.create("s", "one", ["."], base_dir=base)
    assert store.read("s", "one", "f.bin") == expected_bytes(4 * MIB, {MIB: b"q"})


def test_an_error_writing_a_file_with_holes_rolls_the_restore_back(
    holes: None, root: Path, tmp_path: Path
) -> None:
    base = tmp_path / "project"
    make_sparse(base / "f.bin", 8 * MIB, {MIB: b"new" * 100})
    SnapStore(root).create("s", "one", ["."], base_dir=base)
    make_sparse(base / "f.bin", 8 * MIB, {MIB: b"old" * 100})
    before = (base / "f.bin").read_bytes()
    failing = SnapStore(root, fs=FailingOperation("ftruncate", OSError(28, "No space")))
    with pytest.raises(RestoreError) as raised:
        failing.restore("s", "one")
    assert raised.value.rolled_back
    assert (base / "f.bin").read_bytes() == before


def test_pieces_follow_the_rules() -> None:
    data = b"\0" * BLOCK_BYTES + b"x" * (PIECE_BYTES + 10) + b"\0" * (2 * BLOCK_BYTES) + b"y"
    found = list(data_blocks(0, data))
    assert [offset for offset, _ in found] == [BLOCK_BYTES, PIECE_BYTES, found[2][0]]
    assert all(offset % BLOCK_BYTES == 0 for offset, _ in found)
    assert all(len(piece) <= PIECE_BYTES for _, piece in found)
    rebuilt = bytearray(len(data))
    for offset, piece in found:
        rebuilt[offset : offset + len(piece)] = piece
    assert bytes(rebuilt) == data


BAD_MAPS: dict[str, Any] = {
    "past the end": [[0, 10, b"d" * 32], [100, 20, b"d" * 32]],
    "overlapping": [[0, 10, b"d" * 32], [5, 10, b"d" * 32]],
    "empty extent": [[0, 0, b"d" * 32]],
    "too long a piece": [[0, PIECE_BYTES + 1, b"d" * 32]],
    "short digest": [[0, 10, b"d"]],
    "not a list": {"a": 1},
}


@pytest.mark.parametrize("rows", BAD_MAPS.values(), ids=BAD_MAPS.keys())
def test_maps_that_do_not_fit_are_refused(rows: Any) -> None:
    import msgpack

    from snapstore.format.extents import EXTENT_MAGIC, CorruptExtentMapError

    data = EXTENT_MAGIC + msgpack.packb([110, rows], use_bin_type=True)
    with pytest.raises(CorruptExtentMapError):
        decode_map(data, 110)
    good = encode_map(110, [Extent(0, 10, b"d" * 32)])
    with pytest.raises(CorruptExtentMapError):
        decode_map(good, 111)  # a map for another size


def _install_hostile(store: SnapStore, map_data: bytes, size: int, pieces: list[bytes]) -> None:
    """Commit a snapshot whose one file row claims ``map_data`` as its extent map."""
    digest = map_digest(map_data)
    root = encode_tree([("f.bin", "file", 0o644, size, 0, digest, None, {"extents": True})])
    plant_snapshot(store, root, blobs=[*pieces, map_data], info=hostile_info(1, size))


HOSTILE = {
    "extent past the file's end": (100, [Extent(90, 20, map_digest(b"p" * 20))], [b"p" * 20]),
    "map for another size": (50, [Extent(0, 20, map_digest(b"p" * 20))], [b"p" * 20]),
    "piece of another length": (100, [Extent(0, 30, map_digest(b"p" * 20))], [b"p" * 20]),
    "missing piece": (100, [Extent(0, 20, map_digest(b"q" * 20))], []),
}


@pytest.mark.parametrize("case", HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_extent_maps_are_corrupt_snapshots(
    store: SnapStore, tmp_path: Path, case: tuple[int, list[Extent], list[bytes]]
) -> None:
    size, extents, pieces = case
    map_size = extents[0].offset + extents[0].length if size == 50 else size
    map_data = encode_map(map_size, extents)
    _install_hostile(store, map_data, size, pieces)
    with pytest.raises((CorruptManifestError, CorruptBlobError, MissingBlobError)):
        store.read("s", "bad", "f.bin")
    target = tmp_path / "target"
    target.mkdir()
    (target / "keep.txt").write_text("mine")
    with pytest.raises(RestoreError) as raised:
        store.restore("s", "bad", target)
    assert raised.value.rolled_back
    assert sorted(p.name for p in target.iterdir()) == ["keep.txt"]
    assert not store.verify().ok
    store.gc()
    with repository(store).blobs_in_use():  # what the snapshot holds is not garbage
        assert repository(store).blobs.has(map_digest(map_data))
        assert all(repository(store).blobs.has(map_digest(piece)) for piece in pieces)


def test_entries_rebuilt_into_trees_keep_their_attributes() -> None:
    from snapstore.format.rows import entry_rows
    from snapstore.format.tree import decode_tree
    from snapstore.format.treebuild import build_trees
    from snapstore.models import FileEntry

    digest = b"d" * 32
    entries = [
        FileEntry("a", "file", 0o644, 10, 0, digest, None, extents=True),
        FileEntry("b", "file", 0o644, 10, 0, digest, None, extents=True, link="a"),
        FileEntry("c", "file", 0o644, 10, 0, digest),
    ]
    built = build_trees(entries)
    rows = decode_tree(built.objects[built.root.digest])
    assert [row[7] for row in rows] == [{"extents": True}, {"extents": True, "link": "a"}, None]
    with pytest.raises(ValueError, match="format 1"):
        entry_rows(entries)
    assert entry_rows(entries[2:]) == [("c", "file", 0o644, 10, 0, digest, None)]


@pytest.mark.parametrize("size", [1 << 40, (1 << 62) + 7], ids=["1 TiB", "2^62"])
def test_a_huge_size_claimed_for_a_file_with_holes_allocates_nothing(
    store: SnapStore, size: int
) -> None:
    """A forged row claims a file with holes of any size: the map is checked before any
    memory is set aside for the holes, and a map that does agree still gets a typed error."""
    _install_hostile(store, encode_map(100, []), size, [])
    with pytest.raises(CorruptManifestError):  # the map records another size
        store.read("s", "bad", "f.bin")
    _install_hostile(store, encode_map(size, []), size, [])
    with pytest.raises(FileTooLargeError):
        store.read("s", "bad", "f.bin")


def test_a_file_with_holes_over_the_read_limit_is_refused_by_read_not_by_restore(
    store: SnapStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from snapstore.repo import contents

    monkeypatch.setattr(contents, "MAX_READ_WITH_HOLES", 1 << 20)
    base = tmp_path / "project"
    make_sparse(base / "disk.img", 4 * MIB, {MIB: b"data"})
    store.create("s", "one", ["."], base_dir=base)
    with pytest.raises(FileTooLargeError, match="restore it instead"):
        store.read("s", "one", "disk.img")
    store.restore("s", "one", tmp_path / "out")
    assert (tmp_path / "out" / "disk.img").read_bytes() == expected_bytes(4 * MIB, {MIB: b"data"})
