"""Hostile clocks: a holder whose machine slept through its lease, and a host whose wall clock
runs hours ahead. Leases are timed by a clock that counts while the machine sleeps, and ages
are judged by the server's clock."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest
from helpers.trees import write_tree

from snapstore import LeaseLostError, LockTimeout
from snapstore.backend.s3 import leaseclock
from snapstore.backend.seam import Handle, Kind

from .conftest import SESSION_LOCK, Host, lock_objects, store_on


class SleepingClock:
    """A lease clock that runs with real time, plus the time its machine was suspended."""

    def __init__(self) -> None:
        self.slept = 0.0
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return time.monotonic() + self.slept

    def sleep_through(self, seconds: float) -> None:
        """The machine was suspended for ``seconds``: nothing ran, the clock went on."""
        with self._lock:
            self.slept += seconds


@pytest.mark.skipif(sys.platform != "linux", reason="the clock chosen on Linux")
def test_leases_are_timed_by_a_clock_that_counts_while_suspended(host: Host) -> None:
    assert leaseclock.CLOCK_NAME == "CLOCK_BOOTTIME"
    assert host().leases.clock is leaseclock.lease_clock
    boot = time.clock_gettime(time.CLOCK_BOOTTIME)
    assert abs(leaseclock.lease_clock() - boot) < 1.0


def test_a_holder_that_slept_through_its_lease_writes_nothing_more(host: Host) -> None:
    clock = SleepingClock()
    holder = host(lease=8.0)
    holder.leases.clock = clock
    other = host(lock_timeout=0.2)
    with holder.lock("gc").exclusive():
        holder.write(Handle(Kind.BLOB, "ab" * 32), b"before the sleep")
        clock.sleep_through(6.5)  # past the window it trusts (lease - lease / 4)
        with pytest.raises(LeaseLostError):
            holder.write(Handle(Kind.BLOB, "cd" * 32), b"after the sleep")
        time.sleep(8.0 / 8 + 0.5)  # its renewer wakes up too: it must not take the lease up
        with pytest.raises(LeaseLostError):
            holder.leases.check()
        with pytest.raises(LockTimeout), other.lock("gc").shared():
            pass  # its object is still there: others wait for the server to expire it
    assert other.names(Kind.BLOB) == ["ab" * 32]
    assert lock_objects(other) == []


def test_a_short_sleep_keeps_the_lease(host: Host) -> None:
    clock = SleepingClock()
    holder = host(lease=8.0)
    holder.leases.clock = clock
    with holder.lock(SESSION_LOCK).exclusive():
        clock.sleep_through(3.0)  # within the window: the lease is still good
        holder.leases.check()
        holder.write(Handle(Kind.BLOB, "ef" * 32), b"still the holder")


def test_a_host_whose_clock_runs_ahead_sweeps_by_the_servers_clock(
    host: Host, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "project"
    write_tree(project, {"f.txt": "kept\n"})
    writer = store_on(host())
    writer.create("s", "recent", ["."], base_dir=project)
    writer.put_state("c", "cursor", 7, ttl=3600)
    sweeper = store_on(host())
    real_time_ns = time.time_ns
    monkeypatch.setattr(time, "time_ns", lambda: real_time_ns() + 2 * 3600 * 10**9)
    report = sweeper.sweep(ttl=3600)
    assert report.deleted == []
    assert [info.name for info in sweeper.list("s")] == ["recent"]
    assert sweeper.get_state("c", "cursor") == 7
