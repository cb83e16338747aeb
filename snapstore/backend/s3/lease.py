"""Locks across hosts on an object store: leases held as objects, judged by the server's clock.

A lock called ``name`` is the objects under ``locks/<name>/``: ``x`` for the exclusive holder
(created with ``If-None-Match: *``, so only one host can create it) and ``s-<holder>`` for
each shared holder. A shared holder writes its object and then checks that no live ``x``
exists; an exclusive holder creates ``x`` and then waits until no live ``s-*`` exists. With a
strongly consistent store (S3 and its compatibles are, for reads after writes and listings),
whichever of the two wrote second sees the other, so they never both hold the lock.

Holders may die, so each object is a lease: it is live until the lease its holder wrote down
(in the object's metadata, and in a shared object's key) has passed since the server last
wrote it (its ``Last-Modified``, compared with the server's ``Date``; no host's own clock is
trusted). A live holder renews each of its objects every ``lease / 4`` seconds, on a thread
of its own per lease (a conditional write on its own version), and considers itself fenced
once ``lease - margin`` seconds of its lease clock (``leaseclock``: one that counts while the
machine sleeps) pass since it sent the write it last saw applied: then every write it attempts
raises LeaseLostError. Another host breaks a lease only after the server says it expired plus
a grace period, by a conditional delete of exactly the version it saw.

Requests get lost after they were applied (a 500, a reset connection or a timeout after the
write took effect, and the client sends it again). Every write of a lease object carries a
nonce (``s3leaseobjects``), and a holder remembers the nonces of its writes whose outcome it
has not seen: a retried claim or renewal refused with 412 finds its own nonce on the object
and counts as done, a release that finds a newer version of its own deletes that one, and a
claim that finds an object this process wrote but no longer holds (a claim applied after it
gave up) breaks it at once. See docs/object-storage.md for the argument. The store's locks
over these leases (waiting, timeouts) are ``s3lock``'s.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import threading
import uuid
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from snapstore.backend.s3.client import new_nonce
from snapstore.backend.s3.leaseclock import lease_clock
from snapstore.backend.s3.leaseobjects import MAX_LEASE, UNSUPPORTED, LeaseObjects, Seen
from snapstore.errors import ConcurrentWriteError, InvalidValueError, LeaseLostError
from snapstore.logs import get_logger

__all__ = ["DEFAULT_LEASE", "MAX_LEASE", "UNSUPPORTED", "Leases"]

DEFAULT_LEASE = 60.0
_REMEMBERED_WRITES = 32
"""Nonces remembered per lease object (writes whose answer may have been lost)."""

logger = get_logger(__name__)


@dataclass
class _Held:
    """One lease object this process holds: its key, the version it last saw applied, when
    (by the lease clock) the write of that version was sent, and every write of this hold
    whose outcome is not known yet (nonce -> when it was sent)."""

    key: str
    etag: str
    renewed_at: float
    writes: dict[str, float]
    stop: threading.Event = field(default_factory=threading.Event)
    lost: bool = False
    released: bool = False


class Leases:
    """The lease objects of one store: taking, renewing, breaking and fencing them.

    ``clock``: the lease clock (seconds); tests give one that jumps, as a suspended machine's
    does when it wakes.
    """

    def __init__(
        self,
        client: Any,
        bucket: str,
        prefix: str,
        *,
        lease: float = DEFAULT_LEASE,
        on_acquire: Callable[[str], None] | None = None,
        clock: Callable[[], float] = lease_clock,
    ) -> None:
        if not 0 < lease <= MAX_LEASE:
            raise InvalidValueError(
                f"lease must be more than 0 and at most {MAX_LEASE:g} seconds (other hosts "
                f"judge a lease by that bound), got {lease!r}"
            )
        self.lease = lease
        self.margin = max(lease / 4, 0.5)
        self.on_acquire = on_acquire
        self.clock = clock
        self.holder = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:12]}"
        self.objects = LeaseObjects(client, bucket, prefix + "locks/", lease, self.holder)
        self.prefix = self.objects.prefix
        self._held: dict[str, _Held] = {}
        self._given_up: dict[str, dict[str, None]] = {}
        """Per key, nonces of writes this process made to a lease it no longer holds."""
        self._mutex = threading.Lock()

    # ------------------------------------------------------------------ holding

    def _hold(self, key: str, etag: str, sent_at: float, nonce: str) -> None:
        held = _Held(key, etag, sent_at, {nonce: sent_at})
        with self._mutex:
            self._held[key] = held
        threading.Thread(
            target=_renew_loop,
            args=(weakref.ref(self), held, self.lease / 8),
            name=f"snapstore-lease {key}",
            daemon=True,
        ).start()

    def _give_up(self, key: str, nonces: list[str]) -> None:
        """Remember writes to ``key`` this process no longer stands behind."""
        with self._mutex:
            known = self._given_up.setdefault(key, {})
            known.update(dict.fromkeys(nonces))
            for stale in list(known)[: max(0, len(known) - _REMEMBERED_WRITES)]:
                del known[stale]

    def _given_up_by_us(self, key: str, seen: Seen) -> bool:
        with self._mutex:
            return seen.nonce is not None and seen.nonce in self._given_up.get(key, {})

    def _drop(self, key: str) -> None:
        with self._mutex:
            held = self._held.pop(key, None)
            if held is None:
                return
            held.released = True
            held.stop.set()
            etag, nonces = held.etag, list(held.writes)
        self._give_up(key, nonces)
        with contextlib.suppress(OSError):
            if self.objects.delete(key, etag):
                return
            seen = self.objects.look(key)
            if seen is not None and seen.nonce in nonces:
                self.objects.delete(key, seen.etag)  # a renewal landed after the one we knew

    def _abandon(self, key: str, nonce: str) -> None:
        """After a write of ``key`` whose outcome is unknown (it failed after its retries):
        remove it if it landed, best-effort (if not, it is broken once its lease runs out,
        or by this process's next claim)."""
        self._give_up(key, [nonce])
        with contextlib.suppress(OSError):
            seen = self.objects.look(key)
            if seen is not None and seen.nonce == nonce:
                self.objects.delete(key, seen.etag)

    def check(self) -> None:
        """LeaseLostError if a lease this process holds may have been taken over: called
        before every write made under the locks."""
        now = self.clock()
        with self._mutex:
            for held in self._held.values():
                if held.lost or now - held.renewed_at > self.lease - self.margin:
                    held.lost = True
                    raise LeaseLostError(
                        errno.ENOLCK,
                        f"the lease {self.objects.where(held.key)} was lost (not renewed for "
                        f"{now - held.renewed_at:.1f} s of a {self.lease:g} s lease)",
                    )

    def _expired_for_us(self, held: _Held) -> bool:
        """True (and the lease marked lost for good) once it is past its window."""
        if held.lost or self.clock() - held.renewed_at > self.lease - self.margin:
            held.lost = True
        return held.lost

    def renew_if_due(self, held: _Held) -> None:
        """Renew one held lease if a quarter lease passed since its last renewal (called by
        its renewing thread)."""
        if held.released or self.clock() - held.renewed_at < self.lease / 4:
            return
        if self._expired_for_us(held):
            return  # a lease not renewed in time is never taken up again
        nonce, sent_at = new_nonce(), self.clock()
        with self._mutex:
            if held.released:
                return
            held.writes[nonce] = sent_at
            expected = held.etag
        try:
            etag = self.objects.write(held.key, nonce, IfMatch=expected)
        except (FileNotFoundError, ConcurrentWriteError):
            seen = self.objects.look(held.key)
            with self._mutex:
                mine = seen is not None and seen.nonce in held.writes
                if seen is None or seen.nonce is None or not mine:
                    held.lost = True
                    logger.error("lease %s was broken by another host", held.key)
                    return
                etag, sent_at = seen.etag, held.writes[seen.nonce]
        except OSError as error:
            logger.warning("renewing lease %s failed: %s", self.objects.where(held.key), error)
            return
        with self._mutex:
            held.etag = etag
            held.renewed_at = max(held.renewed_at, sent_at)
            if len(held.writes) > _REMEMBERED_WRITES:
                held.writes = dict(list(held.writes.items())[-_REMEMBERED_WRITES:])

    def stop(self) -> None:
        """Stop renewing the leases held now (they run out), as a frozen process would."""
        with self._mutex:
            for held in self._held.values():
                held.stop.set()

    # ------------------------------------------------------------------ acquiring

    def _free(self, key: str, seen: Seen | None = None) -> bool:
        """True if no live lease object is at ``key`` (an expired one, or one this process
        wrote but gave up, is broken); ``seen``: what a look just found there."""
        seen = seen or self.objects.look(key)
        if seen is None:
            return True
        if not (seen.expired or self._given_up_by_us(key, seen)):
            return False
        if seen.expired:
            logger.warning("breaking the expired lease %s", self.objects.where(key))
        return self.objects.delete(key, seen.etag) or self.objects.look(key) is None

    def try_shared(self, name: str) -> str | None:
        """Take ``name`` shared if no live exclusive holder has it; the held key, or None."""
        exclusive = f"{self.prefix}{name}/x"
        if not self._free(exclusive):
            return None
        key = f"{self.prefix}{name}/s-{self.lease:g}-{self.holder}-{uuid.uuid4().hex[:8]}"
        nonce, sent_at = new_nonce(), self.clock()
        try:
            etag = self.objects.write(key, nonce)
        except OSError:
            self._abandon(key, nonce)
            raise
        self._hold(key, etag, sent_at, nonce)
        try:
            free = self._free(exclusive)
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
        for _ in range(3):
            nonce, sent_at = new_nonce(), self.clock()
            try:
                etag = self.objects.write(key, nonce, IfNoneMatch="*")
            except (ConcurrentWriteError, FileNotFoundError):
                seen = self.objects.look(key)
                if seen is None or (seen.nonce != nonce and self._free(key, seen)):
                    continue
                if seen.nonce != nonce:
                    return None
                etag = seen.etag  # this very claim, applied by an attempt whose answer was lost
            except OSError:
                self._abandon(key, nonce)
                raise
            self._hold(key, etag, sent_at, nonce)
            return key
        return None

    def drained(self, name: str) -> bool:
        """True once no live shared holder of ``name`` is left."""
        return not self.objects.live_shared(name)

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


def _renew_loop(ref: weakref.ReferenceType[Leases], held: _Held, interval: float) -> None:
    """Renew ``held`` until it is released, stopped, or its ``Leases`` is gone."""
    while not held.stop.wait(interval):
        leases = ref()
        if leases is None:
            return
        try:
            leases.renew_if_due(held)
        except Exception:  # the next round tries again; check() fences if it never succeeds
            logger.exception("renewing lease %s failed", held.key)
        del leases
