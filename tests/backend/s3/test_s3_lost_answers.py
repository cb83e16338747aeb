"""Requests the server applied but whose answer was lost (a 500 or 503 after the write, a
reset connection, a timeout): the client sends them again, and each retry must recognise its
own earlier attempt. A lock claim or a lease renewal refused with 412 because it already went
through, a delete answered 404 because it already went through, a multipart completion
answered ``NoSuchUpload`` or 412 because it already went through: each is a success, and no
lock is left behind."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta

import blake3
import pytest
from helpers.faultproxy import FaultProxy

from snapstore import LockTimeout, ObjectStoreError
from snapstore.backend.seam import Handle, Kind

from .conftest import (
    CLIENT_TIMEOUT,
    LOST_ANSWERS,
    SESSION_LOCK,
    SOME_LOST_ANSWERS,
    Host,
    lock_objects,
    store_on,
)


def _wait_for(condition: object, seconds: float = 15.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.02)


@pytest.mark.parametrize("action", LOST_ANSWERS)
def test_a_claim_applied_but_unanswered_holds_the_lock_and_leaves_nothing(
    host: Host, proxy: FaultProxy, action: str
) -> None:
    holder = host(endpoint=proxy.endpoint, timeout=CLIENT_TIMEOUT)
    other = host(lock_timeout=0.5)
    proxy.rule(action, operation="PutObject If-None-Match", path="/locks/gc/x$")
    with holder.lock("gc").exclusive(), other.lock("gc").exclusive_if_free() as free:
        assert not free
    assert len(proxy.injected) == 1, proxy.injected
    with other.lock("gc").exclusive(timeout=0.5):
        pass
    assert lock_objects(other) == []


def test_a_claim_whose_every_attempt_is_lost_leaves_no_lock_behind(
    host: Host, proxy: FaultProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    from snapstore.backend.s3 import client as s3client

    monkeypatch.setattr(s3client, "MAX_ATTEMPTS", 2)  # the client gives up sooner
    holder = host(endpoint=proxy.endpoint, timeout=CLIENT_TIMEOUT)
    other = host(lock_timeout=0.5)
    proxy.rule(
        "after:500:InternalError", operation="PutObject If-None-Match", path="/locks/", times=None
    )
    with pytest.raises(ObjectStoreError), holder.lock(SESSION_LOCK).exclusive():
        pass
    with other.lock(SESSION_LOCK).exclusive(timeout=0.5):
        pass
    assert lock_objects(other) == []


@pytest.mark.parametrize("action", SOME_LOST_ANSWERS)
def test_a_renewal_applied_but_unanswered_keeps_the_lease(
    host: Host, proxy: FaultProxy, action: str
) -> None:
    holder = host(endpoint=proxy.endpoint, lease=4.0, timeout=CLIENT_TIMEOUT)
    other = host(lock_timeout=0.3)
    with holder.lock(SESSION_LOCK).exclusive():
        rule = proxy.rule(action, operation="PutObject If-Match", path="/locks/", times=2)
        _wait_for(lambda: rule.used == 2)
        time.sleep(1.5)  # the renewal after them
        holder.leases.check()
        holder.write(Handle(Kind.BLOB, "ab" * 32), b"still the holder")
        with pytest.raises(LockTimeout), other.lock(SESSION_LOCK).shared():
            pass
    with other.lock(SESSION_LOCK).exclusive(timeout=0.5):
        pass
    assert lock_objects(other) == []


def test_a_release_while_a_renewal_is_unanswered_leaves_no_lease(
    host: Host, proxy: FaultProxy
) -> None:
    holder = host(endpoint=proxy.endpoint, lease=2.0, timeout=5.0)
    other = host(lock_timeout=0.5)
    with holder.lock("gc").exclusive():
        rule = proxy.rule("delay-response:1.5", operation="PutObject If-Match", path="/locks/")
        _wait_for(lambda: rule.used == 1)
        time.sleep(0.3)  # the renewal is applied; its answer is on the way, and we let go
    with other.lock("gc").exclusive(timeout=0.5):
        pass
    assert lock_objects(other) == []


@pytest.mark.parametrize("action", SOME_LOST_ANSWERS)
@pytest.mark.parametrize("operation", ["delete", "delete_session", "sweep"])
def test_a_delete_applied_but_unanswered_is_reported_done(
    host: Host, proxy: FaultProxy, action: str, operation: str
) -> None:
    store = store_on(host(endpoint=proxy.endpoint, timeout=CLIENT_TIMEOUT))
    store.put_state("c", "one", 1, ttl=60)
    proxy.rule(action, operation="DeleteObject If-Match", path="/sessions/")
    if operation == "delete":
        assert store.delete("c", "one") is True
    elif operation == "delete_session":
        assert store.delete_session("c") == 1
    else:
        report = store.sweep(now=datetime.now(UTC) + timedelta(hours=1))
        assert report.deleted == [("c", "one")]
    assert len(proxy.injected) == 1, proxy.injected
    checker = host()
    assert store_on(checker).list("c") == []
    assert lock_objects(checker) == []


@pytest.mark.parametrize(
    "retry_answer", [None, "error:404:NoSuchUpload", "error:412:PreconditionFailed"]
)
def test_a_completion_applied_but_unanswered_is_recognised(
    host: Host, proxy: FaultProxy, small_parts: int, retry_answer: str | None
) -> None:
    """AWS answers a completion sent again after it succeeded with 404 ``NoSuchUpload`` (or,
    with ``If-None-Match``, 412); moto with the object itself."""
    backend = host(endpoint=proxy.endpoint, timeout=CLIENT_TIMEOUT)
    proxy.rule("after:500:InternalError", operation="CompleteMultipartUpload")
    if retry_answer is not None:
        proxy.rule(retry_answer, operation="CompleteMultipartUpload")
    data = os.urandom(small_parts + 1000)
    name = blake3.blake3(data).hexdigest()
    staged = backend.stage(Kind.BLOB)
    staged.write(data)
    staged.commit(name)
    other = host()
    assert b"".join(other.chunks(Handle(Kind.BLOB, name), 1 << 16)) == data
    assert other.stale_temps() == []


@pytest.mark.parametrize("kind", [Kind.BLOB, Kind.PACK])
def test_an_object_of_the_same_size_but_other_bytes_is_never_counted_on(
    host: Host, small_parts: int, kind: Kind
) -> None:
    """A create refused because an object is already there counts only if that object is
    this very write (its nonce) or, for a blob, holds the bytes its name is the digest of."""
    backend = host()
    data = os.urandom(3000)
    name = blake3.blake3(data).hexdigest()
    handle = Handle(kind, name)
    squatter = bytes(len(data))
    backend.client.put_object(Bucket=backend.bucket, Key=backend.key(handle), Body=squatter)
    staged = backend.stage(kind)
    staged.write(data)
    with pytest.raises(OSError, match="holds other bytes"):
        staged.commit(name)


def test_a_pending_upload_aborted_twice_does_not_fail_gc(host: Host, proxy: FaultProxy) -> None:
    collector = host(endpoint=proxy.endpoint, timeout=CLIENT_TIMEOUT)
    store = store_on(collector)
    key = collector.prefix + "blobs/" + "cd" * 32
    collector.client.create_multipart_upload(Bucket=collector.bucket, Key=key)  # a dead writer's
    proxy.rule("after:500:InternalError", operation="AbortMultipartUpload")
    report = store.gc()
    assert not report.skipped
    assert host().stale_temps() == []


def test_a_large_read_cut_off_mid_body_resumes_where_it_broke(
    host: Host, proxy: FaultProxy
) -> None:
    writer, reader = host(), host(endpoint=proxy.endpoint, timeout=CLIENT_TIMEOUT)
    data = os.urandom(3 << 20)
    handle = Handle(Kind.BLOB, blake3.blake3(data).hexdigest())
    writer.write(handle, data)
    proxy.rule("truncate", operation="GetObject.*", path="/blobs/", times=2)
    assert b"".join(reader.chunks(handle, 1 << 20)) == data
    assert len(proxy.injected) == 2
