"""Chunked files on an S3-compatible store (moto on loopback): stored, read whole and in
part, restored, verified, and collected by gc from another host."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from helpers.s3server import S3Server

from snapstore import SnapStore
from snapstore.internals import repository
from snapstore.repo.contents import load_map

MIB = 1 << 20


def _checkpointed(url: str, tmp_path: Path, data: bytes) -> Path:
    """A project holding ``data`` as big.bin, checkpointed as s/v1 in the store at ``url``."""
    base = tmp_path / "project"
    base.mkdir()
    (base / "big.bin").write_bytes(data)
    with SnapStore(url) as store:
        store.create("s", "v1", ["."], base_dir=base)
    return base


def test_chunked_files_on_object_storage(
    s3_url: str, s3_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = random.Random(1).randbytes(5 * MIB)
    base = _checkpointed(s3_url, tmp_path, first)
    with SnapStore(s3_url) as store:
        changed = bytearray(first)
        changed[2 * MIB : 2 * MIB + 4096] = bytes(4096)
        (base / "big.bin").write_bytes(changed)
        store.create("s", "v2", ["."], base_dir=base)
        info = store.get("s", "v2").info
        assert info.stored_bytes is not None and info.stored_bytes < 3 * MIB
    monkeypatch.setenv("SNAPSTORE_CACHE_DIR", str(tmp_path / "other-host"))
    with SnapStore(s3_url) as other:
        assert other.read("s", "v1", "big.bin") == first
        part = other.read_slice("s", "v2", "big.bin", offset=2 * MIB, length=8192)
        assert part.data == bytes(changed[2 * MIB : 2 * MIB + 8192])
        other.restore("s", "v1", tmp_path / "restored")
        assert (tmp_path / "restored" / "big.bin").read_bytes() == first
        other.delete("s", "v1")
        other.gc()
        assert other.read("s", "v2", "big.bin") == bytes(changed)
        assert other.verify(deep=True).ok


def test_a_restore_from_object_storage_reads_a_chunked_file_ahead_in_ranges(
    s3_url: str, s3_server: S3Server, s3_cache: Path, tmp_path: Path
) -> None:
    data = random.Random(2).randbytes(12 * MIB)
    _checkpointed(s3_url, tmp_path, data)
    with SnapStore(s3_url) as store:
        entry = store.get("s", "v1").entry("big.bin")
        assert entry is not None and entry.digest is not None
        chunks = len(load_map(repository(store).blobs, entry.digest, entry.size))
        with s3_server.counting() as requests:
            store.restore("s", "v1", tmp_path / "restored")
    assert (tmp_path / "restored" / "big.bin").read_bytes() == data
    assert requests["GET"] < chunks // 2, f"{requests['GET']} GETs for {chunks} chunks"
