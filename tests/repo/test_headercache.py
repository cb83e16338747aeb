"""The header cache: list() reuses decoded headers only while each manifest file keeps its
identity, so every listing still reflects the disk now, and a bad cache only costs speed."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import pytest
from helpers.trees import write_tree

from snapstore import SnapStore
from snapstore.internals import repository
from snapstore.repo import headercache
from snapstore.repo.catalog import CorruptManifestWarning


def _names(store: SnapStore) -> list[tuple[str, str, int]]:
    return [(i.session, i.name, i.file_count) for i in store.list()]


@pytest.fixture
def base(tmp_path: Path) -> Path:
    write_tree(tmp_path / "p", {"a.txt": "a", "b.txt": "b"})
    return tmp_path / "p"


def test_listing_follows_the_disk_across_processes(root: Path, base: Path) -> None:
    lister = SnapStore(root)
    writer = SnapStore(root)
    writer.create("s", "one", ["a.txt"], base_dir=base)
    assert _names(lister) == [("s", "one", 1)]
    writer.create("s", "one", ["."], base_dir=base)
    writer.create("t", "two", ["a.txt"], base_dir=base)
    assert _names(lister) == [("s", "one", 2), ("t", "two", 1)]
    writer.delete("t", "two")
    assert _names(lister) == [("s", "one", 2)]
    assert _names(SnapStore(root)) == [("s", "one", 2)]
    assert lister.sessions() == ["s"]


def test_a_fresh_store_reads_headers_from_the_cache_file(
    root: Path, base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SnapStore(root)
    for index in range(5):
        store.create("s", f"n{index}", ["."], base_dir=base)
    expected = store.list()
    assert (root / "cache" / "headers").is_file()
    headercache._DECODED.clear()
    fresh = SnapStore(root)
    monkeypatch.setattr(
        repository(fresh).catalog, "read_header", lambda path: pytest.fail("decoded")
    )
    assert fresh.list() == expected


@pytest.mark.parametrize("damage", [b"", b"junk", None])
def test_a_damaged_cache_file_only_costs_speed(
    root: Path, base: Path, damage: bytes | None
) -> None:
    store = SnapStore(root)
    store.create("s", "one", ["."], base_dir=base)
    expected = store.list()
    cache = root / "cache" / "headers"
    data = cache.read_bytes()
    cache.write_bytes(data[:-1] + bytes([data[-1] ^ 1]) if damage is None else damage)
    headercache._DECODED.clear()
    assert SnapStore(root).list() == expected


def test_a_manifest_damaged_in_place_is_never_served_from_the_cache(root: Path, base: Path) -> None:
    store = SnapStore(root)
    store.create("s", "one", ["."], base_dir=base)
    store.create("s", "two", ["."], base_dir=base)
    store.list()
    path = Path(repository(store).catalog.manifest_path("s", "one"))
    info = path.stat()
    path.chmod(0o644)
    data = bytearray(path.read_bytes())
    data[60] ^= 0xFF
    path.write_bytes(bytes(data))
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))
    for lister in (store, SnapStore(root)):
        if lister is not store:
            headercache._DECODED.clear()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert [i.name for i in lister.list()] == ["two"]
        assert any(issubclass(w.category, CorruptManifestWarning) for w in caught)


def test_headers_from_the_cache_file_equal_decoded_ones(
    store: SnapStore, root: Path, tmp_path: Path
) -> None:
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "f.txt").write_text("x")
    store.create("s", "a", ["."], base_dir=tmp_path / "p", meta={"k": 1}, ttl=60)
    decoded = store.get("s", "a").info
    store.list()
    headercache._DECODED.clear()
    (listed,) = SnapStore(root).list()
    assert vars(listed) == vars(decoded)


def test_a_version_that_does_not_fit_is_never_matched() -> None:
    import msgpack

    assert headercache._packed((2**64, 1, 2, 3, 4)) == b""
    assert msgpack.unpackb(headercache._packed((1, 2, -3, 4, 5))) == [1, 2, -3, 4, 5]
