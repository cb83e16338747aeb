"""Format 2: shared tree objects, read only as far as needed; hostile trees refused; format 1
stores read as they are and converted by gc and ``upgrade``."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from helpers.formatv1 import downgrade_to_format_1
from helpers.hostile import hostile_info, plant_snapshot
from helpers.trees import read_tree, write_tree

import snapstore.repo.trees
from snapstore import CorruptManifestError, SnapStore
from snapstore.backend.layout import FORMAT_MAJOR, FORMAT_TEXT
from snapstore.format import tree as tree_format
from snapstore.format.manifest import encode
from snapstore.format.packfile import KIND_TREE
from snapstore.format.tree import TreeRef, encode_tree, tree_ref
from snapstore.internals import repository

DIGEST = b"\x11" * 32


def _deep_tree(base: Path) -> dict[str, bytes]:
    files = {
        f"pkg{i}/mod{j}/file{k}.py": f"{i} {j} {k}\n".encode()
        for i in range(3)
        for j in range(4)
        for k in range(5)
    }
    write_tree(base, files)
    return files


def _tree_objects(store: SnapStore) -> set[bytes]:
    repository(store).blobs.refresh()
    return {
        digest
        for index in repository(store).blobs.packs.indexes()
        for digest, (number, _, _) in index.entries.items()
        if index.blocks[number].kind == KIND_TREE
    }


def test_a_one_file_change_costs_one_tree_per_directory_above_it(
    store: SnapStore, tmp_path: Path
) -> None:
    base = tmp_path / "p"
    _deep_tree(base)
    store.create("s", "one", ["."], base_dir=base)
    before = _tree_objects(store)
    assert len(before) == 1 + 3 + 12  # the base, pkg0..2, their mod0..3
    (base / "pkg1" / "mod2" / "file3.py").write_text("changed\n")
    store.create("s", "two", ["."], base_dir=base)
    assert len(_tree_objects(store) - before) == 3  # mod2, pkg1, the base
    assert store.read("s", "two", "pkg1/mod2/file3.py") == b"changed\n"
    assert store.read("s", "one", "pkg1/mod2/file3.py") == b"1 2 3\n"


def test_reading_one_path_decodes_only_the_directories_on_its_way(
    store: SnapStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = tmp_path / "p"
    _deep_tree(base)
    store.create("s", "one", ["."], base_dir=base)
    decoded: list[int] = []
    real = snapstore.repo.trees.decode_tree

    def counting(data: bytes) -> list[Any]:
        decoded.append(len(data))
        return real(data)

    monkeypatch.setattr(snapstore.repo.trees, "decode_tree", counting)
    fresh = SnapStore(store.root)
    assert fresh.read("s", "one", "pkg2/mod3/file4.py") == b"2 3 4\n"
    assert len(decoded) == 3
    decoded.clear()
    report = fresh.restore("s", "one", tmp_path / "out", paths=["pkg0/mod1"])
    assert len(report.written) == 1 + 5 and len(decoded) == 2  # pkg0 and pkg0/mod1: cached base
    assert fresh.history("s", "pkg2/mod3/file4.py")[0].entry is not None


def test_partial_snapshots_keep_their_unrecorded_parents_out_of_the_entries(
    store: SnapStore, tmp_path: Path
) -> None:
    base = tmp_path / "p"
    _deep_tree(base)
    store.create("s", "part", ["pkg1/mod0/file1.py", "pkg2/mod3", "absent/deep"], base_dir=base)
    paths = [entry.path for entry in store.get("s", "part").entries]
    assert paths == [
        "absent/deep",
        "pkg1/mod0/file1.py",
        "pkg2/mod3",
        *[f"pkg2/mod3/file{k}.py" for k in range(5)],
    ]
    store.restore("s", "part", tmp_path / "out")
    assert (tmp_path / "out" / "pkg1" / "mod0" / "file1.py").read_bytes() == b"1 0 1\n"


FILE = ("f", "file", 0o644, 3, 0, DIGEST, None)
HOSTILE_ROOTS = {
    "slash in a name": [("a/b", *FILE[1:])],
    "dot-dot": [("..", *FILE[1:])],
    "empty name": [("", *FILE[1:])],
    "backslash": [("a\\b", *FILE[1:])],
    "drive at the top": [("c:", *FILE[1:])],
    "names out of order": [("b", *FILE[1:]), ("a", *FILE[1:])],
    "a name twice": [FILE, FILE],
    "file without a digest": [("f", "file", 0o644, 3, 0, None, None)],
    "absent with a digest": [("f", "absent", 0, 0, 0, DIGEST, None)],
    "symlink without a target": [("f", "symlink", 0o777, 0, 0, None, None)],
    "unknown kind": [("f", "device", 0, 0, 0, None, None)],
    "parent without a subtree": [("f", "parent", 0, 0, 0, None, None)],
    "dir naming a tree of no size": [("f", "dir", 0o755, 0, 0, DIGEST, None)],
    "bad mode": [("f", "file", 0o17777, 3, 0, DIGEST, None)],
    "a size no file can have": [("f", "file", 0o644, 2**63, 0, DIGEST, None)],
    "short row": [("f", "file", 0o644)],
}


@pytest.mark.parametrize("rows", HOSTILE_ROOTS.values(), ids=HOSTILE_ROOTS.keys())
def test_hostile_tree_objects_are_corrupt_snapshots(
    store: SnapStore, tmp_path: Path, rows: list[Any]
) -> None:
    plant_snapshot(store, encode_tree(rows), info=hostile_info(1, 3))
    with pytest.raises(CorruptManifestError):
        store.get("s", "bad")
    target = tmp_path / "target"
    write_tree(target, {"keep.txt": "mine"})
    with pytest.raises(CorruptManifestError):
        store.restore("s", "bad", target)
    assert read_tree(target)["keep.txt"][1] == b"mine" and len(read_tree(target)) == 1
    assert not store.verify().ok
    report = store.gc()  # references unknown (skipped), or known: nothing of it is deleted
    assert report.skipped or report.blobs_deleted == 0


@pytest.mark.parametrize(
    "data",
    [b"not a tree", tree_format.TREE_MAGIC + b"\xc1", tree_format.TREE_MAGIC + b"\x81\xa1a\x01"],
)
def test_undecodable_tree_objects_are_corrupt(store: SnapStore, data: bytes) -> None:
    plant_snapshot(store, data)
    with pytest.raises(CorruptManifestError):
        store.get("s", "bad")


def test_a_shared_subtree_cannot_multiply_a_snapshot_past_the_entry_limit(
    store: SnapStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(snapstore.repo.trees, "MAX_ENTRIES", 1000)
    leaf = encode_tree([(f"f{i:02d}", *FILE[1:]) for i in range(40)])
    ref = tree_ref(leaf)
    middle = encode_tree(
        [(f"d{i:02d}", "dir", 0o755, ref.size, 0, ref.digest, None) for i in range(40)]
    )
    mref = tree_ref(middle)
    root = encode_tree([("top", "dir", 0o755, mref.size, 0, mref.digest, None)])
    plant_snapshot(store, root, trees=[leaf, middle], info=hostile_info(1600, 4800))
    with pytest.raises(CorruptManifestError, match="over 1000 entries"):
        store.get("s", "bad")
    assert store.gc().skipped is False  # marking visits each subtree once: no blow-up


def test_a_tree_holding_other_files_than_its_header_counts_is_corrupt(store: SnapStore) -> None:
    with repository(store).blobs_in_use():
        digest = repository(store).blobs.put_bytes(b"abc")
    plant_snapshot(
        store, encode_tree([("f", "file", 0o644, 3, 0, digest, None)]), info=hostile_info(2, 3)
    )
    with pytest.raises(CorruptManifestError, match="header counts"):
        store.get("s", "bad")
    assert store.read("s", "bad", "f") == b"abc"  # one path needs no full walk


def test_a_missing_tree_object_is_reported_never_guessed(store: SnapStore, tmp_path: Path) -> None:
    write_tree(tmp_path / "p", {"a/b.txt": "b"})
    store.create("s", "one", ["."], base_dir=tmp_path / "p")
    info = store.get("s", "one").info
    absent = TreeRef(b"\x22" * 32, 10)
    repository(store).catalog.commit(
        "s", "one", encode(info, created_ns=time.time_ns(), expires_ns=None, tree=absent)
    )
    with pytest.raises(Exception, match="missing"):
        store.get("s", "one")
    report = store.verify()
    assert not report.ok and any("cannot be read" in p for p in report.problems)
    assert store.gc().skipped


# ---------------------------------------------------------------- format 1 stores


def _format_1_store(root: Path, tmp_path: Path) -> dict[str, dict[str, bytes]]:
    store = SnapStore(root)
    trees = {}
    for name, files in {
        "one": {"a.txt": "alpha", "d/b.txt": "bravo"},
        "two": {"a.txt": "alpha 2", "d/b.txt": "bravo", "e/c.txt": "charlie"},
    }.items():
        base = tmp_path / name
        write_tree(base, files)
        store.create("s", name, ["."], base_dir=base)
        trees[name] = read_tree(base)
    store.put_state("s", "cursor", [1, 2])
    store.close()
    downgrade_to_format_1(root)
    return trees


def test_a_format_1_store_is_read_as_it_is(root: Path, tmp_path: Path) -> None:
    trees = _format_1_store(root, tmp_path)
    store = SnapStore(root)
    assert store.format_version == 1
    assert [info.name for info in store.list()] == ["one", "two", "cursor"]
    assert store.read("s", "two", "e/c.txt") == b"charlie"
    store.restore("s", "one", tmp_path / "out", backup=False)
    assert read_tree(tmp_path / "out") == trees["one"]
    assert store.diff("s", "one", "two").added == ["e", "e/c.txt"]
    assert store.get_state("s", "cursor") == [1, 2]
    assert store.verify(deep=True).ok
    assert (root / "FORMAT").read_text() == "snapstore format 1\n"  # reading changes nothing


def test_writing_into_a_format_1_store_marks_it_format_2_first(root: Path, tmp_path: Path) -> None:
    _format_1_store(root, tmp_path)
    store = SnapStore(root)
    write_tree(tmp_path / "three", {"x": "x"})
    store.create("s", "three", ["."], base_dir=tmp_path / "three")
    assert (root / "FORMAT").read_text() == FORMAT_TEXT
    assert store.read("s", "one", "d/b.txt") == b"bravo"
    assert store.verify(deep=True).ok


def test_gc_converts_a_format_1_store(root: Path, tmp_path: Path) -> None:
    trees = _format_1_store(root, tmp_path)
    store = SnapStore(root)
    report = store.gc()
    assert report.manifests_converted == 3 and not report.skipped and report.blobs_deleted == 0
    assert list(root.glob("sessions/*/*/manifest")) == []  # the old layout is gone too
    assert len(list(root.glob("sessions/*/*.manifest"))) == 3
    for manifest in root.glob("sessions/*/*.manifest"):
        assert manifest.read_bytes()[:8] == b"SNAPMAN\x02"
    for index in root.glob("packs/*.idx"):
        assert index.read_bytes()[:8] == b"SNAPIDX\x02"
    fresh = SnapStore(root)
    assert fresh.format_version == FORMAT_MAJOR and fresh.verify(deep=True).ok
    assert [info.name for info in fresh.list()] == ["one", "two", "cursor"]
    for name, files in trees.items():
        fresh.restore("s", name, tmp_path / f"out-{name}", backup=False)
        assert read_tree(tmp_path / f"out-{name}") == files
    assert fresh.get_state("s", "cursor") == [1, 2]
    assert fresh.upgrade().manifests_converted == 0


def test_conversion_keeps_creation_times_and_order(root: Path, tmp_path: Path) -> None:
    _format_1_store(root, tmp_path)
    before = [(i.name, i.created_at, i.expires_at, i.file_count) for i in SnapStore(root).list()]
    SnapStore(root).upgrade()
    assert [
        (i.name, i.created_at, i.expires_at, i.file_count) for i in SnapStore(root).list()
    ] == before


def test_a_corrupt_format_1_manifest_is_left_for_verify(root: Path, tmp_path: Path) -> None:
    _format_1_store(root, tmp_path)
    store = SnapStore(root)
    (broken,) = [m for m in root.glob("sessions/*/*/manifest") if "one-" in str(m)]
    broken.chmod(0o644)
    broken.write_bytes(broken.read_bytes()[:-3])
    report = store.upgrade()
    assert report.skipped and report.manifests_converted == 2
    assert broken.read_bytes()[:8] == b"SNAPMAN\x01"
    assert store.read("s", "two", "e/c.txt") == b"charlie"
