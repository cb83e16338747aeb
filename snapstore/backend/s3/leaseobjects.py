"""The requests on lease objects (``locks/<name>/x`` and ``locks/<name>/s-...``): writing one
with a nonce, looking at one, deleting exactly the version seen, and listing the live shared
holders of a lock. Which lease to take, renew or give back is ``s3lease``'s decision.

Every write of a lease object carries a nonce of its own, in its body and in its metadata, so
each version is distinguishable from every other (a breaker's conditional delete of the
version it judged never matches a newer one), and so that a holder whose request was applied
but not answered (a 500, a reset connection or a timeout after the write took effect, then a
retry refused with 412) can recognise its own write by looking at the object.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass
from typing import Any

from snapstore.backend.s3.client import (
    client_errors,
    datetime_ns,
    error_code,
    is_not_found,
    is_precondition_failed,
    server_now_ns,
    translate,
    was_retried,
)
from snapstore.logs import get_logger

MAX_LEASE = 3600.0
UNSUPPORTED = {"NotImplemented", "501"}
"""What a provider answers a conditional delete it does not support with."""
GRACE_NS = 2_000_000_000
"""Added to a lease before another host breaks it: ``Last-Modified`` and ``Date`` have a
resolution of one second."""
NONCE_KEY = "nonce"
"""The metadata entry (``x-amz-meta-nonce``) holding the nonce of a lease object's write."""

logger = get_logger(__name__)


@dataclass(frozen=True)
class Seen:
    """A lease object as one HEAD saw it: its version, whether it has expired by the
    server's clock, and the nonce of the write that made that version."""

    etag: str
    expired: bool
    nonce: str | None


class LeaseObjects:
    """The lease objects of one store under ``prefix`` (``<store prefix>locks/``)."""

    def __init__(self, client: Any, bucket: str, prefix: str, lease: float, holder: str) -> None:
        self.client = client
        self.bucket = bucket
        self.prefix = prefix
        self.lease = lease
        self.holder = holder
        self.conditional_deletes = True

    def where(self, key: str) -> str:
        """The URL of a lease object, for messages."""
        return f"s3://{self.bucket}/{key}"

    def _body(self, nonce: str) -> bytes:
        who = {"holder": self.holder, "host": socket.gethostname(), "pid": os.getpid()}
        return json.dumps({**who, "write": nonce}).encode()

    def write(self, key: str, nonce: str, **conditions: str) -> str:
        """PUT a version of the lease object ``key`` carrying ``nonce``; its ETag.
        ConcurrentWriteError or FileNotFoundError when the condition is refused (which may be
        the answer to a retry of this very write: see ``look``)."""
        try:
            response = self.client.put_object(
                Bucket=self.bucket,
                Key=key,
                Body=self._body(nonce),
                Metadata={"lease": f"{self.lease:g}", NONCE_KEY: nonce},
                **conditions,
            )
        except client_errors() as error:
            raise translate(error, self.where(key)) from None
        return str(response["ETag"])

    def look(self, key: str) -> Seen | None:
        """The lease object at ``key`` as it is now, or None if there is none."""
        try:
            response = self.client.head_object(Bucket=self.bucket, Key=key)
        except client_errors() as error:
            if is_not_found(error):
                return None
            raise translate(error, self.where(key)) from None
        metadata = response.get("Metadata", {})
        now = server_now_ns(response)
        written = datetime_ns(response["LastModified"])
        expired = _expired(written, now, seconds(metadata.get("lease")))
        return Seen(str(response["ETag"]), expired, metadata.get(NONCE_KEY))

    def delete(self, key: str, etag: str | None = None) -> bool:
        """Delete a lease object (only the version ``etag``, if given); True if this call
        deleted it, False if it was gone or had changed. A retried delete answered 404 was
        applied by an earlier attempt: the version it named was there, and only it could go."""
        conditions = {"IfMatch": etag} if etag is not None and self.conditional_deletes else {}
        try:
            self.client.delete_object(Bucket=self.bucket, Key=key, **conditions)
        except client_errors() as error:
            if is_not_found(error):
                return bool(conditions) and was_retried(error)
            if is_precondition_failed(error):
                return False
            if conditions and error_code(error) in UNSUPPORTED:
                self.conditional_deletes = False
                return self.delete(key)
            raise translate(error, self.where(key)) from None
        return True

    def break_if_expired(self, key: str) -> bool:
        """True if no live lease object is at ``key`` now (an expired one is broken here)."""
        seen = self.look(key)
        if seen is None:
            return True
        if not seen.expired:
            return False
        logger.warning("breaking the expired lease %s", self.where(key))
        return self.delete(key, seen.etag) or self.look(key) is None

    def live_shared(self, name: str) -> list[str]:
        """The keys of the live shared holders of ``name`` (expired ones are broken), listed
        page by page."""
        listed_prefix = f"{self.prefix}{name}/s-"
        live = []
        pages = self.client.get_paginator("list_objects_v2")
        try:
            for page in pages.paginate(Bucket=self.bucket, Prefix=listed_prefix):
                now = server_now_ns(page)
                for item in page.get("Contents", []):
                    key = str(item["Key"])
                    lease = seconds(key.rpartition("/s-")[2].partition("-")[0])
                    if _expired(datetime_ns(item["LastModified"]), now, lease):
                        logger.warning("breaking the expired lease %s", self.where(key))
                        self.delete(key, str(item["ETag"]))
                    else:
                        live.append(key)
        except client_errors() as error:
            raise translate(error, self.where(listed_prefix)) from None
        return live


def seconds(text: str | None) -> float:
    """A lease duration a holder wrote down; the longest lease if it is unreadable."""
    try:
        value = float(text or "")
    except ValueError:
        return MAX_LEASE
    return value if 0 < value <= MAX_LEASE else MAX_LEASE


def _expired(written_ns: int, now_ns: int | None, lease: float) -> bool:
    """Whether a lease written at ``written_ns`` (the server's clock) has run out at
    ``now_ns`` (the same clock); never, when the server did not say the time."""
    if now_ns is None:
        return False
    return now_ns > written_ns + int(lease * 1e9) + GRACE_NS
