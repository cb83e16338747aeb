"""A whole store's life through the fault-injecting proxy, for every kind of request the
backend sends and every way object storage fails: errors before a request is applied, answers
lost after it was applied (a 500, a reset connection, a timeout), uploads cut off, requests
held up in the network. After each run every acknowledged snapshot reads back byte for byte,
a deep verify is clean, no lock is left held, every report (``delete``'s answer, what
``delete_session`` and ``sweep`` say they deleted) is true, and gc is not held up.

By default each fault of the first group hits the first attempt of every request; the slow
ones (timeouts, throttling) hit the first request of each kind. ``SNAPSTORE_LONG=1`` makes
every fault hit the first attempt of every request, and the first two of each kind.
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from helpers.faultproxy import FaultProxy
from helpers.figures import LONG, record
from helpers.trees import read_tree, write_tree

from snapstore import SnapStore
from snapstore.backend.s3.backend import S3Backend

from .conftest import CLIENT_TIMEOUT, Host, lock_objects, store_on

EVERY_REQUEST = ["after:500:InternalError", "drop-response", "error:500:InternalError", "drop"]
"""Faults cheap enough to put on the first attempt of every request (the first two by
default: answers lost after the request was applied)."""
SLOW = ["delay-response:1.5", "delay:1.5", "after:503:SlowDown", "error:503:SlowDown"]
"""Faults that cost the client a timeout or a throttling backoff each: by default one run
gives each kind of request one of them, in turn."""

SENT = {
    "PutObject",
    "PutObject If-None-Match",
    "PutObject If-Match",
    "CreateMultipartUpload",
    "UploadPart",
    "CompleteMultipartUpload",
    "AbortMultipartUpload",
    "GetObject",
    "GetObject Range",
    "HeadObject",
    "ListObjectsV2",
    "ListMultipartUploads",
    "DeleteObject",
    "DeleteObject If-Match",
}
"""Every kind of request the backend sends (the backend sends no copy, and no batch delete)."""


@pytest.fixture
def small_objects(monkeypatch: pytest.MonkeyPatch, small_parts: int) -> int:
    """Files of 128 KiB and more are loose blobs; objects of 256 KiB and more go up in parts.
    The client's retry budget (botocore's circuit breaker against outages: a retry that ends
    in an error answer, even an expected 404, is not paid back) is unlimited: it would run
    out when every request fails once, which is what these tests inject, not what they test."""
    from botocore.retries import quota

    from snapstore.repo import batch

    monkeypatch.setattr(batch, "PACKED_MAX_BYTES", 128 << 10)
    monkeypatch.setattr(quota.RetryQuota, "acquire", lambda self, amount: True)
    return small_parts


def _life(store: SnapStore, backend: S3Backend, base: Path, target: Path) -> dict[str, object]:
    """Everything a store does, once; what was acknowledged, for the checks."""
    project = base / "project"
    write_tree(project, {f"d{i % 3}/f{i}.txt": f"file {i}\n" * (i + 1) for i in range(30)})
    (project / "large.bin").write_bytes(os.urandom(300 << 10))  # in parts
    store.create("s", "one", ["."], base_dir=project)
    (project / "d0" / "f0.txt").write_text("changed\n")
    (project / "own.bin").write_bytes(os.urandom(150 << 10))  # a loose blob of its own
    store.create("s", "two", ["."], base_dir=project)
    (project / "own.bin").unlink()
    (project / "d1" / "f1.txt").write_text("changed again\n")
    store.create("s", "one", ["."], base_dir=project)  # replaces "one"
    acknowledged = {"one": read_tree(project)}
    store.put_state("c", "cursor", 1)
    store.put_state("c", "cursor", 2)
    store.put_state("c", "expiring", 3, ttl=60)
    store.put_state("gone", "a", 1)
    store.put_state("gone", "b", 2)
    assert sorted(info.name for info in store.list("s")) == ["one", "two"]
    assert store.read("s", "one", "large.bin") == (project / "large.bin").read_bytes()
    store.restore("s", "one", target, backup=False)
    assert read_tree(target) == acknowledged["one"]
    assert store.delete("s", "two") is True
    assert store.delete_session("gone") == 2
    swept = store.sweep(now=datetime.now(UTC) + timedelta(hours=1))
    assert swept.deleted == [("c", "expiring")]
    with backend.lock("gc").shared():
        time.sleep(backend.leases.lease / 4 + 0.3)  # long enough for a renewal
    key = backend.prefix + "blobs/" + "ab" * 32
    backend.client.create_multipart_upload(Bucket=backend.bucket, Key=key)  # a dead writer's
    report = store.gc()
    assert not report.skipped
    return acknowledged


def _check(checker: S3Backend, acknowledged: dict[str, object], tmp_path: Path) -> None:
    store = store_on(checker)
    assert [info.name for info in store.list("s")] == ["one"]
    target = tmp_path / "check"
    store.restore("s", "one", target, backup=False)
    assert read_tree(target) == acknowledged["one"]
    assert store.get_state("c", "cursor") == 2
    assert [info.name for info in store.list("c")] == ["cursor"]
    assert store.list("gone") == []
    report = store.verify(deep=True)
    assert report.ok, report
    assert report.garbage == [], report.garbage
    assert lock_objects(checker) == []


def _run(host: Host, proxy: FaultProxy, tmp_path: Path, lease: float = 4.0) -> None:
    """The life, then the checks; ``lease`` must leave room for a renewal that takes a
    timeout and a retry, and its look after a refusal the same (else the holder rightly
    stops trusting its lease, and the operation fails with LeaseLostError)."""
    backend = host(endpoint=proxy.endpoint, lease=lease, lock_timeout=30, timeout=CLIENT_TIMEOUT)
    acknowledged = _life(store_on(backend), backend, tmp_path, tmp_path / "target")
    backend.leases.stop()
    _check(host(), acknowledged, tmp_path)
    record("s3 fault matrix", runs=1, requests=len(proxy.seen), faults=len(proxy.injected))
    assert proxy.operations() >= SENT, SENT - proxy.operations()
    assert proxy.faulted(), "no fault was injected"


@pytest.mark.parametrize("action", EVERY_REQUEST + SLOW if LONG else EVERY_REQUEST[:2])
def test_a_fault_on_every_request_loses_nothing_and_leaves_no_lock(
    host: Host, proxy: FaultProxy, tmp_path: Path, small_objects: int, action: str
) -> None:
    proxy.rule(action, attempt=1, times=None)
    _run(host, proxy, tmp_path, lease=12.0 if action.startswith("delay") else 4.0)
    assert proxy.faulted() >= SENT, SENT - proxy.faulted()


@pytest.mark.parametrize("actions", [[a] for a in SLOW + EVERY_REQUEST] if LONG else [SLOW])
def test_slow_faults_on_each_kind_of_request_lose_nothing(
    host: Host, proxy: FaultProxy, tmp_path: Path, small_objects: int, actions: list[str]
) -> None:
    for number, operation in enumerate(sorted(SENT)):
        action = actions[number % len(actions)]
        proxy.rule(action, operation=operation, attempt=1, times=2 if LONG else 1)
    _run(host, proxy, tmp_path)
    assert proxy.faulted() >= SENT, SENT - proxy.faulted()
