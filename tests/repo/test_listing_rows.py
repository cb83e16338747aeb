"""A listing builds its infos from the header cache's rows in bulk: the same infos, in the
same order, as decoding each header would give, and a cache row it cannot build from is
only a miss (the manifest is read instead), never an error or a wrong listing."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgpack
import pytest
from helpers.trees import write_tree
from hypothesis import given, settings
from hypothesis import strategies as st

from snapstore import SnapStore
from snapstore.backend import localmanifests
from snapstore.format.envelope import seal, unseal
from snapstore.format.header import (
    ROW_TIMESTAMPS,
    header_from_row,
    infos_of_rows,
    rows_valid,
)
from snapstore.internals import repository
from snapstore.repo import headercache
from snapstore.repo.catalog import ManifestFile, SessionRows
from snapstore.repo.sessions import in_order, infos_in_order

SETTLE_NS = 300_000_000
"""How long a session directory must be left alone here before its stamp settles."""


@pytest.fixture(autouse=True)
def quick_settling(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(localmanifests, "SETTLE_NS", SETTLE_NS)


def _settle() -> None:
    time.sleep(SETTLE_NS * 1.2 / 1e9)


# ---------------------------------------------------------------- the same infos, in order

_BASE_NS = 1_700_000_000_000_000_000
_SECOND = 1_000_000_000


def _time(ns: int) -> datetime:
    return datetime.fromtimestamp(ns // 1000 / 1e6, UTC)


@st.composite
def _rows(draw: st.DrawFn, session: str) -> list[tuple[Any, ...]]:
    """Rows of one session as the cache holds them: numbered or not, their creation times
    near, ahead of or behind their files' times (clocks that disagree), with metadata,
    skipped paths, expiry and undo backups now and then."""
    count = draw(st.integers(0, 8))
    names = draw(
        st.lists(st.sampled_from("abcdefghij"), min_size=count, max_size=count, unique=True)
    )
    rows = []
    for name in names:
        created = _BASE_NS + draw(st.integers(0, 20)) * _SECOND
        written = created + draw(st.sampled_from([0, 0, 5, -200, 200])) * _SECOND
        expires = draw(st.sampled_from([None, created + 3600 * _SECOND]))
        meta = draw(st.sampled_from([None, {"k": [1, {"n": [2]}]}, {"x": "y"}]))
        skipped = draw(st.sampled_from([(), (("p", "why"),), (("p", "a"), ("q", "b"))]))
        rows.append(
            (
                f"{name}-dir",
                name,
                draw(st.sampled_from(["files", "state"])),
                created,
                _time(created),
                expires,
                None if expires is None else _time(expires),
                draw(st.integers(0, 3)),
                draw(st.integers(0, 99)),
                None if meta is None else msgpack.packb(meta, use_bin_type=True),
                "/base",
                skipped,
                draw(st.sampled_from([(".",), ("a", "b")])),
                draw(st.sampled_from([None, None, "restored"])),
                (".git",),
                draw(st.integers(0, 6)),
                draw(st.sampled_from([None, 10])),
                written,
            )
        )
    return rows


@settings(max_examples=200, deadline=None)
@given(
    groups=st.tuples(_rows("s"), _rows("t"), _rows("u")),
    backups=st.booleans(),
)
def test_infos_built_in_bulk_equal_and_order_as_decoded_headers(
    groups: tuple[list[tuple[Any, ...]], ...], backups: bool
) -> None:
    sessions = ("s", "t", "u")
    manifests = [
        ManifestFile(f"{session}-dir/{row[0]}", header)
        for session, rows in zip(sessions, groups, strict=True)
        for row in rows
        if (header := header_from_row(session, row)) is not None
    ]
    assert len(manifests) == sum(map(len, groups))
    expected = [
        m.header.info
        for m in in_order(manifests)
        if (m.header.info.backup_of is not None) is backups
    ]
    listed = infos_in_order(
        [SessionRows(f"{s}-dir", s, rows) for s, rows in zip(sessions, groups, strict=True)],
        backups=backups,
    )
    assert listed == expected
    assert [vars(info) for info in listed] == [vars(info) for info in expected]
    assert [repr(info) for info in listed] == [repr(info) for info in expected]
    for session, rows in zip(sessions, groups, strict=True):
        assert rows_valid(rows)
        built = infos_of_rows(session, rows)
        assert built == [header_from_row(session, row).info for row in rows]  # type: ignore[union-attr]
        metas = [info.meta for info in built]
        assert len({id(meta) for meta in metas}) == len(metas)  # each its own dict


# ---------------------------------------------------------------- rows it cannot build from


def _cache_file(root: Path) -> Path:
    return root / "cache" / "headers"


def _tamper(root: Path, change: Callable[[list[list[Any]]], list[list[Any]]]) -> None:
    """Rewrite session "s"'s cache entry with its rows changed by ``change``, keeping its
    stamp and versions and sealing it well: only the rows' content is wrong."""
    entries = unseal(headercache.MAGIC, _cache_file(root).read_bytes())
    session_dir = next(sd for sd in entries if sd.startswith("s-"))
    session, stamp, rows, versions = msgpack.unpackb(entries[session_dir], timestamp=ROW_TIMESTAMPS)
    rows = change(rows)
    entries[session_dir] = msgpack.packb(
        [session, stamp, rows, versions], use_bin_type=True, datetime=True
    )
    _cache_file(root).write_bytes(seal(headercache.MAGIC, entries))


def _set(column: int, value: object, row: int = 0) -> Callable[[list[list[Any]]], list[list[Any]]]:
    def change(rows: list[list[Any]]) -> list[list[Any]]:
        rows[row][column] = value
        return rows

    return change


def _twice(rows: list[list[Any]]) -> list[list[Any]]:
    return [rows[0], *rows]


def _short(rows: list[list[Any]]) -> list[list[Any]]:
    return [rows[0][:-1], *rows[1:]]


HOSTILE_ROWS = {
    "a snapshot directory twice": _twice,
    "a row cut short": _short,
    "roots holding a map": _set(12, [{"not": "hashable"}]),
    "excludes holding a list": _set(14, [["x"]]),
    "a kind that is a map": _set(2, {"files": 1}),
    "metadata that is a number": _set(9, 5),
    "metadata that is no map": _set(9, msgpack.packb([1, 2])),
    "metadata that is no msgpack": _set(9, b"\xc1"),
    "a skipped path that is no pair": _set(11, [["only one"]]),
    "a skipped path of numbers": _set(11, [[1, 2]]),
    "a name that is a number": _set(1, 7),
    "a sequence number that is text": _set(15, "1"),
    "a creation time that is text": _set(3, "now"),
    "a file time that is missing": _set(17, None),
    "a creation date that is a number": _set(4, 12),
    "roots that are text": _set(12, "abc"),
    "an expiry that is text": _set(5, "soon"),
    "an expiry date that is text": _set(6, "soon"),
    "a file count that is text": _set(7, "many"),
    "a total that is a float": _set(8, 1.5),
    "a backup_of that is a number": _set(13, 5),
    "stored bytes that are a list": _set(16, [1]),
}


@pytest.fixture
def listed(root: Path, tmp_path: Path) -> list[Any]:
    """Two sessions, listed once after they settled: their cache entries hold their settled
    stamps and every row. What ``list()`` and ``backups()`` give."""
    write_tree(tmp_path / "p", {"a.txt": "a", "b.txt": "b"})
    store = SnapStore(root)
    store.create("s", "one", ["a.txt"], base_dir=tmp_path / "p", meta={"k": [1]})
    store.create("s", "two", ["."], base_dir=tmp_path / "p", ttl=60)
    store.create("t", "three", ["."], base_dir=tmp_path / "p")
    _settle()
    return store.list()


@pytest.mark.parametrize("settled", [True, False], ids=["by stamp", "by version"])
@pytest.mark.parametrize("change", list(HOSTILE_ROWS.values()), ids=list(HOSTILE_ROWS))
def test_a_cache_row_a_listing_cannot_build_from_is_only_a_miss(
    root: Path,
    listed: list[Any],
    change: Callable[[list[list[Any]]], list[list[Any]]],
    settled: bool,
) -> None:
    _tamper(root, change)
    if not settled:
        for session_dir in (root / "sessions").iterdir():
            session_dir.touch()  # listed by version: the rows are matched one by one
    fresh = SnapStore(root)
    assert fresh.list() == listed
    assert [vars(info) for info in fresh.list()] == [vars(info) for info in listed]
    assert SnapStore(root).list() == listed
    assert fresh.sessions() == ["s", "t"]


def test_a_row_a_listing_cannot_build_from_is_read_from_its_manifest_alone(
    root: Path, listed: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows that still can be built from are used; only the bad one's manifest is read."""
    _tamper(root, _set(12, [{"not": "hashable"}], row=1))
    for session_dir in (root / "sessions").iterdir():
        session_dir.touch()
    fresh = SnapStore(root)
    catalog = repository(fresh).catalog
    read = catalog._checked_header
    decoded: list[str] = []

    def counted(object_name: str) -> Any:
        decoded.append(object_name)
        return read(object_name)

    monkeypatch.setattr(catalog, "_checked_header", counted)
    assert fresh.list() == listed
    assert len(decoded) == 1


REPLACE_ONE = """
import sys
from snapstore import SnapStore
root, base = sys.argv[1:3]
SnapStore(root).create("s", "one", ["."], base_dir=base, meta={"again": True})
"""


@pytest.mark.parametrize("same_store", [True, False])
def test_a_snapshot_replaced_by_another_process_shows_at_once_though_every_name_stays(
    root: Path, tmp_path: Path, listed: list[Any], same_store: bool
) -> None:
    """The session's names are the ones its cache entry holds; only one manifest's version
    differs: the whole-list match must not take the entry as current."""
    lister = SnapStore(root)
    assert lister.list() == listed
    subprocess.run(
        [sys.executable, "-c", REPLACE_ONE, str(root), str(tmp_path / "p")], check=True, timeout=120
    )
    for store in (lister if same_store else SnapStore(root), SnapStore(root)):
        infos = {(info.session, info.name): info for info in store.list()}
        assert set(infos) == {("s", "one"), ("s", "two"), ("t", "three")}
        assert infos["s", "one"].file_count == 2
        assert infos["s", "one"].meta == {"again": True}
        assert [info.name for info in store.list()][-1] == "one"  # its new place


def test_a_row_the_header_builder_rejects_is_only_a_miss_for_a_commit_too(
    root: Path, tmp_path: Path, listed: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """headers(cached=True), which a commit builds its session's head from, reads the
    manifest of a row ``header_from_row`` rejects instead of failing."""
    from snapstore.repo import catalog as catalog_module

    build = catalog_module.header_from_row
    monkeypatch.setattr(
        catalog_module,
        "header_from_row",
        lambda session, row: None if row[1] == "one" else build(session, row),
    )
    store = SnapStore(root)
    headers = repository(store).catalog.headers("s", cached=True)
    assert sorted(m.header.info.name for m in headers) == ["one", "two"]
    store.create("s", "three", ["."], base_dir=tmp_path / "p")
    assert [i.name for i in store.list() if i.session == "s"] == ["one", "two", "three"]
