"""Faults between the client and the server: transient ones are retried and the operation
succeeds; persistent ones raise, and nothing of the failed operation is visible."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.faultproxy import FaultProxy, Request, is_get, is_manifest_put, is_put
from helpers.trees import write_tree

from snapstore import ConcurrentWriteError, ObjectStoreError
from snapstore.backend.seam import Handle, Kind

from .conftest import Host, store_on


def _project(base: Path) -> Path:
    write_tree(base, {f"f{i}.txt": f"file {i}\n" for i in range(20)})
    (base / "big.bin").write_bytes(bytes(range(256)) * 400)
    return base


def _pack_put(request: Request) -> bool:
    return request.method == "PUT" and request.path.endswith(".pack")


@pytest.mark.parametrize(
    "action",
    ["error:500:InternalError", "error:503:SlowDown", "drop", "drop-response", "delay:2.5"],
)
def test_a_transient_fault_is_retried_and_the_snapshot_lands(
    host: Host, proxy: FaultProxy, tmp_path: Path, action: str
) -> None:
    project = _project(tmp_path / "project")
    store = store_on(host(endpoint=proxy.endpoint, timeout=1.0))
    proxy.add(_pack_put, action)
    proxy.add(is_manifest_put, action)
    store.create("s", "one", ["."], base_dir=project)
    assert len(proxy.injected) == 2, proxy.injected
    fresh = store_on(host())
    assert [info.name for info in fresh.list("s")] == ["one"]
    assert fresh.verify(deep=True).ok
    assert fresh.read("s", "one", "big.bin") == (project / "big.bin").read_bytes()


def test_reads_survive_throttling_and_dropped_connections(
    host: Host, proxy: FaultProxy, tmp_path: Path
) -> None:
    project = _project(tmp_path / "project")
    store_on(host()).create("s", "one", ["."], base_dir=project)
    reader = store_on(host(endpoint=proxy.endpoint, timeout=1.0))
    proxy.add(is_get, "error:503:SlowDown", times=2)
    proxy.add(is_get, "drop-response", times=2)
    target = tmp_path / "target"
    reader.restore("s", "one", target, backup=False)
    assert (target / "big.bin").read_bytes() == (project / "big.bin").read_bytes()
    assert len(proxy.injected) == 4


def test_a_persistent_upload_failure_raises_and_commits_nothing(
    host: Host, proxy: FaultProxy, tmp_path: Path
) -> None:
    project = _project(tmp_path / "project")
    store = store_on(host(endpoint=proxy.endpoint, timeout=1.0))
    store.create("s", "old", ["."], base_dir=project)
    (project / "f1.txt").write_text("changed")
    proxy.add(_pack_put, "error:500:InternalError", times=100)
    with pytest.raises(ObjectStoreError, match="InternalError"):
        store.create("s", "new", ["."], base_dir=project)
    fresh = store_on(host())
    assert [info.name for info in fresh.list("s")] == ["old"]
    assert fresh.verify(deep=True).ok


def test_a_persistent_commit_failure_keeps_the_old_snapshot(
    host: Host, proxy: FaultProxy, tmp_path: Path
) -> None:
    project = _project(tmp_path / "project")
    store = store_on(host(endpoint=proxy.endpoint, timeout=1.0))
    store.create("s", "name", ["."], base_dir=project)
    (project / "f1.txt").write_text("changed")
    proxy.add(is_manifest_put, "drop", times=100)
    with pytest.raises(ObjectStoreError):
        store.create("s", "name", ["."], base_dir=project)
    fresh = store_on(host())
    assert fresh.read("s", "name", "f1.txt") == b"file 1\n"


def test_a_large_upload_cut_off_mid_part_is_never_visible(
    host: Host, proxy: FaultProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    from snapstore.backend.s3 import upload as s3upload

    monkeypatch.setattr(s3upload, "MULTIPART_BYTES", 6 << 20)
    monkeypatch.setattr(s3upload, "PART_BYTES", 5 << 20)
    backend = host(endpoint=proxy.endpoint, timeout=2.0)
    proxy.add(lambda r: is_put(r) and "partNumber=2" in r.path, "drop", times=100)
    staged = backend.stage(Kind.BLOB)
    staged.write(b"x" * (7 << 20))
    with pytest.raises(ObjectStoreError):
        staged.commit("ab" * 32)
    other = host()
    assert other.names(Kind.BLOB) == []
    assert other.stale_temps() == []  # the failed upload was aborted
    with pytest.raises(FileNotFoundError):
        other.stat(Handle(Kind.BLOB, "ab" * 32))


def test_a_provider_without_conditional_deletes_still_deletes(
    host: Host, proxy: FaultProxy
) -> None:
    store = store_on(host(endpoint=proxy.endpoint))
    store.put_state("c", "one", 1)
    store.put_state("c", "two", 2)
    proxy.add(
        lambda r: r.method == "DELETE" and "if-match" in r.headers,
        "error:501:NotImplemented",
        times=100,
    )
    store.delete("c", "one")
    store.delete("c", "two")
    assert store_on(host()).list("c") == []
    assert any("NotImplemented" in line for line in proxy.injected)


def test_a_commit_refused_by_a_concurrent_writer_raises_and_keeps_the_old_snapshot(
    host: Host, proxy: FaultProxy, tmp_path: Path
) -> None:
    project = _project(tmp_path / "project")
    store = store_on(host(endpoint=proxy.endpoint))
    store.create("s", "name", ["."], base_dir=project)
    (project / "f1.txt").write_text("changed")
    proxy.add(is_manifest_put, "error:412:PreconditionFailed")
    with pytest.raises(ConcurrentWriteError):
        store.create("s", "name", ["."], base_dir=project)
    assert store_on(host()).read("s", "name", "f1.txt") == b"file 1\n"
