"""A store in a bucket: opened by URL and from the command line, its commits conditional, its
reads lazy (request counts against the server's own tally)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import blake3
import pytest
from helpers.s3server import S3Server
from helpers.trees import write_tree

from snapstore import ConcurrentWriteError, SnapStore
from snapstore.backend.s3.backend import S3Backend
from snapstore.backend.seam import Handle, Kind, ObjectInfo
from snapstore.errors import SnapshotExistsError, StoreNotFoundError
from snapstore.format.manifest import encode
from snapstore.format.times import ns_to_time
from snapstore.models import SnapshotInfo
from snapstore.repo.catalog import manifest_name

from .conftest import Host, store_on


def _project(base: Path, files: int) -> Path:
    write_tree(base, {f"d{i % 7}/f{i}.txt": f"file {i}\n" * (1 + i % 5) for i in range(files)})
    return base


def test_a_store_opened_by_url_keeps_snapshots_for_another_host(
    s3_url: str, s3_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = _project(tmp_path / "project", 30)
    with SnapStore(s3_url) as store:
        store.create("s", "one", ["."], base_dir=project)
        assert store.root.startswith("s3://")
    monkeypatch.setenv("SNAPSTORE_CACHE_DIR", str(tmp_path / "other-host"))
    target = tmp_path / "elsewhere"
    with SnapStore(s3_url) as other:
        assert [info.name for info in other.list("s")] == ["one"]
        other.restore("s", "one", target=target)
    assert (target / "d3" / "f3.txt").read_text() == (project / "d3" / "f3.txt").read_text()


def test_the_command_line_takes_an_s3_root(
    s3_url: str, s3_cache: Path, tmp_path: Path, s3_server: S3Server
) -> None:
    project = _project(tmp_path / "project", 5)
    env = {**os.environ, **s3_server.env(), "SNAPSTORE_CACHE_DIR": str(s3_cache)}
    run = [sys.executable, "-m", "snapstore", "--root", s3_url]
    made = subprocess.run(
        [*run, "create", "s", ".", "--name", "cli"], cwd=project, env=env, capture_output=True
    )
    assert made.returncode == 0, made.stderr
    listed = subprocess.run([*run, "--json", "list", "s"], env=env, capture_output=True)
    assert listed.returncode == 0, listed.stderr
    assert "cli" in json.dumps(json.loads(listed.stdout))


def test_reading_makes_no_store_in_an_empty_prefix(
    s3_url: str, s3_cache: Path, s3_server: S3Server
) -> None:
    env = {**os.environ, **s3_server.env(), "SNAPSTORE_CACHE_DIR": str(s3_cache)}
    run = [sys.executable, "-m", "snapstore", "--root", s3_url]
    listed = subprocess.run([*run, "list"], env=env, capture_output=True, text=True)
    assert listed.returncode == 10, listed.stderr
    assert "no store at" in listed.stderr
    requests = '{"jsonrpc":"2.0","id":1,"method":"initialize"}\n' + (
        '{"jsonrpc":"2.0","id":2,"method":"list"}\n'
    )
    served = subprocess.run(
        [*run, "serve"], env=env, input=requests, capture_output=True, text=True, timeout=60
    )
    initialized, listing = (json.loads(line) for line in served.stdout.splitlines())
    assert initialized["result"]["store_exists"] is False
    assert initialized["result"]["root"] == s3_url
    assert listing["error"]["data"]["type"] == "StoreNotFound"
    with pytest.raises(StoreNotFoundError):
        SnapStore(s3_url, create=False)


def test_no_replace_across_hosts_lets_exactly_one_create_win(host: Host, tmp_path: Path) -> None:
    project = _project(tmp_path / "project", 3)
    first, second = store_on(host()), store_on(host())
    first.create("s", "same", ["."], base_dir=project, if_exists="error")
    with pytest.raises(SnapshotExistsError):
        second.create("s", "same", ["."], base_dir=project, if_exists="error")


def test_an_overwrite_replaces_only_the_version_it_read(host: Host) -> None:
    """A writer whose read is outdated (another host replaced the manifest since) is refused,
    and the other host's snapshot stays."""
    mine, theirs = host(), host()
    store_on(mine).put_state("c", "cursor", 1)
    handle = Handle(Kind.MANIFEST, manifest_name("c", "cursor"))
    seen = mine.stat(handle)
    store_on(theirs).put_state("c", "cursor", 2)
    real_stat = mine.stat

    def outdated(asked: Handle) -> ObjectInfo:
        return seen if asked == handle else real_stat(asked)

    mine.stat = outdated  # type: ignore[method-assign]
    with pytest.raises(ConcurrentWriteError):
        mine.write(handle, b"not a manifest")
    with pytest.raises(ConcurrentWriteError):
        mine.delete(handle)
    mine.stat = real_stat  # type: ignore[method-assign]
    assert store_on(host()).get_state("c", "cursor") == 2


def _fill_manifests(backend: S3Backend, count: int) -> None:
    """``count`` state snapshots of session ``many``, put straight into the bucket."""

    def put(i: int) -> None:
        created_ns = 1_700_000_000_000_000_000 + i
        info = SnapshotInfo(
            session="many",
            name=f"snap-{i:04d}",
            kind="state",
            created_at=ns_to_time(created_ns),
            expires_at=None,
            file_count=0,
            total_bytes=0,
            meta={},
            base_dir="",
        )
        data = encode(info, created_ns=created_ns, expires_ns=None, value=i)
        key = backend.key(Handle(Kind.MANIFEST, manifest_name("many", info.name)))
        backend.client.put_object(Bucket=backend.bucket, Key=key, Body=data)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(put, range(count)))


def test_list_of_many_snapshots_is_one_listing_and_no_gets_when_warm(
    host: Host, s3_server: S3Server
) -> None:
    backend = host()
    store = store_on(backend)
    _fill_manifests(backend, 300)
    with s3_server.counting() as cold:
        assert len(store.list("many")) == 300
    assert cold["LIST"] == 1 and cold["GET"] == 300
    again = store_on(backend)  # a new store object on the same host: its cache is warm
    with s3_server.counting() as warm:
        assert len(again.list("many")) == 300
    assert warm == {"LIST": 1}


def test_an_incremental_snapshot_costs_requests_for_what_changed_only(
    host: Host, tmp_path: Path, s3_server: S3Server
) -> None:
    project = _project(tmp_path / "project", 400)
    store = store_on(host())
    store.create("s", "first", ["."], base_dir=project)
    for i in range(0, 400, 100):
        (project / f"d{i % 7}" / f"f{i}.txt").write_text("changed\n")
    with s3_server.counting() as counts:
        store.create("s", "second", ["."], base_dir=project)
    puts = counts["PUT"]
    assert puts <= 7, counts  # pack, index, manifest, and the lock leases
    assert counts["GET"] + counts["HEAD"] <= 12, counts


def test_a_restore_reads_neighbouring_blobs_together(
    host: Host, tmp_path: Path, s3_server: S3Server
) -> None:
    project = _project(tmp_path / "project", 400)
    store_on(host()).create("s", "first", ["."], base_dir=project)
    store = store_on(host())
    target = tmp_path / "target"
    with s3_server.counting() as counts:
        report = store.restore("s", "first", target=target, backup=False)
    assert sum(path.endswith(".txt") for path in report.written) == 400
    assert counts["GET"] <= 10, counts
    for i in (0, 199, 399):
        relative = f"d{i % 7}/f{i}.txt"
        assert (target / relative).read_bytes() == (project / relative).read_bytes()


def test_a_large_object_goes_up_in_parts_and_reads_back_whole(
    host: Host, monkeypatch: pytest.MonkeyPatch
) -> None:
    from snapstore.backend.s3 import upload as s3upload

    monkeypatch.setattr(s3upload, "MULTIPART_BYTES", 6 << 20)
    monkeypatch.setattr(s3upload, "PART_BYTES", 5 << 20)
    backend = host()
    parts: list[object] = []
    backend.client.meta.events.register("before-send.s3.UploadPart", lambda **_: parts.append(1))
    data = bytes(range(256)) * (28 << 10)
    name = blake3.blake3(data).hexdigest()  # a blob is named by its digest
    staged = backend.stage(Kind.BLOB)
    staged.write(data)
    staged.commit(name)
    assert len(parts) == 2  # 7 MiB in parts of 5 MiB
    other = host()
    assert other.stat(Handle(Kind.BLOB, name)).size == len(data)
    assert b"".join(other.chunks(Handle(Kind.BLOB, name), 1 << 20)) == data
    again = other.stage(Kind.BLOB)  # the same blob from another writer: already there
    again.write(data)
    again.commit(name)
    assert other.stale_temps() == []
