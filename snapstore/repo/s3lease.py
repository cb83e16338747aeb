"""Locks across hosts on an object store: leases held as objects, judged by the server's clock.

A lock called ``name`` is the objects under ``locks/<name>/``: ``x`` for the exclusive holder
(created with ``If-None-Match: *``, so only one host can create it) and ``s-<holder>`` for
each shared holder. A shared holder writes its object and then checks that no live ``x``
exists; an exclusive holder creates ``x`` and then waits until no live ``s-*`` exists. With a
strongly consistent store (S3 and its compatibles are, for reads after writes and listings),
whichever of the two wrote second sees the other, so they never both hold the lock.

Holders may die, so each object is a lease: it is live until the lease its holder wrote down
(in the exclusive object's metadata, in a shared object's key) has passed since the server
last wrote it (its ``Last-Modified``, compared with the server's ``Date``; no host's own clock
is trusted). A live holder renews its objects every ``lease / 4`` seconds (a
conditional write on its own version), and considers itself fenced once ``lease - margin``
seconds of its own monotonic clock pass since its last successful renewal: then every write
it attempts raises LeaseLostError. Another host breaks a lease only after the server says it
expired plus a grace period, by a conditional delete of exactly the version it saw. See
docs/object-storage.md for the argument. The store's locks over these leases (waiting,
timeouts) are ``s3lock``'s.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from snapstore.errors import ConcurrentWriteError, InvalidValueError, LeaseLostError
from snapstore.logs import get_logger
from snapstore.repo.s3client import (
    client_errors,
    datetime_ns,
    error_code,
    is_not_found,
    is_precondition_failed,
    server_now_ns,
    translate,
)

DEFAULT_LEASE = 60.0
MAX_LEASE = 3600.0
UNSUPPORTED = {"NotImplemented", "501"}
"""What a provider answers a conditional delete it does not support with."""
GRACE_NS = 2_000_000_000
"""Added to a lease before another host breaks it: ``Last-Modified`` and ``Date`` have a
resolution of one second."""

logger = get_logger(__name__)


@dataclass
class _Held:
    """One lease object this process holds: its key, current version, and when (by this
    process's monotonic clock) the request that wrote that version was sent."""

    key: str
    etag: str
    renewed_at: float
    lost: bool = False


class Leases:
    """The lease objects of one store: taking, renewing, breaking and fencing them."""

    def __init__(
        self,
        client: Any,
        bucket: str,
        prefix: str,
        *,
        lease: float = DEFAULT_LEASE,
        on_acquire: Callable[[str], None] | None = None,
    ) -> None:
        if not 0 < lease <= MAX_LEASE:
            raise InvalidValueError(
                f"lease must be more than 0 and at most {MAX_LEASE:g} seconds (other hosts "
                f"judge a lease by that bound), got {lease!r}"
            )
        self.client = client
        self.bucket = bucket
        self.prefix = prefix + "locks/"
        self.lease = lease
        self.margin = max(lease / 4, 0.5)
        self.on_acquire = on_acquire
        self.holder = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:12]}"
        self.conditional_deletes = True
        self._held: dict[str, _Held] = {}
        self._mutex = threading.Lock()
        self._renewer: threading.Thread | None = None
        self._stop = threading.Event()

    # ------------------------------------------------------------------ requests

    def _where(self, key: str) -> str:
        return f"s3://{self.bucket}/{key}"

    def _body(self) -> bytes:
        """A lease object's content: who holds it, and a nonce, so that every write (each
        renewal, each claim anew) has an ETag of its own: a breaker's conditional delete of
        the version it judged expired must not match a newer one."""
        return json.dumps(
            {
                "holder": self.holder,
                "host": socket.gethostname(),
                "pid": os.getpid(),
                "write": uuid.uuid4().hex,
            }
        ).encode()

    def _put(self, key: str, **conditions: str) -> str:
        try:
            response = self.client.put_object(
                Bucket=self.bucket,
                Key=key,
                Body=self._body(),
                Metadata={"lease": f"{self.lease:g}"},
                **conditions,
            )
        except client_errors() as error:
            raise translate(error, self._where(key)) from None
        return str(response["ETag"])

    def _head(self, key: str) -> tuple[str, bool] | None:
        """(etag, expired) of a lease object, or None if there is none."""
        try:
            response = self.client.head_object(Bucket=self.bucket, Key=key)
        except client_errors() as error:
            if is_not_found(error):
                return None
            raise translate(error, self._where(key)) from None
        now = server_now_ns(response)
        written = datetime_ns(response["LastModified"])
        lease = _seconds(response.get("Metadata", {}).get("lease"))
        return str(response["ETag"]), _expired(written, now, lease)

    def _delete(self, key: str, etag: str | None = None) -> bool:
        """Delete a lease object (only the version ``etag``, if given); False if it was
        gone or had changed."""
        conditions = {"IfMatch": etag} if etag is not None and self.conditional_deletes else {}
        try:
            self.client.delete_object(Bucket=self.bucket, Key=key, **conditions)
        except client_errors() as error:
            if is_not_found(error) or is_precondition_failed(error):
                return False
            if conditions and error_code(error) in UNSUPPORTED:
                self.conditional_deletes = False
                return self._delete(key)
            raise translate(error, self._where(key)) from None
        return True

    def _break_if_expired(self, key: str) -> bool:
        """True if no live lease object is at ``key`` (an expired one is broken)."""
        found = self._head(key)
        if found is None:
            return True
        etag, expired = found
        if not expired:
            return False
        logger.warning("breaking the expired lease %s", self._where(key))
        self._delete(key, etag)
        return True

    def _live_shared(self, name: str) -> list[str]:
        """The keys of the live shared holders of ``name`` (expired ones are broken)."""
        listed_prefix = f"{self.prefix}{name}/s-"
        live = []
        pages = self.client.get_paginator("list_objects_v2")
        try:
            for page in pages.paginate(Bucket=self.bucket, Prefix=listed_prefix):
                now = server_now_ns(page)
                for item in page.get("Contents", []):
                    key = str(item["Key"])
                    lease = _seconds(key.rpartition("/s-")[2].partition("-")[0])
                    if _expired(datetime_ns(item["LastModified"]), now, lease):
                        logger.warning("breaking the expired lease %s", self._where(key))
                        self._delete(key, str(item["ETag"]))
                    else:
                        live.append(key)
        except client_errors() as error:
            raise translate(error, self._where(listed_prefix)) from None
        return live

    # ------------------------------------------------------------------ holding

    def _hold(self, key: str, etag: str, sent_at: float) -> None:
        with self._mutex:
            self._held[key] = _Held(key, etag, sent_at)
            if self._renewer is None or not self._renewer.is_alive() or self._stop.is_set():
                self._stop = threading.Event()  # a renewer told to stop keeps its own event
                self._renewer = threading.Thread(
                    target=_renew_loop, args=(weakref.ref(self), self._stop), daemon=True
                )
                self._renewer.start()

    def _drop(self, key: str) -> None:
        with self._mutex:
            held = self._held.pop(key, None)
            if not self._held:
                self._stop.set()
        if held is not None:
            with contextlib.suppress(OSError):
                self._delete(key, held.etag)

    def check(self) -> None:
        """LeaseLostError if a lease this process holds may have been taken over: called
        before every write made under the locks."""
        now = time.monotonic()
        with self._mutex:
            for held in self._held.values():
                if held.lost or now - held.renewed_at > self.lease - self.margin:
                    held.lost = True
                    raise LeaseLostError(
                        errno.ENOLCK,
                        f"the lease {self._where(held.key)} was lost (not renewed for "
                        f"{now - held.renewed_at:.1f} s of a {self.lease:g} s lease)",
                    )

    def renew_all(self) -> None:
        """Renew every held lease that is due (called by the renewing thread)."""
        now = time.monotonic()
        with self._mutex:
            due = [h for h in self._held.values() if now - h.renewed_at >= self.lease / 4]
        for held in due:
            if held.lost or time.monotonic() - held.renewed_at > self.lease - self.margin:
                held.lost = True  # a lease not renewed in time is never taken up again
                continue
            sent_at = time.monotonic()
            try:
                etag = self._put(held.key, IfMatch=held.etag)
            except (FileNotFoundError, ConcurrentWriteError):
                held.lost = True
                logger.error("lease %s was broken by another host", self._where(held.key))
                continue
            except OSError as error:
                logger.warning("renewing lease %s failed: %s", self._where(held.key), error)
                continue
            with self._mutex:
                if held.key in self._held:
                    held.etag, held.renewed_at = etag, sent_at

    def stop(self) -> None:
        """Stop renewing (the leases still held run out)."""
        self._stop.set()

    # ------------------------------------------------------------------ acquiring

    def try_shared(self, name: str) -> str | None:
        """Take ``name`` shared if no live exclusive holder has it; the held key, or None."""
        exclusive = f"{self.prefix}{name}/x"
        if not self._break_if_expired(exclusive):
            return None
        key = f"{self.prefix}{name}/s-{self.lease:g}-{self.holder}-{uuid.uuid4().hex[:8]}"
        sent_at = time.monotonic()
        etag = self._put(key)
        self._hold(key, etag, sent_at)
        try:
            free = self._break_if_expired(exclusive)
        except BaseException:
            self._drop(key)
            raise
        if not free:
            self._drop(key)
            return None
        return key

    def try_exclusive_claim(self, name: str) -> str | None:
        """Create ``name``'s exclusive object (breaking an expired one); its key, or None
        if another holder has it. Shared holders may still be draining."""
        key = f"{self.prefix}{name}/x"
        for _ in range(2):
            sent_at = time.monotonic()
            try:
                etag = self._put(key, IfNoneMatch="*")
            except ConcurrentWriteError:
                if self._break_if_expired(key):
                    continue
                return None
            self._hold(key, etag, sent_at)
            return key
        return None

    def drained(self, name: str) -> bool:
        """True once no live shared holder of ``name`` is left."""
        return not self._live_shared(name)

    def release(self, key: str) -> None:
        """Give a held lease back."""
        self._drop(key)

    @contextlib.contextmanager
    def holding(self, key: str) -> Iterator[None]:
        """Release ``key`` when the block ends."""
        try:
            yield
        finally:
            self.release(key)


def _seconds(text: str | None) -> float:
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


def _renew_loop(ref: weakref.ReferenceType[Leases], stop: threading.Event) -> None:
    """Renew the leases of ``ref`` until ``stop`` is set or they are gone."""
    while True:
        leases = ref()
        if leases is None:
            return
        interval = leases.lease / 8
        del leases
        if stop.wait(interval):
            return
        leases = ref()
        if leases is None:
            return
        try:
            leases.renew_all()
        except Exception:  # the next round tries again; check() fences if it never succeeds
            logger.exception("renewing leases failed")
        del leases
