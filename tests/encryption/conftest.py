"""Encrypted stores: cheap key derivation for tests, the S3 protocol server, and a helper
that lists every object a store keeps (a directory's files, a bucket's objects, the host
caches) with its name and bytes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from backend.s3.conftest import s3_server, s3_url
from helpers.s3server import S3Server

pytest.importorskip("cryptography")

__all__ = ["s3_server", "s3_url"]

TEST_KDF = "m=64,t=1,p=1"
"""Argon2id at its cheapest: these tests check what keys do, not what they cost."""


@pytest.fixture(autouse=True)
def cheap_kdf(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SNAPSTORE_KDF", TEST_KDF)
    for name in ("SNAPSTORE_PASSWORD", "SNAPSTORE_PASSWORD_FILE", "SNAPSTORE_ROOT"):
        monkeypatch.delenv(name, raising=False)


def directory_objects(root: Path) -> dict[str, bytes]:
    """Every file under ``root``: its path (relative) and bytes."""
    found = {}
    for directory, _, files in os.walk(root):
        for name in files:
            path = Path(directory, name)
            found[str(path.relative_to(root))] = path.read_bytes()
    return found


def bucket_objects(server: S3Server, url: str) -> dict[str, bytes]:
    """Every object of the bucket under the store's prefix: its key and bytes."""
    from snapstore.backend.s3.client import make_client

    client = make_client(endpoint_url=server.endpoint)
    prefix = url.split("/", 3)[3]
    found = {}
    for page in client.get_paginator("list_objects_v2").paginate(
        Bucket=server.bucket, Prefix=prefix
    ):
        for item in page.get("Contents", []):
            body = client.get_object(Bucket=server.bucket, Key=item["Key"])["Body"].read()
            found[item["Key"]] = body
    return found
