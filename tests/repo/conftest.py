"""The S3 protocol server the object storage tests share (one per test process), and a
fresh store prefix for each test."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.s3server import S3Server

MIN_PART_BYTES = 64 << 10
"""The smallest part the tests' server accepts in a multipart upload."""


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """moto on loopback, with this process's environment pointed at it."""
    server = S3Server(min_part_bytes=MIN_PART_BYTES)
    saved = {name: os.environ.get(name) for name in server.env()}
    os.environ.update(server.env())
    try:
        yield server
    finally:
        server.stop()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@pytest.fixture
def s3_url(s3_server: S3Server) -> str:
    """A store URL no other test uses."""
    return s3_server.url(f"t-{uuid.uuid4().hex[:12]}")


@pytest.fixture
def s3_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This test's host cache directory (also the default of stores opened by URL)."""
    cache = tmp_path / "host-cache"
    monkeypatch.setenv("SNAPSTORE_CACHE_DIR", str(cache))
    return cache
