"""Two hosts share one encrypted bucket: each with its own host cache, both writing at once
(the same large file too), each reading what the other wrote."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from helpers.s3server import S3Server

from snapstore import SnapStore
from snapstore.backend.opening import choose_encryption
from snapstore.backend.s3.backend import S3Backend
from snapstore.backend.secret import Secret

from .conftest import bucket_objects


def _host(url: str, cache: Path) -> SnapStore:
    backend = S3Backend(url, cache_dir=str(cache), lock_timeout=10)
    return SnapStore(choose_encryption(backend, Secret(b"shared")), lock_timeout=10)


def test_two_hosts_write_and_read_one_encrypted_bucket(
    tmp_path: Path, s3_server: S3Server, s3_url: str
) -> None:
    large = os.urandom(17 << 20)
    bases = []
    for number in range(2):
        base = tmp_path / f"work{number}"
        base.mkdir()
        (base / "same.bin").write_bytes(large)
        (base / f"own{number}.txt").write_text(f"host {number}")
        bases.append(base)
    hosts = [_host(s3_url, tmp_path / f"cache{number}") for number in range(2)]
    errors: list[BaseException] = []

    def work(number: int) -> None:
        try:
            for round_ in range(2):
                hosts[number].create(
                    "shared", f"h{number}-{round_}", base_dir=str(bases[number]), paths=["."]
                )
                hosts[number].put_state(f"state{number}", "k", round_)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=work, args=(number,)) for number in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    for host in hosts:
        assert sorted(info.name for info in host.list("shared")) == [
            "h0-0", "h0-1", "h1-0", "h1-1",
        ]  # fmt: skip
        assert host.get_state("state0", "k") == 1 and host.get_state("state1", "k") == 1
    target = tmp_path / "target"
    hosts[1].restore("shared", "h0-1", target=str(target))
    assert (target / "same.bin").read_bytes() == large
    assert (target / "own0.txt").read_text() == "host 0"
    report = hosts[0].gc()
    assert report.blobs_deleted == 0 and not report.skipped
    verified = hosts[1].verify()
    assert verified.ok, verified.problems
    assert bucket_objects(s3_server, s3_url)
    for host in hosts:
        host.close()
