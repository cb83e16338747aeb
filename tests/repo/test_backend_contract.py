"""The contract every storage backend keeps; each backend runs this whole suite.

Adding a backend is adding a fixture parameter: what the repository relies on (namespaces per
kind, atomic whole-object writes, staged objects invisible until committed, versions that move
on every write, bounded reads, named shared/exclusive locks with timeouts) is checked here.
The object storage backend runs it against a real S3 protocol server on loopback, directly
and through a proxy that fails a random share of first attempts (an error before the request
is applied, an error or a reset connection after it was applied).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from snapstore import ConcurrentWriteError, LockTimeout, SnapStore
from snapstore.backend.local import LocalBackend
from snapstore.backend.memory import MemoryBackend
from snapstore.backend.s3.backend import S3Backend
from snapstore.backend.seam import Backend, Handle, Kind
from snapstore.fs.reading import UnfitFileError

BACKENDS = ["local", "memory", "s3", "s3-faults"]
FAULTS = ["after:500:InternalError", "drop-response", "error:500:InternalError"]


def _faulty_client(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A client whose requests go through a fault-injecting proxy: each first attempt fails
    with a chance of one in three (the client's retry budget made unlimited, so that it
    keeps retrying: it is not what is tested here)."""
    from botocore.retries import quota
    from helpers.faultproxy import FaultProxy

    from snapstore.backend.s3.client import make_client

    proxy = FaultProxy(request.getfixturevalue("s3_server").endpoint, seed=len(request.node.name))
    request.addfinalizer(proxy.close)
    for action in FAULTS:
        proxy.rule(action, attempt=1, times=None, chance=1 / 9)
    monkeypatch.setattr(quota.RetryQuota, "acquire", lambda self, amount: True)
    return make_client(endpoint_url=proxy.endpoint, timeout=5.0)


@pytest.fixture(params=BACKENDS)
def backend(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Backend]:
    made: Backend
    if request.param == "local":
        made = LocalBackend(str(tmp_path / "store"), lock_timeout=0.2)
    elif request.param.startswith("s3"):
        url = request.getfixturevalue("s3_url")
        client = _faulty_client(request, monkeypatch) if request.param == "s3-faults" else None
        cache = str(tmp_path / "host-cache")
        made = S3Backend(url, cache_dir=cache, lock_timeout=0.2, client=client)
    else:
        made = MemoryBackend(lock_timeout=0.2)
    assert made.open(create=True) is True
    yield made
    made.close()


def test_objects_round_trip_and_kinds_are_separate_namespaces(backend: Backend) -> None:
    blob, cache = Handle(Kind.BLOB, "ab" * 32), Handle(Kind.CACHE, "ab" * 32)
    backend.write(blob, b"blob bytes")
    backend.write(cache, b"cache bytes", durable=False)
    assert backend.read(blob, max_bytes=100)[0] == b"blob bytes"
    assert backend.read(cache, max_bytes=100)[0] == b"cache bytes"
    assert backend.names(Kind.BLOB) == ["ab" * 32]
    assert backend.names(Kind.CACHE) == ["ab" * 32]
    assert backend.names(Kind.PACK) == []
    info = backend.stat(blob)
    assert info.size == len(b"blob bytes") and info.written_ns > 0


def test_a_missing_object_is_file_not_found(backend: Backend) -> None:
    missing = Handle(Kind.JOURNAL, "0" * 32)
    with pytest.raises(FileNotFoundError):
        backend.stat(missing)
    with pytest.raises(FileNotFoundError):
        backend.read(missing, max_bytes=10)
    with pytest.raises(FileNotFoundError):
        backend.delete(missing)


def test_reads_are_bounded_ranged_and_chunked(backend: Backend) -> None:
    handle = Handle(Kind.PACK, "1" * 32)
    data = bytes(range(256)) * 40
    backend.write(handle, data)
    with pytest.raises(UnfitFileError):
        backend.read(handle, max_bytes=len(data) - 1)
    assert backend.read_range(handle, 100, 50) == data[100:150]
    assert backend.read_range(handle, len(data) - 10, 50) == data[-10:]
    head, info = backend.read_head(handle, 16)
    assert head == data[:16] and info.size == len(data)
    assert b"".join(backend.chunks(handle, 1000)) == data
    assert max(len(chunk) for chunk in backend.chunks(handle, 1000)) <= 1000


def test_a_rewrite_replaces_the_whole_object_and_moves_its_version(backend: Backend) -> None:
    handle = Handle(Kind.MANIFEST, "session-1/name-2")
    backend.write(handle, b"first")
    first = backend.stat(handle).version
    assert backend.stat(handle).version == first
    backend.write(handle, b"second, longer")
    assert backend.read(handle, max_bytes=100)[0] == b"second, longer"
    assert backend.stat(handle).version != first
    assert backend.names(Kind.MANIFEST) == ["session-1/name-2"]
    assert backend.names(Kind.MANIFEST, "session-1/") == ["session-1/name-2"]
    assert backend.names(Kind.MANIFEST, "other/") == []
    backend.delete(handle)
    assert backend.names(Kind.MANIFEST) == []


def test_a_delete_of_the_version_read_never_removes_a_newer_one(backend: Backend) -> None:
    handle = Handle(Kind.MANIFEST, "session-1/name-2")
    backend.write(handle, b"first")
    judged = backend.stat(handle).version
    backend.write(handle, b"second, by another writer")
    with pytest.raises(ConcurrentWriteError):
        backend.delete(handle, version=judged)
    assert backend.read(handle, max_bytes=100)[0] == b"second, by another writer"
    backend.delete(handle, version=backend.stat(handle).version)
    assert backend.names(Kind.MANIFEST) == []


def test_staged_objects_are_invisible_until_committed(backend: Backend) -> None:
    staged = backend.stage(Kind.BLOB)
    staged.write(b"half")
    staged.restart()
    staged.write(b"whole ")
    staged.write(b"bytes")
    assert staged.size == len(b"whole bytes")
    assert backend.names(Kind.BLOB) == []
    staged.commit("cd" * 32)
    backend.flush()
    assert backend.read(Handle(Kind.BLOB, "cd" * 32), max_bytes=100)[0] == b"whole bytes"
    dropped = backend.stage(Kind.PACK)
    dropped.write(b"never published")
    dropped.abort()
    assert backend.names(Kind.PACK) == []
    assert backend.stale_temps() == []
    backend.note_existing(Handle(Kind.BLOB, "cd" * 32))
    backend.flush()


def test_names_filter_by_prefix(backend: Backend) -> None:
    for name in ("aa" + "0" * 62, "aa" + "1" * 62, "bb" + "0" * 62):
        backend.write(Handle(Kind.BLOB, name), b"x")
    assert backend.names(Kind.BLOB, "aa") == ["aa" + "0" * 62, "aa" + "1" * 62]
    assert len(backend.names(Kind.BLOB)) == 3


def test_locks_share_and_exclude_with_timeouts(backend: Backend) -> None:
    lock = backend.lock("gc")
    with lock.shared(), lock.shared():
        with pytest.raises(LockTimeout, match="gc"), lock.exclusive(timeout=0.1):
            pass
        with lock.exclusive_if_free() as free:
            assert not free
    with lock.exclusive_if_free() as free:
        assert free
    labelled = backend.lock("targets/" + "f" * 32, "target /somewhere")
    held = threading.Event()
    release = threading.Event()

    def holder() -> None:
        with labelled.exclusive():
            held.set()
            release.wait(5)

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        assert held.wait(5)
        with pytest.raises(LockTimeout, match="target /somewhere"), labelled.shared(timeout=0.1):
            pass
    finally:
        release.set()
        thread.join()


def test_a_whole_store_works_on_the_backend(backend: Backend, tmp_path: Path) -> None:
    """The seam carries everything a store does: the same API, whatever holds the bytes."""
    project = tmp_path / "project"
    project.mkdir()
    for i in range(40):
        (project / f"f{i}.txt").write_text(f"file {i}\n")
    (project / "big.bin").write_bytes(bytes(range(256)) * 70_000)
    store = SnapStore(backend, lock_timeout=5)
    store.create("s", "one", ["."], base_dir=project)
    (project / "f1.txt").write_text("edited")
    store.create("s", "two", ["."], base_dir=project)
    assert [info.name for info in store.list("s")] == ["one", "two"]
    assert store.read("s", "one", "f1.txt") == b"file 1\n"
    assert store.diff("s", "one", "two").modified == ["f1.txt"]
    report = store.restore("s", "one")
    assert report.written == ["f1.txt"] and (project / "f1.txt").read_text() == "file 1\n"
    store.undo("s")
    assert (project / "f1.txt").read_text() == "edited"
    store.put_state("c", "cursor", {"row": 3})
    assert store.get_state("c", "cursor") == {"row": 3}
    assert store.verify(deep=True).ok
    store.delete("s", "one")
    assert not store.gc().skipped
    assert store.verify(deep=True).ok and store.verify().garbage == []
    assert SnapStore(backend).read("s", "two", "big.bin") == (project / "big.bin").read_bytes()
