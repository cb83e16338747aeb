"""Damaged or hostile files inside a store root: never a hang, never memory exhaustion.

Each operation runs in a child process limited to 1 GiB of address space, against store files
replaced by sparse files of several GiB (which cost no disk but would cost their full size in
memory if read whole) or by FIFOs (which block a plain ``open`` forever).
"""

from __future__ import annotations

import os
import resource
import struct
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime
from pathlib import Path

import blake3
import pytest
from helpers.alarm import no_hang
from helpers.blobs import loosen, two_file_packs
from helpers.hostile import plant_manifest
from helpers.trees import write_tree

from snapstore import SnapStore
from snapstore.errors import CorruptBlobError, CorruptManifestError, FormatError
from snapstore.format.manifest import encode
from snapstore.format.packfile import (
    INDEX_HEAD,
    INDEX_HEAD_V1,
    INDEX_MAGIC,
    INDEX_MAGIC_V1,
    PACK_MAGIC_V1,
    RECORD_HEAD_V1,
)
from snapstore.internals import repository
from snapstore.models import SnapshotInfo
from snapstore.worktree.statcache import cache_name

MEMORY_LIMIT = 1 << 30
SPARSE_BYTES = 4 << 30


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def run_limited(script: str, **values: object) -> str:
    """Run ``script`` (with ``values`` bound as globals) in a child limited to 1 GiB of
    address space and 60 s; return its stdout; fail with its stderr if it fails."""
    prelude = "".join(f"{name} = {value!r}\n" for name, value in values.items())
    result = subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(script)],
        preexec_fn=_limit_memory,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def _digest_of(store: SnapStore, path: str) -> bytes:
    entry = store.get("s", "a").entry(path)
    assert entry is not None and entry.digest is not None
    return entry.digest


def _many_files(base: Path, count: int) -> None:
    write_tree(base, {f"d/f{i:03}.txt": f"file {i}\n" * 3 for i in range(count)})


def _make_sparse(path: Path, head: bytes, size: int = SPARSE_BYTES) -> None:
    if path.exists():
        path.chmod(0o644)
        path.unlink()
    with open(path, "wb") as file:
        file.write(head)
        file.truncate(size)


EVERY_OPERATION = """
    import warnings
    from snapstore import SnapStore
    warnings.simplefilter("ignore")
    store = SnapStore(root)
    print("list", len(store.list()))
    print("create", store.create("s", "again", ["."], base_dir=project).file_count)
    print("read", len(store.read("s", "a", "d/f000.txt")))
    print("restore", len(store.restore("s", "a", target).written))
    report = store.verify()
    print("verify", report.ok)
    print("gc", store.gc().skipped)
"""


def test_a_sparse_multi_gib_pack_index_costs_no_memory(tmp_path: Path) -> None:
    root, project = tmp_path / "store", tmp_path / "project"
    _many_files(project, 40)
    two_file_packs(SnapStore(root)).create("s", "a", ["."], base_dir=project)
    (index,) = (root / "packs").glob("*.idx")
    _make_sparse(index, INDEX_HEAD.pack(INDEX_MAGIC, 1, 80_000_000, 1 << 40))
    out = run_limited(
        EVERY_OPERATION, root=str(root), project=str(project), target=str(tmp_path / "t")
    )
    assert "verify False" in out  # the pack's blobs are missing: a problem, not a crash
    assert index.exists()


@pytest.mark.parametrize("which", ["headers", "stat"])
def test_sparse_multi_gib_caches_are_ignored(tmp_path: Path, which: str) -> None:
    root, project = tmp_path / "store", tmp_path / "project"
    _many_files(project, 5)
    store = SnapStore(root)
    store.create("s", "a", ["."], base_dir=project)
    store.list()
    name = "headers" if which == "headers" else cache_name(str(project))
    _make_sparse(root / "cache" / name, b"SNAPHDC\x03" if which == "headers" else b"SNAPSTC\x01")
    out = run_limited(
        EVERY_OPERATION, root=str(root), project=str(project), target=str(tmp_path / "t")
    )
    assert "list 1" in out and "verify True" in out and "gc False" in out


def test_an_index_claiming_a_huge_blob_does_not_shadow_a_loose_copy(tmp_path: Path) -> None:
    """A (format 1) pack index whose entry claims 1 TiB (with a sparse pack of that size, so
    the index checks out) must not be read for a blob the manifest records as small: the loose
    copy serves it."""
    root, project = tmp_path / "store", tmp_path / "project"
    write_tree(project, {"small.txt": "just a few bytes\n"})
    store = SnapStore(root)
    store.create("s", "a", ["small.txt"], base_dir=project)
    blob = loosen(store, _digest_of(store, "small.txt"))
    digest = bytes.fromhex(blob.parent.name + blob.name)
    huge = 1 << 40
    pack_id = "a" * 32
    offset = len(PACK_MAGIC_V1) + RECORD_HEAD_V1.size
    _make_sparse(root / "packs" / f"{pack_id}.pack", PACK_MAGIC_V1, offset + huge)
    body = INDEX_HEAD_V1.pack(INDEX_MAGIC_V1, 1, offset + huge)
    body += struct.pack("<32sQQ", digest, offset, huge)
    (root / "packs" / f"{pack_id}.idx").write_bytes(body + blake3.blake3(body).digest(length=16))
    out = run_limited(
        """
        from snapstore import SnapStore
        store = SnapStore(root)
        print(store.read("s", "a", "small.txt"))
        print(len(store.restore("s", "a", target).written))
        print(store.verify(deep=True).ok)
        """,
        root=str(root),
        target=str(tmp_path / "t"),
    )
    assert out.splitlines() == ["b'just a few bytes\\n'", "1", "True"]


def _fifo_at(path: Path) -> None:
    if path.exists():
        path.chmod(0o644)
        path.unlink()
    os.mkfifo(path)


def test_fifos_in_place_of_store_files_never_block(tmp_path: Path) -> None:
    root, project = tmp_path / "store", tmp_path / "project"
    _many_files(project, 40)
    store = SnapStore(root)
    store.create("s", "a", ["."], base_dir=project)
    store.create("s", "b", ["d/f000.txt"], base_dir=project)
    store.list()
    _fifo_at(root / "cache" / "headers")
    _fifo_at(root / "cache" / cache_name(str(project)))
    for index in (root / "packs").glob("*.idx"):
        _fifo_at(index)
    _fifo_at(Path(repository(store).catalog.manifest_path("s", "b")))
    with no_hang():
        fresh = SnapStore(root)
        with pytest.warns(UserWarning, match="not a regular file"):
            assert [info.name for info in fresh.list()] == ["a"]
        with pytest.raises(CorruptManifestError, match="not a regular file"):
            fresh.get("s", "b")
        assert fresh.create("s", "c", ["."], base_dir=project).file_count == 40
        report = fresh.verify()
        assert not report.ok and any("not a regular file" in p for p in report.problems)


def test_a_fifo_in_place_of_a_loose_blob_is_corrupt_not_a_hang(tmp_path: Path) -> None:
    root, project = tmp_path / "store", tmp_path / "project"
    write_tree(project, {"one.txt": "one\n"})
    store = SnapStore(root)
    store.create("s", "a", ["."], base_dir=project)
    _fifo_at(loosen(store, _digest_of(store, "one.txt")))
    with no_hang(), pytest.raises(CorruptBlobError):
        store.read("s", "a", "one.txt")


def test_a_fifo_as_the_format_marker_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "store"
    SnapStore(root)
    _fifo_at(root / "FORMAT")
    with no_hang(), pytest.raises(FormatError):
        SnapStore(root)


def test_a_manifest_with_a_relative_base_dir_is_corrupt(store: SnapStore, tmp_path: Path) -> None:
    """Restoring it would write under whatever the current directory happens to be."""
    info = SnapshotInfo("s", "rel", "files", datetime.now(UTC), None, 0, 0, {}, "relative/dir")
    data = encode(info, created_ns=time.time_ns(), expires_ns=None, rows=[])
    plant_manifest(store, "s", "rel", data)
    with pytest.raises(CorruptManifestError, match="base_dir"):
        store.get("s", "rel")
    with pytest.raises(CorruptManifestError):
        store.restore("s", "rel")
    with pytest.warns(UserWarning, match="base_dir"):
        assert store.list() == []


def test_a_restore_that_meets_a_damaged_header_names_the_snapshot_and_its_file(
    tmp_path: Path,
) -> None:
    base = tmp_path / "p"
    write_tree(base, {"a.txt": "a"})
    store = SnapStore(tmp_path / "store")
    store.create("s", "n", ["."], base_dir=base)
    manifest = Path(repository(store).catalog.manifest_path("s", "n"))
    plant_manifest(store, "s", "n", manifest.read_bytes()[:10])
    with pytest.raises(CorruptManifestError, match=r"snapshot 'n' in session 's' is corrupt \("):
        store.restore("s", "n", dry_run=True)
