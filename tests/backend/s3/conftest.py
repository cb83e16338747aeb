"""The S3 protocol server the object storage tests share (one per test process), a fresh
store prefix for each test, and hosts of one object store: backends with their own host
cache, reached directly or through a fault-injecting proxy."""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers.faultproxy import FaultProxy
from helpers.figures import LONG
from helpers.s3server import S3Server

from snapstore import SnapStore
from snapstore.backend.s3.backend import S3Backend
from snapstore.backend.s3.client import make_client

Host = Callable[..., S3Backend]

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


@pytest.fixture
def proxy(s3_server: S3Server) -> Iterator[FaultProxy]:
    made = FaultProxy(s3_server.endpoint)
    yield made
    made.close()


@pytest.fixture
def host(s3_url: str, tmp_path: Path, s3_server: S3Server) -> Iterator[Host]:
    """``host()`` opens the test's store as a new host (its own cache directory);
    ``endpoint`` (a proxy), ``lease``, ``lock_timeout`` and ``timeout`` (the client's) may
    be given."""
    opened: list[S3Backend] = []
    numbers = itertools.count()

    def make(
        *,
        endpoint: str | None = None,
        lease: float = 60.0,
        lock_timeout: float = 5.0,
        timeout: float | None = None,
    ) -> S3Backend:
        client = make_client(endpoint_url=endpoint or s3_server.endpoint, timeout=timeout)
        backend = S3Backend(
            s3_url,
            cache_dir=str(tmp_path / f"host-{next(numbers)}"),
            lock_timeout=lock_timeout,
            lease=lease,
            client=client,
        )
        opened.append(backend)
        return backend

    yield make
    for backend in opened:
        backend.leases.stop()
        backend.close()


def store_on(backend: S3Backend) -> SnapStore:
    """A store over ``backend``."""
    return SnapStore(backend, lock_timeout=backend.lock_timeout)


LOST_ANSWERS = [
    "after:500:InternalError",
    "after:503:SlowDown",
    "drop-response",
    "delay-response:1.5",
]
"""Faults after which the server has applied a request the client never saw answered (with a
client timeout of 1 s): it sends the request again."""
SOME_LOST_ANSWERS = LOST_ANSWERS if LONG else ["after:500:InternalError", "delay-response:1.5"]
"""Those a test that costs seconds per fault runs by default (all with ``SNAPSTORE_LONG=1``)."""

CLIENT_TIMEOUT = 1.0
SESSION_LOCK = "sessions/s-0123456789abcdef"
"""The name of a session's lock (a lease in the bucket, as ``gc``)."""


@pytest.fixture
def small_parts(monkeypatch: pytest.MonkeyPatch) -> int:
    """Objects of 256 KiB and more go up in parts of 64 KiB (the tests' server accepts parts
    that small); the threshold is returned."""
    from snapstore.backend.s3 import upload as s3upload

    monkeypatch.setattr(s3upload, "MULTIPART_BYTES", 4 * MIN_PART_BYTES)
    monkeypatch.setattr(s3upload, "PART_BYTES", MIN_PART_BYTES)
    return 4 * MIN_PART_BYTES


def lock_objects(backend: S3Backend) -> list[str]:
    """The keys of every lease object of the backend's store (none: no lock is held)."""
    return [key for key, _ in backend.objects.list(backend.leases.prefix)]
