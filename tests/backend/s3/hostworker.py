"""One "host" of the multi-host tests: a process with its own cache directory, working on a
shared store in a bucket and recording what it committed.

    python hostworker.py URL WORKDIR HOST SECONDS SEED [--maintain]

Creates snapshots of its own session from a tree it keeps changing (with contents every host
shares, so hosts reuse each other's blobs), restores them and checks the bytes, deletes some,
and with ``--maintain`` also sweeps and collects garbage. After each commit or delete returns
it appends a line to WORKDIR/log (``commit NAME DIGEST`` / ``delete NAME``; ``committing NAME
DIGEST`` before a create starts and ``deleting NAME`` before a delete starts, so a kill between
a commit or delete and its line is told apart: a host started again with the same seed makes
the same names, and a create killed after its commit replaced the name's acknowledged
snapshot), so a parent that kills it knows what was acknowledged. Problems found are written
as ``error ...`` lines: a restore that differs, a ``delete`` of a snapshot it made that answers
False, a ``sweep`` that reports a snapshot deleted that is still listed.

With ``SNAPSTORE_TEST_UNLIMITED_RETRIES=1`` (the tests that put a fault-injecting proxy in
front of the server) the client's retry budget is unlimited: botocore stops retrying once
many retries ended in an error answer, which a proxy failing requests at random causes.
``SNAPSTORE_TEST_CLIENT_TIMEOUT`` sets the client's timeouts and ``SNAPSTORE_TEST_LEASE`` the
lease (seconds).
"""

from __future__ import annotations

import hashlib
import os
import random
import sys
import time
from pathlib import Path

from snapstore import SnapStore
from snapstore.backend.s3.backend import S3Backend
from snapstore.backend.s3.client import make_client

SHARED = [f"shared {i}\n".encode() * (50 * (i + 1)) for i in range(6)]
LEASE = 2.0


def tree_digest(base: Path) -> str:
    """A digest of every file's relative path and bytes under ``base``."""
    digest = hashlib.sha256()
    for path in sorted(p for p in base.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(base)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def change(tree: Path, rng: random.Random) -> None:
    """Rewrite a few files of the tree: own random bytes or shared contents."""
    for _ in range(rng.randint(1, 4)):
        path = tree / f"d{rng.randint(0, 3)}" / f"f{rng.randint(0, 15)}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        data = rng.choice(SHARED) if rng.random() < 0.5 else rng.randbytes(rng.randint(1, 3000))
        path.write_bytes(data)


def main() -> int:
    url, work, host, seconds, seed = sys.argv[1:6]
    if os.environ.get("SNAPSTORE_TEST_UNLIMITED_RETRIES") == "1":
        from botocore.retries import quota

        quota.RetryQuota.acquire = lambda self, amount: True  # type: ignore[method-assign]
    maintain = "--maintain" in sys.argv
    rng = random.Random(int(seed))
    work_dir = Path(work)
    tree = work_dir / "tree"
    tree.mkdir(parents=True, exist_ok=True)
    log = open(work_dir / "log", "a", buffering=1)  # noqa: SIM115
    timeout = os.environ.get("SNAPSTORE_TEST_CLIENT_TIMEOUT")
    client = make_client(timeout=float(timeout)) if timeout else None
    backend = S3Backend(
        url,
        cache_dir=str(work_dir / "cache"),
        lease=float(os.environ.get("SNAPSTORE_TEST_LEASE", LEASE)),
        lock_timeout=60,
        client=client,
    )
    store = SnapStore(backend, lock_timeout=60)
    session = f"host-{host}"
    made: dict[str, str] = {}
    deadline = time.monotonic() + float(seconds)
    number = 0
    while time.monotonic() < deadline:
        roll = rng.random()
        if roll < 0.5 or not made:
            change(tree, rng)
            name = f"n{number}"
            number += 1
            expected = tree_digest(tree)
            log.write(f"committing {name} {expected}\n")
            store.create(session, name, ["."], base_dir=tree)
            made[name] = expected
            log.write(f"commit {name} {expected}\n")
        elif roll < 0.7:
            name = rng.choice(sorted(made))
            target = work_dir / f"restore-{number}"
            store.restore(session, name, target, backup=False)
            if tree_digest(target) != made[name]:
                log.write(f"error restore of {name} differs\n")
        elif roll < 0.85:
            name = rng.choice(sorted(made))
            log.write(f"deleting {name}\n")
            if not store.delete(session, name):
                log.write(f"error delete of {name} answered False\n")
            del made[name]
            log.write(f"delete {name}\n")
        elif maintain:
            store.put_state("scratch", f"s{number}", number, ttl=0.01)
            number += 1
            report = store.sweep()
            for swept_session, swept in report.deleted:
                if swept in {info.name for info in store.list(swept_session)}:
                    log.write(f"error sweep reported {swept} deleted, it is still there\n")
            store.gc()
    store.close()
    log.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
