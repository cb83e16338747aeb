"""Large pack indexes are looked up where they lie in their bytes, not decoded whole: a new
process that needs a few blobs of the pack gc wrote (every live blob of the store) bisects
its entry table. Lookups, damage, deletions and the passes that read every entry (gc,
verify, stats, a fold) behave as they do with an index decoded whole."""

from __future__ import annotations

import os
from pathlib import Path

import blake3
import pytest
from helpers.blobs import two_file_packs
from helpers.trees import write_tree

from snapstore import SnapStore
from snapstore.errors import CorruptPackError, MissingBlobError
from snapstore.format import packfile
from snapstore.format.hashing import new_hasher
from snapstore.format.indextable import LAZY_ENTRIES, EntryTable
from snapstore.format.packfile import CHECKSUM_BYTES, INDEX_HEAD, Block, decode_index, encode_index
from snapstore.internals import repository
from snapstore.maintenance.fold import write_merged
from snapstore.maintenance.foldpolicy import FoldPolicy
from snapstore.repo import packmap
from snapstore.repo.packs import PackWriter, forget_indexes, read_index

BLOCKS = [Block(18, 500, 500, packfile.CODEC_NONE, packfile.KIND_DATA)]
ENTRY_TABLE = INDEX_HEAD.size + packfile.INDEX_BLOCK.size * len(BLOCKS)


def digest_of(data: bytes) -> bytes:
    hasher = new_hasher(len(data))
    hasher.update(data)
    return hasher.digest()


def synthetic_entries(count: int) -> dict[bytes, tuple[int, int, int]]:
    """Entries with digests that share their first bytes in runs (as a large index's
    neighbours share a few), and some that share all but the last."""
    entries = {os.urandom(32): (0, 4 + n % 400, 10) for n in range(count)}
    shared = os.urandom(4)
    for n in range(40):
        entries[shared + os.urandom(28)] = (0, 4, n)
    twin = os.urandom(31)
    entries[twin + b"\x01"] = (0, 8, 1)
    entries[twin + b"\x03"] = (0, 8, 3)
    return entries


def resealed(data: bytes) -> bytes:
    """``data`` with its checksum made right again (what a hostile writer can do)."""
    body = data[:-CHECKSUM_BYTES]
    return body + blake3.blake3(body).digest(length=CHECKSUM_BYTES)


def forget_decoded(root: Path) -> None:
    """Forget the indexes this process decoded for the store at ``root``: what a new
    process sees."""
    forget_indexes(repository(SnapStore(root)).backend, set())


@pytest.fixture
def lazy_from_16(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every index of 16 entries or more is looked up in its bytes (the default bound is
    1,024), so that stores of a few dozen files exercise the large-index path."""
    monkeypatch.setattr(packfile, "LAZY_ENTRIES", 16)
    monkeypatch.setattr(packmap, "LARGE_PACK_ENTRIES", 16)


def test_an_entry_table_finds_every_digest_and_only_those() -> None:
    entries = synthetic_entries(LAZY_ENTRIES * 3)
    index = decode_index("a" * 32, encode_index(BLOCKS, entries, 10_000))
    table = index.entries
    assert isinstance(table, EntryTable)
    for digest, entry in entries.items():
        assert table.get(digest) == entry and table[digest] == entry and digest in table
    ordered = sorted(entries)
    misses = [b"\x00" * 32, b"\xff" * 32, ordered[0][:31] + b"\x00"]
    misses += [bytes(a[:31]) + bytes([(a[31] + 1) % 256]) for a in ordered[:50]]
    for digest in (d for d in misses if d not in entries):
        assert table.get(digest) is None and digest not in table
        with pytest.raises(KeyError):
            table[digest]
    assert b"short" not in table and 7 not in table
    assert not table.decoded and len(table) == len(entries)
    assert dict(table.items()) == entries and table.decoded
    assert index.total_bytes == sum(size for _, _, size in entries.values())


def test_a_small_index_is_decoded_whole() -> None:
    entries = synthetic_entries(10)
    index = decode_index("a" * 32, encode_index(BLOCKS, entries, 10_000))
    assert type(index.entries) is dict and index.entries == entries


@pytest.mark.parametrize("count", [10, LAZY_ENTRIES * 2])
def test_a_damaged_index_is_refused_when_read_whatever_its_size(count: int) -> None:
    """A flipped byte anywhere in the entry table fails the checksum, and a truncated index
    its counts, when the index is read: the same error for a small and a large index."""
    data = encode_index(BLOCKS, synthetic_entries(count), 10_000)
    flipped = bytearray(data)
    flipped[ENTRY_TABLE + 44 * (count // 2) + 3] ^= 0x40
    with pytest.raises(CorruptPackError, match="checksum mismatch"):
        decode_index("a" * 32, bytes(flipped))
    for cut in (data[:-1], data[: len(data) // 2], data[:20]):
        with pytest.raises(CorruptPackError, match=r"corrupt: (it is truncated|.* bytes where)"):
            decode_index("a" * 32, cut)


def test_entries_that_break_the_rules_behind_a_right_checksum_count_as_absent() -> None:
    """A hostile index with a right checksum: the entry a lookup finds is checked (one that
    breaks the rules counts as absent); reading the table whole checks every rule."""
    entries = synthetic_entries(LAZY_ENTRIES)
    ordered = sorted(entries)
    outside = dict(entries)
    outside[ordered[7]] = (0, 4, 10_000)  # past its block's 500 raw bytes
    data = encode_index(BLOCKS, outside, 10_000)
    table = decode_index("a" * 32, data).entries
    assert table.get(ordered[7]) is None and table.get(ordered[8]) == entries[ordered[8]]
    with pytest.raises(CorruptPackError, match="outside its block"):
        dict(table.items())
    with pytest.raises(CorruptPackError, match="outside its block"):
        list(table)
    swapped = bytearray(encode_index(BLOCKS, entries, 10_000))
    first, second = ENTRY_TABLE + 44 * 100, ENTRY_TABLE + 44 * 101
    swapped[first:second], swapped[second : second + 44] = (
        swapped[second : second + 44],
        swapped[first:second],
    )
    unsorted = decode_index("a" * 32, resealed(bytes(swapped))).entries
    with pytest.raises(CorruptPackError, match="not sorted"):
        unsorted.values()


def test_a_new_process_looks_up_a_few_blobs_without_decoding_the_index(root: Path) -> None:
    """The pack of gc's size, seen by a process that did not write it: lookups hit and miss
    through the index's bytes; its digests never enter the process's map one by one and its
    entries are never decoded whole."""
    store = SnapStore(root)
    repo = repository(store)
    contents = [f"blob {n} ".encode() + os.urandom(8) for n in range(3000)]
    blobs = {digest_of(data): data for data in contents}
    with repo.gc_lock.shared():
        writer = PackWriter(repo.backend)
        for digest, data in blobs.items():
            writer.add(digest, data)
        pack_id = writer.publish().pack_id
    forget_decoded(root)
    reader = repository(SnapStore(root)).blobs
    some = list(blobs)[::700]
    for digest in some:
        assert reader.has(digest, len(blobs[digest])) and reader.read(digest) == blobs[digest]
        location = reader.packs.locate(digest)
        assert location is not None and location.pack_id == pack_id
    missing = digest_of(b"never stored")
    assert not reader.has(missing) and reader.packs.locate(missing) is None
    (index,) = reader.packs.indexes()
    assert isinstance(index.entries, EntryTable) and not index.entries.decoded
    assert reader.packs.by_digest().mapped == 0
    assert [i.pack_id for i in reader.packs.by_digest().large] == [pack_id]


def test_a_flipped_byte_in_a_large_index_makes_its_blobs_missing_as_before(
    root: Path, tmp_path: Path, lazy_from_16: None
) -> None:
    write_tree(tmp_path / "p", {f"f{n:02d}.txt": f"file {n}\n" for n in range(40)})
    two_file_packs(SnapStore(root)).create("s", "a", ["."], base_dir=tmp_path / "p")
    (index_file,) = (root / "packs").glob("*.idx")
    data = bytearray(index_file.read_bytes())
    data[-CHECKSUM_BYTES - 44 * 5] ^= 0x01
    index_file.chmod(0o644)
    index_file.write_bytes(bytes(data))
    forget_decoded(root)
    with pytest.raises(CorruptPackError, match="checksum mismatch"):
        read_index(repository(SnapStore(root)).backend, index_file.stem)
    report = SnapStore(root).verify()
    assert not report.ok and any("checksum mismatch" in p for p in report.problems)
    assert SnapStore(root).gc().skipped and index_file.exists()


def test_a_hostile_large_index_is_broken_for_gc_and_verify(
    root: Path, tmp_path: Path, lazy_from_16: None
) -> None:
    """An index whose checksum is right but whose entries break the rules: gc and verify
    read every large index whole, so for them the pack is broken, as a corrupt index is
    (verify says so, gc leaves its files alone); a reader finds its other blobs."""
    files = {f"f{n:02d}.txt": f"file {n}\n" * 3 for n in range(40)}
    write_tree(tmp_path / "p", files)
    two_file_packs(SnapStore(root)).create("s", "a", ["."], base_dir=tmp_path / "p")
    (index_file,) = (root / "packs").glob("*.idx")
    pack_id = index_file.stem
    victim = SnapStore(root).get("s", "a").entry("f05.txt").digest  # type: ignore[union-attr]
    assert victim is not None
    data = bytearray(index_file.read_bytes())
    entry = data.index(victim, ENTRY_TABLE)
    data[entry + 36 : entry + 40] = (0xFFFF).to_bytes(4, "little")  # its offset, past its block
    index_file.chmod(0o644)
    index_file.write_bytes(resealed(bytes(data)))
    forget_decoded(root)
    reader = SnapStore(root)
    for name in files:
        if name != "f05.txt":
            assert reader.read("s", "a", name) == files[name].encode()
    with pytest.raises(MissingBlobError):
        reader.read("s", "a", "f05.txt")
    report = SnapStore(root).verify()
    assert not report.ok and any("outside its block" in p for p in report.problems)
    assert any(pack_id in p for p in report.problems)
    SnapStore(root).gc()
    assert index_file.exists() and (root / "packs" / f"{pack_id}.pack").exists()
    forget_decoded(root)  # a new process's stats reads the index whole, and finds it broken
    stats = SnapStore(root).stats()
    assert stats.packs == 0 and stats.packed_blobs == 0


def test_a_large_pack_deleted_by_gc_leaves_the_view_of_another_process(
    root: Path, tmp_path: Path, lazy_from_16: None
) -> None:
    old = {f"old{n:02d}.txt": f"old {n}\n" for n in range(40)}
    new = {f"new{n:02d}.txt": f"new {n}\n" for n in range(40)}
    write_tree(tmp_path / "p", {**old, **new})
    writer = two_file_packs(SnapStore(root, fold_threshold=0))
    writer.create("s", "old", list(old), base_dir=tmp_path / "p")
    writer.create("s", "new", list(new), base_dir=tmp_path / "p")
    forget_decoded(root)
    reader = SnapStore(root, fold_threshold=0)
    packs = repository(reader).blobs.packs
    packs.refresh()
    large = {index.pack_id for index in packs.by_digest().large}
    assert len(large) == 2 and packs.by_digest().mapped == 0
    old_digest = reader.get("s", "old").entry("old00.txt").digest  # type: ignore[union-attr]
    assert old_digest is not None and packs.locate(old_digest) is not None
    writer.delete("s", "old")
    assert writer.gc().packs_deleted >= 1
    packs.refresh()
    remaining = {index.pack_id for index in packs.by_digest().large}
    assert remaining < large
    assert packs.locate(old_digest) is None and old_digest not in packs.by_digest()
    for name, text in new.items():
        assert reader.read("s", "new", name) == text.encode()


def test_a_store_of_small_and_large_packs_reads_verifies_and_collects(
    root: Path, tmp_path: Path, lazy_from_16: None
) -> None:
    """Packs below the bound are mapped digest by digest, the others asked through their
    indexes: every read, the digests a pass over the map lists, verify and gc agree."""
    big = {f"big/{n:02d}.txt": f"big {n}\n" for n in range(60)}
    write_tree(tmp_path / "p", big)
    writer = two_file_packs(SnapStore(root, fold_threshold=0))
    writer.create("s", "big", ["big"], base_dir=tmp_path / "p")
    small: dict[str, str] = {}
    for n in range(4):
        name = f"small{n}.txt"
        small[name] = f"small {n} and {big['big/00.txt']}"
        (tmp_path / "p" / name).write_text(small[name])
        writer.create("s", f"small{n}", [name], base_dir=tmp_path / "p")
    forget_decoded(root)
    reader = SnapStore(root, fold_threshold=0)
    blobs = repository(reader).blobs
    blobs.refresh()
    assert len(blobs.packs.by_digest().large) == 1 and blobs.packs.by_digest().mapped > 0
    for name, text in big.items():
        assert reader.read("s", "big", name) == text.encode()
    for n, (name, text) in enumerate(small.items()):
        assert reader.read("s", f"small{n}", name) == text.encode()
    every = [index.entries for index in blobs.packs.indexes()]
    union = {digest for entries in every for digest in entries}
    assert set(blobs.iter_digests()) == union and len(blobs.packs.by_digest()) == len(union)
    assert reader.verify().ok
    writer.delete("s", "small0")
    writer.gc()
    assert SnapStore(root).verify().ok
    assert SnapStore(root).read("s", "big", "big/07.txt") == b"big 7\n"


def test_a_fold_passes_over_a_hostile_large_index(
    root: Path, tmp_path: Path, lazy_from_16: None
) -> None:
    """A fold reads the tables of the packs it folds whole: one whose entries break the
    rules behind a right checksum is left out (broken), the others fold."""
    writer = two_file_packs(SnapStore(root, fold_threshold=0))
    for name in ("a", "b", "c"):
        write_tree(tmp_path / name, {f"{name}{n:02d}.txt": f"{name} {n}\n" for n in range(20)})
        writer.create("s", name, ["."], base_dir=tmp_path / name)
    victim = writer.get("s", "b").entry("b03.txt").digest  # type: ignore[union-attr]
    assert victim is not None
    (hostile,) = [p for p in (root / "packs").glob("*.idx") if victim in p.read_bytes()]
    data = bytearray(hostile.read_bytes())
    entry = data.index(victim, ENTRY_TABLE)
    data[entry + 32 : entry + 36] = (9).to_bytes(4, "little")  # a block the pack lacks
    hostile.chmod(0o644)
    hostile.write_bytes(resealed(bytes(data)))
    forget_decoded(root)
    repo = repository(SnapStore(root, fold_threshold=0))
    fold = write_merged(repo, FoldPolicy(threshold=2))
    assert fold is not None and len(fold.sources) == 2 and hostile.stem not in fold.sources
    assert hostile.stem in repo.blobs.packs.broken()


def test_a_hostile_large_index_of_a_truncated_pack_breaks_only_that_pack(
    root: Path, tmp_path: Path, lazy_from_16: None
) -> None:
    """A pack cut short whose large index breaks the rules behind a right checksum: only
    that pack's blobs count as missing; reads of other packs, verify and gc go on."""
    files = {f"f{n:02d}.txt": f"file {n}\n" * 3 for n in range(40)}
    write_tree(tmp_path / "p", files)
    two_file_packs(SnapStore(root)).create("s", "a", ["."], base_dir=tmp_path / "p")
    (index_file,) = (root / "packs").glob("*.idx")
    write_tree(tmp_path / "q", {"other.txt": "healthy pack\n"})
    two_file_packs(SnapStore(root)).create("h", "b", ["."], base_dir=tmp_path / "q")
    victim = SnapStore(root).get("s", "a").entry("f05.txt").digest  # type: ignore[union-attr]
    assert victim is not None
    data = bytearray(index_file.read_bytes())
    entry = data.index(victim, ENTRY_TABLE)
    data[entry + 36 : entry + 40] = (0xFFFF).to_bytes(4, "little")
    index_file.chmod(0o644)
    index_file.write_bytes(resealed(bytes(data)))
    pack = index_file.with_suffix(".pack")
    pack.chmod(0o644)
    os.truncate(pack, pack.stat().st_size - 1)
    forget_decoded(root)
    store = SnapStore(root)
    assert store.read("h", "b", "other.txt") == b"healthy pack\n"
    report = store.verify()
    assert not report.ok and any(index_file.stem in p for p in report.problems)
    assert SnapStore(root).gc().skipped
