"""Packs: small blobs of one create go into one pack plus index; readers, verify and gc find
them by digest exactly as they find loose blobs, and damage is reported, never served."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import blake3
import pytest
from helpers.blobs import loosen, two_file_packs
from helpers.trees import read_tree, write_tree

from snapstore import CorruptBlobError, RestoreError, SnapStore
from snapstore.backend.local import LocalBackend
from snapstore.backend.seam import Kind
from snapstore.errors import CorruptPackError
from snapstore.format import packfile as packs
from snapstore.format.codec import CODEC_ZSTD
from snapstore.format.packfile import KIND_TREE, MAX_BLOCK_RAW, decode_index, encode_index
from snapstore.internals import repository
from snapstore.repo.batch import PACKED_MAX_BYTES, BlobBatch
from snapstore.repo.contents import load_map
from snapstore.repo.packs import BLOCK_BYTES, PackWriter, read_index


def many_files(base: Path, count: int, *, tag: str = "") -> dict[str, bytes]:
    files = {f"d{i % 5}/f{i:03d}.txt": f"file {i} {tag}\n".encode() * (i + 1) for i in range(count)}
    write_tree(base, files)
    return files


def pack_files(root: Path) -> list[str]:
    return sorted(name for name in os.listdir(root / "packs") if name != "log")


def loose_count(root: Path) -> int:
    return sum(len(files) for _, _, files in os.walk(root / "blobs"))


BLOCKS = [
    packs.Block(18, 500, 500, packs.CODEC_NONE, packs.KIND_DATA),
    packs.Block(528, 100, 900, 1, packs.KIND_TREE),
]


def test_index_round_trip_and_validation() -> None:
    entries = {bytes([i]) * 32: (i % 2, 4 + i * 20, 10) for i in range(5)}
    data = encode_index(BLOCKS, entries, 10_000)
    decoded = decode_index("a" * 32, data)
    assert decoded.entries == entries and list(decoded.blocks) == BLOCKS
    for broken in (data[:-1], data[:20], b"X" + data[1:], data[:30] + b"\xff" + data[31:]):
        with pytest.raises(CorruptPackError):
            decode_index("a" * 32, broken)
    outside = encode_index(BLOCKS, {b"\x01" * 32: (0, 4, 10_000)}, 10_000)
    with pytest.raises(CorruptPackError, match="outside"):
        decode_index("a" * 32, outside)
    past_the_end = encode_index(BLOCKS, {}, 600)
    with pytest.raises(CorruptPackError, match="outside the pack"):
        decode_index("a" * 32, past_the_end)
    no_block = encode_index(BLOCKS, {b"\x01" * 32: (2, 4, 1)}, 10_000)
    with pytest.raises(CorruptPackError, match="block"):
        decode_index("a" * 32, no_block)
    raw_lie = [packs.Block(18, 500, 400, packs.CODEC_NONE, packs.KIND_DATA)]
    with pytest.raises(CorruptPackError, match="raw bytes"):
        decode_index("a" * 32, encode_index(raw_lie, {}, 10_000))
    assert decode_index("a" * 32, encode_index([], {}, 8)).entries == {}


def test_an_index_out_of_digest_order_is_corrupt() -> None:
    rows = [(b"\x02" * 32, 0, 4, 1), (b"\x01" * 32, 0, 9, 1)]
    body = packs.INDEX_HEAD.pack(packs.INDEX_MAGIC, 1, 2, 1_000)
    body += packs.INDEX_BLOCK.pack(*BLOCKS[0])
    body += b"".join(packs.INDEX_ENTRY.pack(*row) for row in rows)
    data = body + blake3.blake3(body).digest(length=packs.CHECKSUM_BYTES)
    with pytest.raises(CorruptPackError, match="not sorted"):
        decode_index("a" * 32, data)


def test_a_format_1_index_reads_as_one_raw_block_per_blob() -> None:
    rows = [(b"\x01" * 32, 48, 5), (b"\x02" * 32, 93, 7)]
    body = packs.INDEX_HEAD_V1.pack(packs.INDEX_MAGIC_V1, 2, 200)
    body += b"".join(packs.INDEX_ENTRY_V1.pack(*row) for row in rows)
    index = decode_index("a" * 32, body + blake3.blake3(body).digest(length=16))
    assert index.version == 1 and index.size_of(b"\x02" * 32) == 7
    number, offset, size = index.entries[b"\x02" * 32]
    assert (index.blocks[number].offset + offset, size) == (93, 7)


def test_pack_writer_publishes_pack_then_index(tmp_path: Path) -> None:
    backend = LocalBackend(str(tmp_path))
    backend.open(create=True)
    writer = PackWriter(backend)
    writer.add(b"\x02" * 32, b"two")
    writer.add(b"\x01" * 32, b"one")
    writer.add(b"\x01" * 32, b"one")
    index = writer.publish()
    assert sorted(os.listdir(tmp_path / "packs")) == [
        index.pack_id + ".idx",
        index.pack_id + ".pack",
    ]
    assert os.listdir(tmp_path / "tmp") == []
    loaded = read_index(backend, index.pack_id)
    assert loaded.entries == index.entries and len(loaded.entries) == 2
    pack = (tmp_path / "packs" / (index.pack_id + ".pack")).read_bytes()
    number, offset, size = loaded.entries[b"\x01" * 32]
    block = loaded.blocks[number]
    raw = pack[block.offset : block.offset + block.stored]  # too small to compress: raw
    assert block.codec == packs.CODEC_NONE and raw[offset : offset + size] == b"one"


def test_blocks_compress_and_trees_get_their_own(tmp_path: Path) -> None:
    backend = LocalBackend(str(tmp_path))
    backend.open(create=True)
    writer = PackWriter(backend)
    text = b"the same line of source text\n" * 2000
    writer.add(b"\x01" * 32, text)
    writer.add(b"\x02" * 32, b"a tree object " * 50, packs.KIND_TREE)
    index = writer.publish()
    data_block, tree_block = index.blocks
    assert data_block.codec == CODEC_ZSTD and data_block.stored < len(text) // 10
    assert (data_block.kind, tree_block.kind) == (packs.KIND_DATA, packs.KIND_TREE)
    fresh = SnapStore(tmp_path)
    assert (
        repository(fresh).blobs.packs.read_unverified(
            repository(fresh).blobs.packs.locate(b"\x01" * 32)
        )
        == text
    )


def test_incompressible_blocks_are_stored_as_they_are(tmp_path: Path) -> None:
    backend = LocalBackend(str(tmp_path))
    backend.open(create=True)
    writer = PackWriter(backend)
    writer.add(b"\x01" * 32, os.urandom(100_000))
    (block,) = writer.publish().blocks
    assert block.codec == packs.CODEC_NONE and block.stored == block.raw


def test_many_small_files_go_into_one_pack(store: SnapStore, root: Path, tmp_path: Path) -> None:
    """A file as large as a loose blob joins them too: as content-defined chunks, its map
    among them."""
    files = many_files(tmp_path / "p", 40)
    (tmp_path / "p" / "big.bin").write_bytes(os.urandom(PACKED_MAX_BYTES + 10))
    store.create("s", "a", ["."], base_dir=tmp_path / "p")
    assert len(pack_files(root)) == 2
    assert loose_count(root) == 0
    assert store.read("s", "a", "d1/f001.txt") == files["d1/f001.txt"]
    store.restore("s", "a", tmp_path / "out")
    assert read_tree(tmp_path / "out") == read_tree(tmp_path / "p")
    report = store.verify(deep=True)
    big = store.get("s", "a").entry("big.bin")
    assert big is not None and big.digest is not None and big.extents
    chunks = len(load_map(repository(store).blobs, big.digest, big.size))
    trees = 6  # the base directory and d0..d4
    expected = len(files) + 1 + chunks + trees
    assert report.ok and report.garbage == [] and report.blobs_checked == expected


def test_even_one_new_small_blob_goes_into_a_pack(
    store: SnapStore, root: Path, tmp_path: Path
) -> None:
    """No forest of small loose files, each with a directory to flush at every create."""
    many_files(tmp_path / "p", 3)
    store.create("s", "a", ["."], base_dir=tmp_path / "p")
    assert len(pack_files(root)) == 1 and loose_count(root) == 0  # an appendable pack
    (pack,) = pack_files(root)
    size = (root / "packs" / pack).stat().st_size
    (tmp_path / "p" / "one-more.txt").write_text("one more")
    store.create("s", "b", ["."], base_dir=tmp_path / "p")
    assert pack_files(root) == [pack] and loose_count(root) == 0  # a segment appended
    assert (root / "packs" / pack).stat().st_size > size


def test_second_snapshot_of_the_same_files_adds_no_pack(
    store: SnapStore, root: Path, tmp_path: Path
) -> None:
    many_files(tmp_path / "p", 50)
    store.create("s", "a", ["."], base_dir=tmp_path / "p")
    store.create("s", "b", ["."], base_dir=tmp_path / "p")
    store.create("t", "c", ["."], base_dir=tmp_path / "p")
    assert len(pack_files(root)) == 1
    assert (
        len(list(repository(store).blobs.iter_digests())) == 50 + 6
    )  # and the six directory listings


def test_other_processes_packs_are_seen(root: Path, tmp_path: Path) -> None:
    many_files(tmp_path / "p", 50)
    reader = SnapStore(root)
    reader.list()
    SnapStore(root).create("s", "a", ["."], base_dir=tmp_path / "p")
    assert reader.read("s", "a", "d0/f000.txt") == b"file 0 \n"
    assert reader.verify().ok


def test_a_refresh_reads_the_pack_log_instead_of_listing_the_packs(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every create refreshes the pack list under the gc lock: from the pack log, loading only
    the indexes of packs other processes published since; the map from digest to pack grows
    in place, and is built again (a pass over every digest) only after a listing."""
    many_files(tmp_path / "p", 50)
    store = SnapStore(root)
    store.create("s", "a", ["."], base_dir=tmp_path / "p")
    packs = repository(store).blobs.packs
    packs.refresh()
    before = packs.by_digest()
    known = len(before)
    listings = []
    names = repository(store).backend.names

    def counted(kind: Kind, prefix: str = "") -> list[str]:
        listings.append(kind)
        return names(kind, prefix)

    monkeypatch.setattr(repository(store).backend, "names", counted)
    packs.refresh()
    assert packs.by_digest() is before
    many_files(tmp_path / "q", 5, tag="other")
    SnapStore(root).create("s", "b", ["."], base_dir=tmp_path / "q")
    packs.refresh()
    assert packs.by_digest() is before and len(before) > known
    assert Kind.PACK not in listings and Kind.INDEX not in listings
    other = SnapStore(root)
    other.delete("s", "b")
    other.gc()  # deletes the pack of "b": a new log, so the next refresh lists the packs
    packs.refresh()
    assert Kind.INDEX in listings
    assert packs.by_digest() is not before and len(packs.by_digest()) == known


def test_a_pack_missing_from_the_log_is_found_by_a_reader_that_misses_a_blob(
    root: Path, tmp_path: Path
) -> None:
    many_files(tmp_path / "p", 5)
    reader = SnapStore(root)
    reader.create("s", "a", ["."], base_dir=tmp_path / "p")
    many_files(tmp_path / "q", 5, tag="new")
    writer = SnapStore(root)
    log = root / "packs" / "log"
    kept = log.read_bytes()
    writer.create("s", "b", ["."], base_dir=tmp_path / "q")
    log.write_bytes(kept)  # the line naming the new pack was lost
    assert reader.read("s", "b", "d0/f000.txt") == (tmp_path / "q" / "d0/f000.txt").read_bytes()


def _corrupt_packed_file(store: SnapStore, root: Path, digest: bytes) -> None:
    """Flip a byte of a blob stored raw in its pack."""
    (pack,) = (root / "packs").glob("*.pack")
    location = repository(store).blobs.packs.locate(digest)
    assert location is not None and location.block.codec == packs.CODEC_NONE
    pack.chmod(0o644)
    data = bytearray(pack.read_bytes())
    data[location.block.offset + location.offset] ^= 0xFF
    pack.write_bytes(bytes(data))


def test_corrupt_packed_blob_is_detected_and_never_restored(
    store: SnapStore, root: Path, tmp_path: Path
) -> None:
    for i in range(40):  # incompressible, so each block is stored raw
        write_tree(tmp_path / "p", {f"d{i % 5}/f{i:03d}.txt": os.urandom(200)})
    store.create("s", "a", ["."], base_dir=tmp_path / "p")
    digest = store.get("s", "a").entry("d4/f039.txt").digest  # type: ignore[union-attr]
    assert digest is not None
    _corrupt_packed_file(store, root, digest)
    assert store.verify().ok
    deep = store.verify(deep=True)
    assert not deep.ok and len(deep.problems) == 1
    with pytest.raises(CorruptBlobError):
        store.read("s", "a", "d4/f039.txt")
    with pytest.raises(RestoreError) as caught:
        store.restore("s", "a", tmp_path / "out")
    assert caught.value.rolled_back
    assert not (tmp_path / "out").exists()


def test_truncated_pack_and_broken_index_are_problems(
    store: SnapStore, root: Path, tmp_path: Path
) -> None:
    many_files(tmp_path / "p", 40)
    two_file_packs(store).create("s", "a", ["."], base_dir=tmp_path / "p")
    (pack,) = (root / "packs").glob("*.pack")
    pack.chmod(0o644)
    pack.write_bytes(pack.read_bytes()[:-10])
    report = SnapStore(root).verify()
    assert not report.ok and any("index says" in p for p in report.problems)
    with pytest.raises(CorruptPackError):
        SnapStore(root).read("s", "a", "d4/f039.txt")
    (index,) = (root / "packs").glob("*.idx")
    index.chmod(0o644)
    index.write_bytes(b"garbage")
    report = SnapStore(root).verify()
    assert not report.ok and any("pack index" in p for p in report.problems)
    assert any("missing" in p for p in report.problems)
    gc = SnapStore(root).gc()  # the snapshot's trees are in that pack: its references are unknown
    assert gc.skipped and "cannot be read" in (gc.reason or "")
    assert index.exists() and pack.exists()


def test_gc_deletes_unreferenced_packs_and_orphans(
    store: SnapStore, root: Path, tmp_path: Path
) -> None:
    many_files(tmp_path / "p", 40)
    store.create("s", "a", ["."], base_dir=tmp_path / "p")
    (index,) = (root / "packs").glob("*.pack")  # an appendable pack: no index file
    orphan = root / "packs" / ("f" * 32 + ".pack")
    orphan.write_bytes(b"a pack whose writer died before its index")
    assert str(orphan) in store.verify().garbage
    store.delete("s", "a")
    garbage = store.verify().garbage
    assert any(index.stem in g and "46 unreferenced" in g for g in garbage)
    dry = store.gc(dry_run=True)
    assert dry.blobs_deleted == 46 and pack_files(root) != []  # 40 files, 6 listings
    report = store.gc()
    assert report.blobs_deleted == 46 and report.packs_deleted == 1
    assert report.bytes_freed > 0
    assert pack_files(root) == []
    assert store.verify().garbage == []


def test_gc_rewrites_a_pack_that_is_mostly_garbage(
    store: SnapStore, root: Path, tmp_path: Path
) -> None:
    files = many_files(tmp_path / "p", 60)
    store.create("s", "all", ["."], base_dir=tmp_path / "p")
    repository(store).blobs.close()  # "few" in a pack of its own, as another process writes
    store.create("s", "few", ["d0"], base_dir=tmp_path / "p")
    (old, _) = sorted((root / "packs").glob("*.pack"), key=lambda p: -p.stat().st_size)
    store.delete("s", "all")
    report = store.gc()
    # the pack of "all" (and the small one of "few", merged with it)
    assert report.packs_written == 1 and report.packs_deleted == 2
    assert report.blobs_deleted == 48 + 5  # and the listings only "all" had
    (new,) = (root / "packs").glob("*.idx")
    assert new.stem != old.stem
    # 12 files, the listing of d0 and the base directory's listing in "few"
    assert len(read_index(LocalBackend(str(root)), new.stem).entries) == 14
    fresh = SnapStore(root)
    assert fresh.read("s", "few", "d0/f005.txt") == files["d0/f005.txt"]
    report_after = fresh.verify(deep=True)
    assert report_after.ok and report_after.garbage == []
    assert fresh.gc().packs_written == 0


def test_gc_keeps_a_pack_with_little_garbage(store: SnapStore, root: Path, tmp_path: Path) -> None:
    many_files(tmp_path / "p", 60)
    store.create("s", "all", ["."], base_dir=tmp_path / "p")
    (tmp_path / "p" / "d0" / "f000.txt").unlink()
    store.create("s", "most", ["."], base_dir=tmp_path / "p")
    store.delete("s", "all")
    before = pack_files(root)
    report = store.gc()
    assert report.packs_written == 0 and report.blobs_deleted == 0
    assert pack_files(root) == before
    assert store.verify().garbage == []


def test_gc_merges_small_packs_geometrically(store: SnapStore, root: Path, tmp_path: Path) -> None:
    """One pack per create; after each gc every pack is at least twice the size of all the
    smaller ones together, so their number stays logarithmic in the store's size."""
    counts = []
    for round_ in range(24):
        many_files(tmp_path / f"p{round_}", 10, tag=str(round_))
        store.create("s", f"n{round_}", ["."], base_dir=tmp_path / f"p{round_}")
        report = store.gc()
        assert report.blobs_deleted == 0 and not report.skipped
        sizes = sorted(p.stat().st_size for p in (root / "packs").glob("*.pack"))
        for position, size in enumerate(sizes):
            assert size >= 2 * sum(sizes[:position]), sizes
        counts.append(len(sizes))
    assert max(counts) <= 5
    fresh = SnapStore(root)
    assert fresh.verify(deep=True).ok and fresh.verify().garbage == []
    fresh.restore("s", "n3", tmp_path / "out")
    assert read_tree(tmp_path / "out") == read_tree(tmp_path / "p3")


def test_gc_takes_small_loose_blobs_into_a_pack(
    store: SnapStore, root: Path, tmp_path: Path
) -> None:
    """Stores made before every small blob was packed hold small loose blobs: gc packs them."""
    many_files(tmp_path / "p", 5)
    store.create("s", "a", ["."], base_dir=tmp_path / "p")
    for entry in store.get("s", "a").entries:
        if entry.digest is not None:
            loosen(store, entry.digest)
    assert loose_count(root) == 5
    report = store.gc()
    assert report.packs_written == 1 and loose_count(root) == 0
    assert SnapStore(root).verify(deep=True).ok


def test_a_pack_holding_only_an_empty_file_is_kept(
    store: SnapStore, root: Path, tmp_path: Path
) -> None:
    """An empty blob has no bytes; the pack holding it is still in use."""
    write_tree(tmp_path / "p", {"empty.txt": b""})
    store.create("s", "a", ["."], base_dir=tmp_path / "p")
    assert store.gc().packs_deleted == 0
    assert SnapStore(root).verify(deep=True).ok
    assert store.read("s", "a", "empty.txt") == b""


def _read_in_another_process(root: Path, digests: list[bytes]) -> None:
    """Read each blob with a fresh process (nothing remembered from the writer's)."""
    script = (
        "import sys\n"
        "from snapstore import SnapStore\n"
        "from snapstore.internals import repository\n"
        "store = SnapStore(sys.argv[1])\n"
        "for name in sys.argv[2:]:\n"
        "    repository(store).blobs.verify(bytes.fromhex(name))\n"
    )
    subprocess.run(
        [sys.executable, "-c", script, str(root), *(d.hex() for d in digests)], check=True
    )


def test_a_blob_over_the_packed_size_goes_loose_even_through_a_batch(tmp_path: Path) -> None:
    store = SnapStore(tmp_path / "store")
    data = os.urandom(PACKED_MAX_BYTES + 1)
    digest = blake3.blake3(data).digest()
    batch = BlobBatch(repository(store).blobs)
    batch.add(digest, data, KIND_TREE)
    batch.finish()
    assert repository(store).blobs.loose.has(digest, expected_size=len(data))
    _read_in_another_process(store.root, [digest])


def test_no_block_outgrows_what_a_reader_accepts(tmp_path: Path) -> None:
    store = SnapStore(tmp_path / "store")
    small, large = os.urandom(BLOCK_BYTES - 10), os.urandom(MAX_BLOCK_RAW - 1024)
    writer = PackWriter(repository(store).backend)
    for data in (small, large):
        writer.add(blake3.blake3(data).digest(), data)
    with pytest.raises(ValueError, match="too large for a pack"):
        writer.add(b"\0" * 32, bytes(MAX_BLOCK_RAW))
    index = writer.publish()
    assert max(block.raw for block in index.blocks) <= MAX_BLOCK_RAW
    _read_in_another_process(store.root, [blake3.blake3(d).digest() for d in (small, large)])


def test_a_pack_an_older_version_deleted_is_never_counted_on(root: Path, tmp_path: Path) -> None:
    """Until a store is marked format 3, a process of the version before may gc it, and its gc
    deletes packs without starting a new pack log. A process of this version that read the
    store (and so began the log) must not then follow the log, which does not tell it the
    pack is gone: a create would count on the deleted pack's blobs and commit a snapshot
    whose files are missing."""
    files = many_files(tmp_path / "p", 5)
    SnapStore(root).create("s", "a", ["."], base_dir=tmp_path / "p")
    (root / "packs" / "log").unlink()
    marker = root / "FORMAT"
    marker.chmod(0o644)
    marker.write_text("snapstore format 2\n")
    reader = SnapStore(root)
    assert reader.read("s", "a", "d0/f000.txt") == files["d0/f000.txt"]
    SnapStore(root).delete("s", "a")
    for name in pack_files(root):  # the older version's gc: no pack log in format 2
        (root / "packs" / name).unlink()
    reader.create("s", "b", ["."], base_dir=tmp_path / "p")
    assert reader.read("s", "b", "d0/f000.txt") == files["d0/f000.txt"]
    assert reader.verify().ok
