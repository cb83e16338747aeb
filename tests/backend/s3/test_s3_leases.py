"""Locks across hosts: leases exclude each other, a dead holder's lease is broken only after
it expires by the server's clock, and a holder that lost its lease writes nothing more."""

from __future__ import annotations

import threading
import time

import pytest

from snapstore import LeaseLostError, LockTimeout
from snapstore.backend.seam import Handle, Kind

from .conftest import Host


def test_exclusive_and_shared_leases_exclude_each_other_across_hosts(host: Host) -> None:
    one, two = host(lock_timeout=0.3), host(lock_timeout=0.3)
    with one.lock("gc").shared(), two.lock("gc").shared():
        with pytest.raises(LockTimeout, match="gc"), two.lock("gc").exclusive():
            pass
        with one.lock("gc").exclusive_if_free() as free:
            assert not free
    with (
        one.lock("sessions/s").exclusive(),
        pytest.raises(LockTimeout, match="sessions/s"),
        two.lock("sessions/s").shared(),
    ):
        pass
    with two.lock("sessions/s").exclusive_if_free() as free:
        assert free


def test_a_waiting_exclusive_holder_gets_in_once_shared_holders_leave(host: Host) -> None:
    reader, collector = host(), host(lock_timeout=10)
    entered = threading.Event()
    release = threading.Event()

    def read() -> None:
        with reader.lock("gc").shared():
            entered.set()
            release.wait(10)

    thread = threading.Thread(target=read)
    thread.start()
    assert entered.wait(10)
    timer = threading.Timer(0.5, release.set)
    timer.start()
    started = time.monotonic()
    with collector.lock("gc").exclusive():
        assert time.monotonic() - started >= 0.4
    thread.join()


def test_a_dead_holders_lease_is_broken_after_it_expires(host: Host) -> None:
    dead, alive = host(lease=1.0), host(lock_timeout=10)
    held = dead.lock("gc").exclusive()
    held.__enter__()
    dead.leases.stop()  # it stops renewing, as a killed or frozen process does
    started = time.monotonic()
    with alive.lock("gc").shared():
        waited = time.monotonic() - started
    assert 0.8 <= waited <= 8, waited
    with pytest.raises(LeaseLostError):
        dead.write(Handle(Kind.BLOB, "ab" * 32), b"written after the lease was lost")
    assert alive.names(Kind.BLOB) == []


def test_leases_are_renewed_while_held(host: Host) -> None:
    # Leases of 3 s outlived twice over: a renewal every 0.75 s has room for a loaded machine.
    holder, other = host(lease=3.0), host(lock_timeout=0.2)
    for _ in range(5):  # a renewer told to stop must not keep the next hold from renewing
        with holder.lock("gc").shared():
            pass
    with holder.lock("sessions/s").exclusive():
        time.sleep(7.0)
        with pytest.raises(LockTimeout), other.lock("sessions/s").shared():
            pass
        holder.write(Handle(Kind.BLOB, "cd" * 32), b"still the holder")
    with other.lock("sessions/s").exclusive():
        pass
