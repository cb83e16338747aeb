"""The stored size a checkpoint records in its manifest header (``stored_bytes``): the bytes
its create added to the store (new packs and loose blobs), read by listings from the header
alone."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import msgpack
import pytest
from helpers.trees import write_tree

from snapstore import SnapStore
from snapstore.errors import CorruptManifestError
from snapstore.format.header import ROW_TIMESTAMPS, header_from_row, header_row
from snapstore.format.manifest import decode, decode_header, encode
from snapstore.internals import repository
from snapstore.repo.batch import PACKED_MAX_BYTES
from snapstore.worktree.changes import ChangedPaths


@pytest.fixture
def store(tmp_path: Path) -> SnapStore:
    return SnapStore(tmp_path / "store", durable=False)


def _data_objects(root: Path) -> dict[str, int]:
    """The store's packs and loose blobs (what a create adds to), with their sizes."""
    found = {}
    for directory in ("packs", "blobs"):
        for path in (root / directory).rglob("*"):
            if path.is_file() and (directory == "blobs" or path.suffix == ".pack"):
                found[str(path)] = path.stat().st_size
    return found


def _added(before: dict[str, int], after: dict[str, int]) -> int:
    """New objects' sizes, and what an appendable pack grew by."""
    return sum(size - before.get(name, 0) for name, size in after.items())


def _manifest_path(store: SnapStore, session: str, name: str) -> Path:
    return Path(repository(store).catalog.manifest_path(session, name))


def test_the_header_field_round_trips_and_is_checked(store: SnapStore, tmp_path: Path) -> None:
    base = tmp_path / "p"
    write_tree(base, {"a.txt": "a\n"})
    info = store.create("s", "n", ["."], base_dir=base)
    data = _manifest_path(store, "s", "n").read_bytes()
    manifest, header = decode(data), decode_header(data, len(data))
    for stored in (0, 1, 2**64 - 1):
        data = encode(
            dataclasses.replace(manifest.info, stored_bytes=stored),
            created_ns=header.created_ns,
            expires_ns=None,
            tree=manifest.tree,
            seq=3,
        )
        decoded = decode_header(data, len(data))
        assert decoded.info.stored_bytes == stored and decoded.seq == 3
        assert decode(data).info.stored_bytes == stored
        row = header_row(decoded, "n-dir", decoded.created_ns)
        packed = msgpack.packb(row, use_bin_type=True, datetime=True)
        unpacked = msgpack.unpackb(packed, use_list=False, timestamp=ROW_TIMESTAMPS)
        assert header_from_row(decoded.info.session, unpacked) == decoded
    for bad in (-1, True, "12", 1.5):
        data = encode(
            dataclasses.replace(manifest.info, stored_bytes=bad),  # type: ignore[arg-type]
            created_ns=header.created_ns,
            expires_ns=None,
            tree=manifest.tree,
        )
        with pytest.raises(CorruptManifestError, match="bad stored size"):
            decode_header(data, len(data))
    assert info.stored_bytes is not None


def test_a_create_records_the_packs_it_wrote_and_a_repeat_records_nothing(
    store: SnapStore, tmp_path: Path
) -> None:
    base = tmp_path / "p"
    base.mkdir()
    (base / "random.bin").write_bytes(os.urandom(200_000))
    (base / "zeros.bin").write_bytes(bytes(1_000_000))
    before = _data_objects(Path(store.root))
    first = store.create("s", "first", ["."], base_dir=base)
    written = _added(before, _data_objects(Path(store.root)))
    assert first.stored_bytes == written
    assert 200_000 < written < 230_000  # random bytes do not compress; zeros do
    again = store.create("s", "again", ["."], base_dir=base)
    assert again.stored_bytes == 0
    assert [(i.name, i.stored_bytes) for i in store.list("s")] == [
        ("first", written),
        ("again", 0),
    ]

    (base / "new.bin").write_bytes(os.urandom(50_000))
    before = _data_objects(Path(store.root))
    third = store.create("s", "third", ["."], base_dir=base)
    assert third.stored_bytes == _added(before, _data_objects(Path(store.root)))
    assert 50_000 < (third.stored_bytes or 0) < 55_000  # the new file and the root tree


def test_a_large_file_counts_its_loose_blob_once(store: SnapStore, tmp_path: Path) -> None:
    base = tmp_path / "p"
    base.mkdir()
    (base / "large.bin").write_bytes(os.urandom(PACKED_MAX_BYTES + 1000))
    before = _data_objects(Path(store.root))
    first = store.create("s", "first", ["."], base_dir=base)
    assert first.stored_bytes == _added(before, _data_objects(Path(store.root)))
    assert (first.stored_bytes or 0) > PACKED_MAX_BYTES
    store.create("other", "copy", ["."], base_dir=base, rehash=True)
    assert store.get("other", "copy").info.stored_bytes == 0


def test_state_values_record_no_stored_size(store: SnapStore) -> None:
    store.put_state("etl", "cursor", {"offset": 7})
    assert [info.stored_bytes for info in store.list("etl")] == [None]


def test_an_undo_backup_records_what_it_added(store: SnapStore, tmp_path: Path) -> None:
    base = tmp_path / "p"
    base.mkdir()
    (base / "f.bin").write_bytes(os.urandom(30_000))
    store.create("s", "n", ["."], base_dir=base)
    (base / "f.bin").write_bytes(os.urandom(40_000))
    store.restore("s", "n", target=base)
    [backup] = store.backups("s")
    assert 40_000 < (backup.stored_bytes or 0) < 45_000


def test_a_watched_create_records_what_it_added_and_nothing_when_nothing_changed(
    store: SnapStore, tmp_path: Path
) -> None:
    base = tmp_path / "p"
    write_tree(base, {"a.txt": "a\n", "src/b.txt": "b\n"})
    (base / "src/big.bin").write_bytes(os.urandom(20_000))
    first = store.create_incremental(
        "s", "n", ["."], base_dir=base, parent=None, changes=lambda: None
    ).info
    assert 20_000 < (first.stored_bytes or 0) < 22_000
    unchanged = store.create_incremental(
        "s", "n", ["."], base_dir=base, parent=first, changes=lambda: ChangedPaths()
    )
    assert unchanged.scan == "incremental" and unchanged.info.stored_bytes == 0
    (base / "src/new.bin").write_bytes(os.urandom(10_000))
    before = _data_objects(Path(store.root))
    changed = store.create_incremental(
        "s",
        "n",
        ["."],
        base_dir=base,
        parent=unchanged.info,
        changes=lambda: ChangedPaths(frozenset({"src/new.bin"}), frozenset({"src"})),
    )
    assert changed.scan == "incremental"
    assert changed.info.stored_bytes == _added(before, _data_objects(Path(store.root)))
    assert 10_000 < (changed.info.stored_bytes or 0) < 11_000


def test_manifests_without_the_field_list_with_none(store: SnapStore, tmp_path: Path) -> None:
    base = tmp_path / "p"
    write_tree(base, {"a.txt": "a\n"})
    store.create("s", "n", ["."], base_dir=base)
    path = _manifest_path(store, "s", "n")
    data = path.read_bytes()
    manifest, header = decode(data), decode_header(data, len(data))
    old = encode(
        dataclasses.replace(manifest.info, stored_bytes=None),
        created_ns=header.created_ns,
        expires_ns=None,
        tree=manifest.tree,
        seq=header.seq,
    )
    assert b"stored_bytes" not in old
    path.write_bytes(old)
    fresh = SnapStore(store.root)
    [info] = fresh.list("s")
    assert info.stored_bytes is None and info.file_count == 1
    assert fresh.get("s", "n").entries
