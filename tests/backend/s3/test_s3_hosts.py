"""Several hosts on one store at once, and hosts killed at random points: nothing that was
acknowledged is lost or torn, and the store stays whole."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from helpers.faultproxy import FaultProxy
from helpers.figures import depth, record
from helpers.s3server import S3Server

from snapstore import SnapStore
from snapstore.backend.s3.backend import S3Backend

from .conftest import lock_objects
from .hostworker import tree_digest

WORKER = Path(__file__).with_name("hostworker.py")
TESTS = Path(__file__).resolve().parents[2]
HOST_FAULTS = [
    "error:500:InternalError",
    "error:503:SlowDown",
    "after:500:InternalError",
    "drop-response",
    "drop",
    "delay-response:1.5",
]


def _start(
    server: S3Server,
    url: str,
    work: Path,
    host: int,
    seconds: float,
    *extra: str,
    endpoint: str | None = None,
) -> subprocess.Popen[bytes]:
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **server.env(), "PYTHONPATH": str(TESTS)}
    if endpoint is not None:
        env.update(
            AWS_ENDPOINT_URL=endpoint,
            SNAPSTORE_TEST_UNLIMITED_RETRIES="1",
            SNAPSTORE_TEST_CLIENT_TIMEOUT="1.0",
            SNAPSTORE_TEST_LEASE="8",  # a renewal may take a timeout and a retry
        )
    command = [sys.executable, str(WORKER), url, str(work), str(host), str(seconds), str(host)]
    return subprocess.Popen([*command, *extra], env=env, stderr=subprocess.PIPE)


def _acknowledged(work: Path) -> tuple[dict[str, set[str]], list[str]]:
    """What a host's log says it committed and did not start deleting since (each name with
    the digests its snapshot may have), and its errors. A snapshot whose delete started may
    be gone even without its ``delete`` line: the host may have been killed after the delete
    returned and before it wrote that line. Likewise a create of a name started after its
    acknowledged commit may have replaced it without its ``commit`` line."""
    kept: dict[str, set[str]] = {}
    errors = []
    for line in (work / "log").read_text().splitlines():
        word, _, rest = line.partition(" ")
        if word == "commit":
            name, digest = rest.split()
            kept[name] = {digest}
        elif word == "committing":
            name, digest = rest.split()
            if name in kept:
                kept[name].add(digest)
        elif word in ("deleting", "delete"):
            kept.pop(rest, None)
        else:
            errors.append(line)
    return kept, errors


def _check(url: str, tmp_path: Path, hosts: dict[int, Path], *, killed: bool = False) -> None:
    backend = S3Backend(url, cache_dir=str(tmp_path / "checker"), lease=2.0, lock_timeout=60)
    store = SnapStore(backend, lock_timeout=60)
    for host, work in hosts.items():
        kept, errors = _acknowledged(work)
        assert errors == []
        listed = {info.name for info in store.list(f"host-{host}")}
        assert set(kept) <= listed
        if not killed:
            assert listed == set(kept)
        for name, digests in kept.items():
            target = tmp_path / f"check-{host}-{name}"
            store.restore(f"host-{host}", name, target, backup=False)
            assert tree_digest(target) in digests, (host, name)
    assert store.verify(deep=True).ok
    assert not store.gc().skipped
    report = store.verify(deep=True)
    assert report.ok and report.garbage == []
    backend.leases.stop()
    if not killed:
        assert lock_objects(backend) == [], "a lock is left held"


def test_hosts_creating_restoring_sweeping_and_collecting_at_once_lose_nothing(
    s3_server: S3Server, s3_url: str, tmp_path: Path
) -> None:
    hosts = {host: tmp_path / f"host-{host}" for host in range(3)}
    workers = [
        _start(s3_server, s3_url, work, host, 8, *(["--maintain"] if host == 0 else []))
        for host, work in hosts.items()
    ]
    for worker in workers:
        _, stderr = worker.communicate(timeout=120)
        assert worker.returncode == 0, stderr.decode()
    _check(s3_url, tmp_path, hosts)


def test_hosts_behind_a_failing_network_lose_nothing_and_leave_no_lock(
    s3_server: S3Server, s3_url: str, tmp_path: Path
) -> None:
    """Every host's requests go through the proxy, which fails one first attempt in four, of
    every kind of request, in every way: before it is applied, after (a 500, a reset
    connection, a timeout), or cut off mid-upload."""
    proxy = FaultProxy(s3_server.endpoint, seed=int(os.environ.get("SNAPSTORE_SEED", "15")))
    try:
        for action in HOST_FAULTS:
            proxy.rule(action, attempt=1, times=None, chance=1 / (4 * len(HOST_FAULTS)))
        hosts = {host: tmp_path / f"host-{host}" for host in range(3)}
        workers = [
            _start(
                s3_server,
                s3_url,
                work,
                host,
                depth(8, 60),
                *(["--maintain"] if host == 0 else []),
                endpoint=proxy.endpoint,
            )
            for host, work in hosts.items()
        ]
        for worker in workers:
            _, stderr = worker.communicate(timeout=depth(180, 600))
            assert worker.returncode == 0, stderr.decode()
    finally:
        proxy.close()
    record("s3 hosts through the proxy", requests=len(proxy.seen), faults=len(proxy.injected))
    conditional = {"PutObject If-None-Match", "DeleteObject If-Match"}  # renewals: by chance
    assert proxy.faulted() >= conditional, proxy.faulted()
    _check(s3_url, tmp_path, hosts)


def test_a_host_killed_at_random_points_leaves_a_whole_store(
    s3_server: S3Server, s3_url: str, tmp_path: Path
) -> None:
    rng = random.Random(int(os.environ.get("SNAPSTORE_SEED", "15")))
    hosts = {0: tmp_path / "host-0"}
    for round_number in range(4):
        worker = _start(s3_server, s3_url, hosts[0], 0, 60, "--maintain")
        time.sleep(rng.uniform(1.5, 4.0))
        worker.send_signal(signal.SIGKILL)
        worker.communicate(timeout=30)
        assert worker.returncode == -signal.SIGKILL, round_number
    _check(s3_url, tmp_path, hosts, killed=True)
