"""The header cache: a listing reuses decoded headers only while their session (by its
settled listing stamp) or each manifest (by its version) stays as it was, so every listing
still reflects the disk now, and a bad cache only costs speed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import msgpack
import pytest
from helpers.readonly import read_only_access
from helpers.trees import write_tree

from snapstore import SnapStore
from snapstore.backend import localmanifests
from snapstore.backend.seam import Kind
from snapstore.format.envelope import seal
from snapstore.internals import repository
from snapstore.repo import headercache
from snapstore.repo.catalog import CorruptManifestWarning

SETTLE_NS = 300_000_000
"""How long a session directory must be left alone here before its stamp settles (instead
of the library's seconds; still far above a filesystem clock's tick)."""

LIBRARY_SETTLE_NS = localmanifests.SETTLE_NS
"""What another process waits for (this one waits ``SETTLE_NS``)."""

OTHER_PROCESS = """
import sys
from snapstore import SnapStore
root, base = sys.argv[1:3]
store = SnapStore(root)
store.create("s", "new", ["a.txt"], base_dir=base)
store.create("s", "a", ["."], base_dir=base)
store.delete("s", "b")
store.delete("t", "c")
"""


def _names(store: SnapStore) -> list[tuple[str, str, int]]:
    return [(i.session, i.name, i.file_count) for i in store.list()]


def _settle() -> None:
    """Wait until every session directory changed so far has settled."""
    time.sleep(SETTLE_NS * 1.2 / 1e9)


def _cache_file(root: Path) -> Path:
    return root / "cache" / "headers"


@pytest.fixture(autouse=True)
def quick_settling(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(localmanifests, "SETTLE_NS", SETTLE_NS)


@pytest.fixture
def base(tmp_path: Path) -> Path:
    write_tree(tmp_path / "p", {"a.txt": "a", "b.txt": "b"})
    return tmp_path / "p"


@pytest.fixture
def settled(root: Path, base: Path) -> list[tuple[str, str, int]]:
    """A store of three snapshots in two sessions, listed once after they settled (so the
    cache holds both sessions at their settled stamps); what ``_names`` lists."""
    store = SnapStore(root)
    store.create("s", "a", ["a.txt"], base_dir=base)
    store.create("s", "b", ["a.txt"], base_dir=base)
    store.create("t", "c", ["."], base_dir=base)
    _settle()
    listed = _names(store)
    stamps = repository(store).backend.listing_stamps(Kind.MANIFEST)
    assert stamps is not None and None not in stamps.values()
    assert _recorded_stamps(root) == stamps
    return listed


def _recorded_stamps(root: Path) -> dict[str, object]:
    """The stamp the cache file records for each session."""
    entries = msgpack.unpackb(_cache_file(root).read_bytes()[24:])
    recorded = {}
    for session_dir, packed in entries.items():
        stamp = msgpack.unpackb(packed, use_list=False)[1]
        recorded[session_dir] = stamp
    return recorded


def _unlistable(store: SnapStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make any listing of manifests, or decoding of one, fail the test."""
    catalog = repository(store).catalog
    monkeypatch.setattr(catalog, "_checked_header", lambda name: pytest.fail("decoded"))
    monkeypatch.setattr(catalog.backend, "infos", lambda *args: pytest.fail("listed the manifests"))


def test_listing_follows_the_disk_across_stores(root: Path, base: Path) -> None:
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


def test_a_settled_session_is_read_from_the_cache_without_listing_it(
    root: Path, settled: list[tuple[str, str, int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert settled == [("s", "a", 1), ("s", "b", 1), ("t", "c", 2)]
    fresh = SnapStore(root)
    _unlistable(fresh, monkeypatch)
    assert _names(fresh) == settled
    assert fresh.sessions() == ["s", "t"]


def test_the_store_that_recorded_the_stamps_lists_by_them_too(
    root: Path, base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SnapStore(root)
    store.create("s", "a", ["a.txt"], base_dir=base)
    _settle()
    expected = _names(store)
    _unlistable(store, monkeypatch)
    assert _names(store) == expected == [("s", "a", 1)]


def test_a_recent_session_is_read_from_the_cache_by_version(
    root: Path, base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SnapStore(root)
    for index in range(5):
        store.create("s", f"n{index}", ["."], base_dir=base)
    expected = store.list()
    assert _cache_file(root).is_file()
    fresh = SnapStore(root)
    monkeypatch.setattr(
        repository(fresh).catalog, "_checked_header", lambda name: pytest.fail("decoded")
    )
    assert fresh.list() == expected


@pytest.mark.parametrize("same_store", [True, False])
def test_another_process_creating_replacing_and_deleting_shows_at_once(
    root: Path, base: Path, settled: list[tuple[str, str, int]], same_store: bool
) -> None:
    lister = SnapStore(root)
    assert _names(lister) == settled
    subprocess.run(
        [sys.executable, "-c", OTHER_PROCESS, str(root), str(base)], check=True, timeout=120
    )
    expected = [("s", "new", 1), ("s", "a", 2)]
    assert _names(lister if same_store else SnapStore(root)) == expected
    _settle()
    assert _names(lister if same_store else SnapStore(root)) == expected
    assert _names(SnapStore(root)) == expected
    assert SnapStore(root).sessions() == ["s"]


def test_a_change_during_the_listing_that_records_a_stamp_shows_next_time(
    root: Path, base: Path, settled: list[tuple[str, str, int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stamp recorded is the one read before the session was listed: a commit landing
    after the listing, before the stamp is recorded, leaves the directory with another."""
    SnapStore(root).create("s", "b", ["."], base_dir=base)  # the next listing lists "s"
    _settle()
    lister = SnapStore(root)
    cache = repository(lister).catalog.header_cache
    match = cache.by_version

    def commit_then_match(session_dir: str, listed: dict[str, Any]) -> dict[str, Any]:
        if session_dir.startswith("s-"):
            SnapStore(root).create("s", "late", ["a.txt"], base_dir=base)
        return match(session_dir, listed)

    monkeypatch.setattr(cache, "by_version", commit_then_match)
    assert _names(lister) == [("s", "a", 1), ("t", "c", 2), ("s", "b", 2)]
    monkeypatch.setattr(cache, "by_version", match)
    _settle()
    expected = [("s", "a", 1), ("t", "c", 2), ("s", "b", 2), ("s", "late", 1)]
    assert _names(SnapStore(root)) == expected
    assert _names(lister) == expected


@pytest.mark.parametrize("damage", [b"", b"junk", None, "truncated"])
@pytest.mark.parametrize("settle", [True, False])
def test_a_damaged_cache_file_only_costs_speed(
    root: Path, base: Path, damage: bytes | str | None, settle: bool
) -> None:
    store = SnapStore(root)
    store.create("s", "one", ["."], base_dir=base)
    store.create("t", "two", ["a.txt"], base_dir=base)
    if settle:
        _settle()
    expected = store.list()
    cache = _cache_file(root)
    data = cache.read_bytes()
    if damage is None:
        data = data[:-1] + bytes([data[-1] ^ 1])
    elif damage == "truncated":
        data = data[: len(data) // 2]
    else:
        assert isinstance(damage, bytes)
        data = damage
    cache.write_bytes(data)
    assert SnapStore(root).list() == expected
    assert cache.read_bytes()[:8] == headercache.MAGIC


def test_a_cache_of_an_older_version_is_ignored_and_rewritten(
    root: Path, base: Path, settled: list[tuple[str, str, int]]
) -> None:
    cache = _cache_file(root)
    entries = msgpack.unpackb(cache.read_bytes()[24:])
    older = seal(b"SNAPHDC\x06", {f"{sd}/x": b"\x95\x01\x02\x03\x04\x05" for sd in entries})
    cache.write_bytes(older)
    assert _names(SnapStore(root)) == settled
    assert cache.read_bytes()[:8] == headercache.MAGIC


def _forged(root: Path, rows: object, session: object = "s", stamp: object = None) -> None:
    """Replace the cache by a well-sealed one whose entry for session "s" is made of
    ``rows`` (its checksum holds: only its content is wrong)."""
    store = SnapStore(root)
    backend = repository(store).backend
    stamps = backend.listing_stamps(Kind.MANIFEST) or {}
    session_dir = next(sd for sd in stamps if sd.startswith("s-"))
    if stamp == "current":
        stamp = stamps[session_dir]
    entry = msgpack.packb([session, stamp, rows, msgpack.packb([])], use_bin_type=True)
    _cache_file(root).write_bytes(seal(headercache.MAGIC, {session_dir: entry}))


@pytest.mark.parametrize(
    ("rows", "session"),
    [
        ("not rows", "s"),
        ([[1, 2, 3]], "s"),
        ([["a-dir", "a", "files", "not a time"] + [0] * 14], "s"),
        ([], "another session"),
        ([], 12),
    ],
)
def test_a_cache_entry_of_the_wrong_shape_is_only_a_miss(
    root: Path, settled: list[tuple[str, str, int]], rows: object, session: object
) -> None:
    _forged(root, rows, session, stamp="current")
    assert _names(SnapStore(root)) == settled


def test_a_cache_entry_for_another_session_directory_is_never_used(
    root: Path, base: Path, settled: list[tuple[str, str, int]]
) -> None:
    """An entry names the raw session its rows belong to: one naming a session that does
    not map to the entry's directory is ignored, whatever its stamp."""
    store = SnapStore(root)
    store.create("u", "x", ["a.txt"], base_dir=base)
    _settle()
    store.list()
    cache = _cache_file(root)
    entries = msgpack.unpackb(cache.read_bytes()[24:])
    u_dir = next(sd for sd in entries if sd.startswith("u-"))
    s_dir = next(sd for sd in entries if sd.startswith("s-"))
    entries[s_dir] = entries[u_dir]
    cache.write_bytes(seal(headercache.MAGIC, entries))
    assert _names(SnapStore(root)) == [*settled, ("u", "x", 1)]


def _forged_copy(root: Path, to: Path) -> None:
    """A copy of the store's cache at ``to``, sealed well, claiming 99 files for each
    snapshot: believed if a listing read it."""
    entries = msgpack.unpackb(_cache_file(root).read_bytes()[24:])
    for session_dir, packed in entries.items():
        session, stamp, rows, versions = msgpack.unpackb(packed)
        rows = [[*row[:7], 99, *row[8:]] for row in rows]
        entries[session_dir] = msgpack.packb([session, stamp, rows, versions], use_bin_type=True)
    to.write_bytes(seal(headercache.MAGIC, entries))


@pytest.mark.parametrize("target", ["forged cache", "fifo", "/dev/zero"])
@pytest.mark.parametrize("settle", [True, False])
def test_a_symlink_in_place_of_the_cache_is_not_followed(
    root: Path, base: Path, tmp_path: Path, target: str, settle: bool
) -> None:
    store = SnapStore(root)
    store.create("s", "real", ["a.txt"], base_dir=base)
    if settle:
        _settle()
    expected = store.list()
    store.list()
    if target == "fifo":
        pointed = tmp_path / "fifo"
        os.mkfifo(pointed)
    elif target == "/dev/zero":
        pointed = Path(target)
    else:
        pointed = tmp_path / "forged"
        _forged_copy(root, pointed)
    before = pointed.read_bytes() if pointed.is_file() else None
    cache = _cache_file(root)
    cache.unlink()
    cache.symlink_to(pointed)
    assert SnapStore(root).list() == expected
    assert cache.is_file() and not cache.is_symlink()
    if before is not None:
        assert pointed.read_bytes() == before
        cache.unlink()
        os.link(pointed, cache)  # the same bytes, in place: believed (the test's control)
        assert [i.file_count for i in SnapStore(root).list()] == [99]


def test_a_manifest_damaged_in_place_in_a_recent_session_is_never_served_from_the_cache(
    root: Path, base: Path
) -> None:
    """A session listed by version sees a manifest rewritten in place by its change time.
    (In a settled session the listing trusts the directory's stamp: docs/format.md, "Header
    cache"; reading the snapshot still checks the manifest.)"""
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
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert [i.name for i in lister.list()] == ["two"]
        assert any(issubclass(w.category, CorruptManifestWarning) for w in caught)


def test_a_settled_session_with_a_planted_entry_warns_at_every_listing(
    root: Path, base: Path
) -> None:
    store = SnapStore(root)
    store.create("s", "one", ["."], base_dir=base)
    good = Path(repository(store).catalog.manifest_path("s", "one"))
    (good.parent / "planted-0000.manifest").symlink_to(good)
    _settle()
    for lister in (store, SnapStore(root), store):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert [i.name for i in lister.list()] == ["one"]
        assert any(issubclass(w.category, CorruptManifestWarning) for w in caught)


def test_a_session_holding_a_directory_never_settles(root: Path, base: Path) -> None:
    """A manifest of the old layout lives in a directory of its own, whose changes the
    session's directory does not see: such a session is always listed."""
    store = SnapStore(root)
    store.create("s", "one", ["."], base_dir=base)
    session_dir = Path(repository(store).catalog.manifest_path("s", "one")).parent
    (session_dir / "old-layout").mkdir()
    _settle()
    stamps = repository(store).backend.listing_stamps(Kind.MANIFEST)
    assert stamps == {session_dir.name: None}
    (session_dir / "old-layout").rmdir()
    _settle()
    stamps = repository(store).backend.listing_stamps(Kind.MANIFEST, session_dir.name + "/")
    assert stamps is not None and stamps[session_dir.name] is not None


def test_headers_from_the_cache_equal_decoded_ones(
    store: SnapStore, root: Path, tmp_path: Path
) -> None:
    (tmp_path / "q").mkdir()
    (tmp_path / "q" / "f.txt").write_text("x")
    store.create("s", "a", ["."], base_dir=tmp_path / "q", meta={"k": [1, {"n": [2]}]}, ttl=60)
    decoded = store.get("s", "a").info
    store.list()
    (by_version,) = SnapStore(root).list()
    assert vars(by_version) == vars(decoded)
    _settle()
    store.list()
    (by_stamp,) = SnapStore(root).list()
    assert vars(by_stamp) == vars(decoded)


READ_ONLY_LISTING = """
import json, sys, warnings
from snapstore import SnapStore
warnings.simplefilter("error")
store = SnapStore(sys.argv[1])
print(json.dumps([store.read_only, [[i.session, i.name, i.file_count] for i in store.list()]]))
"""


def test_a_read_only_process_lists_right_through_a_stale_cache_it_cannot_rewrite() -> None:
    with read_only_access() as reader:
        if isinstance(reader, str):
            pytest.skip(reader)
        project = reader.base / "project"
        write_tree(project, {"a.txt": "a", "b.txt": "b"})
        root = reader.base / "store"
        store = SnapStore(root)
        store.create("s", "a", ["a.txt"], base_dir=project)
        store.create("s", "b", ["a.txt"], base_dir=project)
        store.create("t", "c", ["."], base_dir=project)
        _settle()
        store.list()
        stale = _cache_file(root).read_bytes()
        store.create("s", "new", ["."], base_dir=project)
        store.delete("s", "a")
        _cache_file(root).write_bytes(stale)
        time.sleep(LIBRARY_SETTLE_NS / 1e9 + 0.5)  # "t" settles for the reader too
        reader.lock_down(root)
        done = reader.run("-c", READ_ONLY_LISTING, str(root))
        assert done.returncode == 0, done.stderr.decode()
        read_only, listed = json.loads(done.stdout)
        assert read_only is True
        assert listed == [["s", "b", 1], ["t", "c", 2], ["s", "new", 2]]
        assert _cache_file(root).read_bytes() == stale
        reader.unlock(root)
