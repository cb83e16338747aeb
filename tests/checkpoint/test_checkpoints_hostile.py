"""Checkpoints against hostile and unlucky inputs: a file rewritten in place while it is read,
forged values nested beyond any reader, malformed positions, a CSV opening with a blank line,
and a checkpoint whose header is damaged."""

from __future__ import annotations

import os
import struct
import time
from pathlib import Path

import msgpack
from helpers.checkpoints import run_snapstore

from snapstore import SnapStore
from snapstore.backend.seam import Handle, Kind
from snapstore.checkpoint import (
    Checkpointer,
    CsvSource,
    FileCheckpointStore,
    IdentityMismatchError,
    LinesSource,
    MemoryCheckpointStore,
)
from snapstore.format import manifest as M
from snapstore.format.times import ns_to_time
from snapstore.internals import repository
from snapstore.models import SnapshotInfo
from snapstore.repo.catalog import manifest_name

_SENTINEL = b"\xde\xad\xbe\xef" * 4


def _forge_checkpoint(store: SnapStore, key: str, value_msgpack: bytes) -> None:
    """Commit a checkpoint envelope whose value is the raw msgpack ``value_msgpack``
    (a well-formed, checksummed manifest: what a hostile writer of the root can commit)."""
    sentinel = msgpack.packb(_SENTINEL, use_bin_type=True)
    envelope = {
        "checkpoint": 1,
        "key": key,
        "value": _SENTINEL,
        "saved_at": "2024-01-01T00:00:00+00:00",
        "identity": None,
        "run": None,
    }
    packed = msgpack.packb(envelope, use_bin_type=True).replace(sentinel, value_msgpack)
    now = time.time_ns()
    info = SnapshotInfo(
        session="checkpoints",
        name=key,
        kind="state",
        created_at=ns_to_time(now),
        expires_at=None,
        file_count=0,
        total_bytes=0,
        meta={},
        base_dir="",
    )
    data = M.encode(info, created_ns=now, expires_ns=None, value=_SENTINEL)
    magic, header_length, _, _, _ = M.PRELUDE.unpack_from(data)
    header = data[M.PRELUDE.size : M.PRELUDE.size + header_length]
    body = data[M.PRELUDE.size + header_length :].replace(sentinel, packed)
    lengths = struct.pack("<IQ", len(header), len(body))
    prelude = M.PRELUDE.pack(
        magic, len(header), len(body), M._checksum(lengths, header), M._checksum(lengths, body)
    )
    repository(store).catalog.commit("checkpoints", key, prelude + header + body)


# 1 -------------------------------------------------------------------------------------
def test_a_file_rewritten_in_place_during_the_run_is_not_blessed_by_the_save(
    tmp_path: Path,
) -> None:
    path = tmp_path / "in.txt"
    path.write_bytes(b"".join(b"old-%04d\n" % n for n in range(20)))
    store = MemoryCheckpointStore()
    for n, _line in enumerate(Checkpointer(store, "feed", every=100).iterate(LinesSource(path))):
        if n == 4:  # copytruncate-style rotation: same inode, new content
            with path.open("r+b") as handle:
                handle.truncate(0)
                handle.write(b"".join(b"NEW-RECORD-%04d\n" % n for n in range(40)))
        if n == 5:
            break  # saves the position after old-0004 (byte 45)
    try:
        again = list(Checkpointer(store, "feed").iterate(LinesSource(path)))
    except IdentityMismatchError:
        return  # refusing is fine
    assert again[:1] == ["NEW-RECORD-0000"], f"resumed inside the new file: {again[:2]!r}"


# 2 -------------------------------------------------------------------------------------
def test_a_deeply_nested_stored_value_is_corrupt_and_reset_removes_it(tmp_path: Path) -> None:
    root = tmp_path / "root"
    store = SnapStore(root)
    _forge_checkpoint(store, "deep", b"\x91" * 1000 + b"\xc0")  # msgpack decodes this
    result = run_snapstore(root, "checkpoint", "reset", "deep", "--yes")
    assert result.returncode == 0, result.stderr
    assert FileCheckpointStore(store).load("deep") is None


# 3 -------------------------------------------------------------------------------------
def test_inspect_of_a_position_with_a_non_integer_record_count_is_a_typed_error(
    tmp_path: Path,
) -> None:
    root, path = tmp_path / "root", tmp_path / "in.txt"
    path.write_text("a\nb\nc\n")
    identity = LinesSource(path).identity_at({"offset": 2, "records": 1})
    FileCheckpointStore(root).save("feed", {"offset": 2, "records": "x"}, identity=identity)
    result = run_snapstore(root, "--json", "checkpoint", "inspect", "feed")
    assert "internal error" not in result.stderr, result.stderr


# 4 -------------------------------------------------------------------------------------
def test_a_csv_with_a_leading_blank_line_resumes(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("\nid,name\n1,a\n2,b\n3,c\n")
    store = MemoryCheckpointStore()
    records = Checkpointer(store, "t", every=1).iterate(CsvSource(path))
    assert next(records) == {"id": "1", "name": "a"}
    next(records)
    records.close()  # rows 1 done, row 2 in hand
    rest = list(Checkpointer(store, "t", every=1).iterate(CsvSource(path)))
    assert rest == [{"id": "2", "name": "b"}, {"id": "3", "name": "c"}]


# 5 -------------------------------------------------------------------------------------
def test_checkpoint_list_marks_a_checkpoint_with_a_damaged_header_corrupt(
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    store = SnapStore(root)
    FileCheckpointStore(store).save("bad", 2)
    manifest = repository(store).backend.path(
        Handle(Kind.MANIFEST, manifest_name("checkpoints", "bad"))
    )
    os.chmod(manifest, 0o644)
    data = bytearray(Path(manifest).read_bytes())
    data[M.PRELUDE.size + 4] ^= 0xFF
    Path(manifest).write_bytes(bytes(data))
    result = run_snapstore(root, "checkpoint", "list")
    assert "CORRUPT" in result.stdout, (result.returncode, result.stdout, result.stderr)
