"""Manifest encoding: round trips, and every kind of damage is detected as corruption."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from snapstore.errors import CorruptManifestError, InvalidValueError
from snapstore.format.manifest import (
    check_entry_row,
    decode,
    decode_header,
    encode,
    entry_rows,
    rows_need_no_row_checks,
)
from snapstore.models import FileEntry, SnapshotInfo

DIGEST = bytes(range(32))


def sample(entries: tuple[FileEntry, ...] = ()) -> bytes:
    files = [e for e in entries if e.kind == "file"]
    info = SnapshotInfo(
        session="s",
        name="n",
        kind="files",
        created_at=datetime.now(UTC),
        expires_at=None,
        file_count=len(files),
        total_bytes=sum(e.size for e in files),
        meta={"who": "test"},
        base_dir="/base",
        roots=(".",),
    )
    return encode(
        info, created_ns=1_700_000_000_000_000_000, expires_ns=None, rows=entry_rows(entries)
    )


ENTRIES = (
    FileEntry("a.txt", "file", 0o644, 5, 1, DIGEST),
    FileEntry("d", "dir", 0o755, 0, 1),
    FileEntry("d/link", "symlink", 0o777, 0, 1, target="../a.txt"),
    FileEntry("gone", "absent"),
)


def test_round_trip() -> None:
    manifest = decode(sample(ENTRIES))
    assert manifest.entries == ENTRIES
    assert manifest.info.meta == {"who": "test"}
    assert manifest.info.roots == (".",)
    assert manifest.info.created_at.tzinfo is not None


def test_header_decodes_without_body() -> None:
    data = sample(ENTRIES)
    header = decode_header(data[:200], len(data))
    assert header.info.file_count == 1


def test_every_single_byte_flip_is_detected() -> None:
    data = bytearray(sample(ENTRIES))
    for index in range(len(data)):
        damaged = bytearray(data)
        damaged[index] ^= 0x55
        with pytest.raises(CorruptManifestError):
            decode(bytes(damaged))


def test_every_truncation_is_detected() -> None:
    data = sample(ENTRIES)
    for length in range(len(data)):
        with pytest.raises(CorruptManifestError):
            decode(data[:length])


@pytest.mark.parametrize(
    "entry",
    [
        FileEntry("../x", "file", 0o644, 1, 1, DIGEST),
        FileEntry("/abs", "file", 0o644, 1, 1, DIGEST),
        FileEntry("a\\b", "file", 0o644, 1, 1, DIGEST),
        FileEntry("C:/x", "file", 0o644, 1, 1, DIGEST),
        FileEntry("a/./b", "file", 0o644, 1, 1, DIGEST),
        FileEntry("nul\x00", "file", 0o644, 1, 1, DIGEST),
        FileEntry("f", "file", 0o644, 1, 1, b"short"),
        FileEntry("f", "weird", 0o644, 0, 1),  # type: ignore[arg-type]
        FileEntry("f", "dir", 0o644, 0, 1, DIGEST),
    ],
)
def test_invalid_entries_are_corrupt(entry: FileEntry) -> None:
    with pytest.raises(CorruptManifestError):
        decode(sample((entry,)))


def test_entry_beneath_a_symlink_is_corrupt() -> None:
    entries = (
        FileEntry("a", "symlink", 0o777, 0, 1, target="/etc"),
        FileEntry("a/passwd", "file", 0o644, 1, 1, DIGEST),
    )
    with pytest.raises(CorruptManifestError, match="beneath"):
        decode(sample(entries))


def test_duplicate_paths_are_corrupt() -> None:
    entry = FileEntry("a", "file", 0o644, 1, 1, DIGEST)
    with pytest.raises(CorruptManifestError, match="twice"):
        decode(sample((entry, entry)))


def test_unencodable_metadata_is_refused() -> None:
    info = SnapshotInfo("s", "n", "files", datetime.now(UTC), None, 0, 0, {"x": object()}, "/")
    with pytest.raises(InvalidValueError):
        encode(info, created_ns=0, expires_ns=None)


@settings(max_examples=300)
@given(st.binary(max_size=400))
def test_arbitrary_bytes_raise_only_corrupt_manifest(data: bytes) -> None:
    with pytest.raises(CorruptManifestError):
        decode(data)


@settings(max_examples=200)
@given(st.binary(max_size=300))
def test_arbitrary_bytes_after_a_valid_prelude(tail: bytes) -> None:
    data = sample(ENTRIES)
    with pytest.raises(CorruptManifestError):
        decode(data[:52] + tail)


def test_decoded_entries_equal_ones_built_normally() -> None:
    decoded = decode(sample(ENTRIES)).entries
    assert [entry._asdict() for entry in decoded] == [entry._asdict() for entry in ENTRIES]
    assert {hash(entry) for entry in decoded} == {hash(entry) for entry in ENTRIES}


ROW_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**65), max_value=2**65),
    st.binary(max_size=40),
    st.sampled_from(["file", "dir", "a", "a/b", "../x", "/abs", "C:x", "a\\b", "", "é/f"]),
)


VALID_ROWS = [
    ["d", "dir", 0o755, 0, 1, None, None],
    ["d/a.py", "file", 0o644, 3, -5, DIGEST, None],
    ["d/link", "symlink", 0o777, 0, 2**63 - 1, None, "a.py"],
    ["gone", "absent", 0, 0, 0, None, None],
]


@given(st.integers(0, 3), st.integers(0, 6), ROW_VALUES)
def test_the_bulk_entry_check_accepts_only_valid_rows(row: int, index: int, value: object) -> None:
    rows = [list(raw) for raw in VALID_ROWS]
    rows[row][index] = value
    if rows_need_no_row_checks(rows):
        for raw in rows:
            check_entry_row(raw)


def test_the_bulk_entry_check_takes_ordinary_rows_and_leaves_the_rest() -> None:
    assert rows_need_no_row_checks([list(raw) for raw in VALID_ROWS])
    for odd_path in ["é.txt", "C:x", "x" * 300, "a//b", "a/../b"]:
        assert not rows_need_no_row_checks([[odd_path, "dir", 0o755, 0, 1, None, None]])
    assert not rows_need_no_row_checks([["a", ["dir"], 0, 0, 0, None, None]])
    assert not rows_need_no_row_checks([["a", "dir", True, 0, 0, None, None]])
    assert not rows_need_no_row_checks([("a", "dir", 0, 0, 0, None, None)])
