"""A write the client sends again by itself is fenced like its first attempt: a manifest
PUT retried after the writer's lease lapsed (and another host's gc ran) is refused."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from botocore.exceptions import ReadTimeoutError
from helpers.trees import write_tree

from snapstore import LeaseLostError

from .conftest import Host, store_on


def test_a_manifest_put_retried_after_the_lease_lapsed_is_fenced(
    host: Host, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    write_tree(project, {f"f{i}.txt": f"file {i}\n" for i in range(20)})
    writer = host(lease=2.0)
    collector = store_on(host(lock_timeout=20))
    first = threading.Event()

    def first_attempt_times_out(request: Any, **_: Any) -> None:
        if "/sessions/" not in request.url or first.is_set():
            return
        first.set()
        # the request hangs (network outage; renewals fail too) until the read timeout;
        # meanwhile the server sees the writer's leases expire and gc runs on another host
        writer.leases.stop()
        report = collector.gc()
        assert not report.skipped
        raise ReadTimeoutError(endpoint_url=request.url)  # botocore sends it again

    writer.client.meta.events.register("before-send.s3.PutObject", first_attempt_times_out)
    try:
        store_on(writer).create("s", "one", ["."], base_dir=project)
    except LeaseLostError:
        return  # fenced: what should happen
    fresh = store_on(host())
    report = fresh.verify()
    assert report.ok, f"create succeeded, but the store now holds: {report}"
