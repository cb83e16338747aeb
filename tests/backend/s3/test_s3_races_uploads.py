"""A store's gc aborts only its own abandoned multipart uploads: not those of another
store (or anything else) under its prefix."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from helpers.s3server import S3Server

from snapstore.backend.s3.backend import S3Backend
from snapstore.backend.s3.client import make_client
from snapstore.backend.s3.upload import pending_uploads
from snapstore.backend.seam import Handle, Kind

from ..contract import digest
from .conftest import store_on


def test_gc_of_a_store_at_the_bucket_root_leaves_other_stores_uploads_alone(
    s3_server: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from snapstore.backend.s3 import upload as s3upload

    monkeypatch.setattr(s3upload, "MULTIPART_BYTES", 6 << 20)
    monkeypatch.setattr(s3upload, "PART_BYTES", 5 << 20)
    bucket = f"b-{uuid.uuid4().hex[:8]}"
    s3_server.make_bucket(bucket)

    def backend(url: str, cache: str) -> S3Backend:
        client = make_client(endpoint_url=s3_server.endpoint)
        return S3Backend(url, cache_dir=str(tmp_path / cache), client=client, lock_timeout=5)

    root = store_on(backend(f"s3://{bucket}", "root"))
    other = backend(f"s3://{bucket}/projects/x", "x")
    store_on(other)
    ran: list[Any] = []

    def gc_of_the_root_store_runs(**_: Any) -> None:
        if not ran:
            ran.append(root.gc())  # another store's gc, while x's large blob is uploading

    other.client.meta.events.register(
        "before-send.s3.CompleteMultipartUpload", gc_of_the_root_store_runs
    )
    data = bytes(range(256)) * (7 << 12)
    blob = Handle(Kind.BLOB, digest(data))
    with other.lock("gc").shared():
        staged = other.stage(Kind.BLOB)
        staged.write(data)
        staged.commit(blob.name)  # would fail (NoSuchUpload) had the root's gc aborted it
    assert len(ran) == 1, "the upload did not go up in parts: the race was not run"
    assert not ran[0].skipped
    assert other.read(blob, max_bytes=len(data))[0] == data
    assert pending_uploads(other.objects) == []
