"""The object storage backend keeps the backend contract, on a real S3 protocol server on
loopback: directly (changes failed by refusing them in the client), and through a proxy that
fails a random share of first attempts (an error before the request is applied, an error or
a reset connection after it was applied) and refuses changes while ``failing``."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from helpers.faultproxy import FaultProxy, Request, Rule
from helpers.s3server import S3Server

from snapstore.backend.s3 import objects as s3objects
from snapstore.backend.s3.backend import S3Backend
from snapstore.backend.s3.client import make_client
from snapstore.backend.seam import Backend, Handle, Kind

from ..contract import LOCK_TIMEOUT, BackendContract, Failing, MakeBackend

FAULTS = ["after:500:InternalError", "drop-response", "error:500:InternalError"]
CHANGES = {"PutObject", "DeleteObject", "CreateMultipartUpload", "UploadPart"}
CHANGES |= {"CompleteMultipartUpload", "AbortMultipartUpload"}
DENIED = {"Error": {"Code": "AccessDenied", "Message": "injected"}, "ResponseMetadata": {}}


def is_change(request: Request) -> bool:
    """A request that changes the store's objects (not one of its leases)."""
    return request.method in ("PUT", "POST", "DELETE") and "/locks/" not in request.path


class S3Contract(BackendContract):
    """What both bindings share: hosts with their own cache on one bucket prefix, listings
    in pages of five keys, and dead writers' unfinished uploads."""

    @pytest.fixture
    def make_backend(
        self, s3_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, client: Any
    ) -> MakeBackend:
        monkeypatch.setattr(s3objects, "LIST_PAGE_KEYS", 5)
        hosts = iter(range(1000))

        def make(*, sharing: Backend | None = None) -> Backend:
            """Another process on the same host shares its host cache (and target locks)."""
            if isinstance(sharing, S3Backend):
                cache = sharing.local.root
            else:
                cache = str(tmp_path / f"host-{next(hosts)}")
            return S3Backend(s3_url, cache_dir=cache, lock_timeout=LOCK_TIMEOUT, client=client())

        return make

    @pytest.fixture
    def plant_stale_temp(self) -> Callable[[Backend], None]:
        def plant(backend: Backend) -> None:
            assert isinstance(backend, S3Backend)
            key = backend.key(Handle(Kind.BLOB, "dd" * 32))
            backend.client.create_multipart_upload(Bucket=backend.bucket, Key=key)

        return plant

    @pytest.fixture
    def plant_unfit(self) -> None:
        return None


class TestS3Backend(S3Contract):
    @pytest.fixture
    def client(self, s3_server: S3Server) -> Callable[[], Any]:
        return lambda: make_client(endpoint_url=s3_server.endpoint)

    @pytest.fixture
    def failing(self) -> Failing:
        @contextlib.contextmanager
        def fail(backend: Backend) -> Iterator[None]:
            assert isinstance(backend, S3Backend)

            def refuse(model: Any, params: dict[str, Any], **_: Any) -> Any:
                if model.name in CHANGES and "/locks/" not in params["url_path"]:
                    return AWSResponse(params["url"], 403, {}, None), DENIED
                return None

            events = backend.client.meta.events
            events.register_first("before-call.s3", refuse, unique_id="contract-failing")
            try:
                yield
            finally:
                events.unregister("before-call.s3", unique_id="contract-failing")

        return fail


class TestS3BackendThroughFaults(S3Contract):
    @pytest.fixture
    def proxy(
        self, request: pytest.FixtureRequest, s3_server: S3Server, monkeypatch: pytest.MonkeyPatch
    ) -> Iterator[FaultProxy]:
        """Each first attempt fails with a chance of one in three (the client's retry budget
        made unlimited, so that it keeps retrying: it is not what is tested here)."""
        from botocore.retries import quota

        made = FaultProxy(s3_server.endpoint, seed=len(request.node.name))
        for action in FAULTS:
            made.rule(action, attempt=1, times=None, chance=1 / 9)
        monkeypatch.setattr(quota.RetryQuota, "acquire", lambda self, amount: True)
        yield made
        made.close()

    @pytest.fixture
    def client(self, proxy: FaultProxy) -> Callable[[], Any]:
        return lambda: make_client(endpoint_url=proxy.endpoint, timeout=5.0)

    @pytest.fixture
    def failing(self, proxy: FaultProxy) -> Failing:
        @contextlib.contextmanager
        def fail(backend: Backend) -> Iterator[None]:
            saved = list(proxy.rules)
            refuse = Rule("error:403:AccessDenied", matches=is_change, times=None)
            proxy.rules[:] = [refuse, *saved]  # before the random faults: never applied
            try:
                yield
            finally:
                proxy.rules[:] = saved

        return fail


def test_listings_of_the_bindings_span_pages(
    s3_url: str, tmp_path: Path, s3_server: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bindings' page of five keys makes the contract's listings span several requests."""
    monkeypatch.setattr(s3objects, "LIST_PAGE_KEYS", 5)
    backend = S3Backend(s3_url, cache_dir=str(tmp_path / "host"), client=make_client())
    backend.open(create=True)
    pages: list[object] = []
    backend.client.meta.events.register("before-send.s3.ListObjectsV2", lambda **_: pages.append(1))
    names = [f"s/{i:02d}" for i in range(12)]
    for name in names:
        backend.write(Handle(Kind.MANIFEST, name), b"m")
    assert backend.names(Kind.MANIFEST) == names
    assert len(pages) == 3
