"""Leases under races: a lease renewed or taken anew between a breaker's look and its delete,
live readers behind a thousand expired ones, and leases longer than other hosts honour."""

from __future__ import annotations

import time

import pytest

from snapstore.backend.s3.leaseobjects import Seen
from snapstore.errors import InvalidValueError

from .conftest import Host


def test_a_lease_taken_anew_between_a_breakers_head_and_delete_is_not_broken(host: Host) -> None:
    a, b = host(lease=1.0), host(lease=1.0)
    key = a.leases.try_exclusive_claim("gc")
    assert key is not None
    a.leases.stop()  # a stalls; the server sees its lease expire
    time.sleep(4.2)
    real_look = b.leases.objects.look

    def look_then_a_comes_back(k: str) -> Seen | None:
        found = real_look(k)  # b sees a's expired x
        # a wakes up, gives its lost lease back and takes the lock anew: a new x
        a.leases.release(key)
        assert a.leases.try_exclusive_claim("gc") == key
        b.leases.objects.look = real_look  # type: ignore[method-assign]
        return found

    b.leases.objects.look = look_then_a_comes_back  # type: ignore[method-assign]
    assert not b.leases._free(key)  # b deletes "exactly the version it saw": nothing
    a.leases.check()  # a trusts its new lease
    assert a.leases.objects.look(key) is not None, "a's new lease was broken"
    assert b.leases.try_exclusive_claim("gc") is None, "a and b both hold gc exclusively"


def test_gc_does_not_get_in_past_a_live_reader_behind_a_thousand_dead_ones(host: Host) -> None:
    from concurrent.futures import ThreadPoolExecutor

    reader, collector = host(), host(lock_timeout=10)
    base = reader.leases.prefix + "gc/s-"

    def dead(i: int) -> None:  # shared leases of 1,000 killed processes (lease 1 s)
        reader.client.put_object(Bucket=reader.bucket, Key=f"{base}1-dead-{i:04d}", Body=b"{}")

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(dead, range(1000)))
    time.sleep(3.5)  # they have expired by the server's clock
    with (
        reader.lock("gc").shared(),  # a live reader (its key sorts after theirs)
        collector.lock("gc").exclusive_if_free() as free,
    ):
        assert not free, "gc took the lock while a reader holds it"


def test_a_lease_longer_than_other_hosts_would_honour_is_refused(host: Host) -> None:
    """Other hosts judge a lease by at most ``MAX_LEASE``: a holder trusting a longer one
    would keep a lock they have already broken."""
    from snapstore.backend.s3.lease import MAX_LEASE

    with pytest.raises(InvalidValueError):
        host(lease=MAX_LEASE + 1)
    with pytest.raises(InvalidValueError):
        host(lease=0)
