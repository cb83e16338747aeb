"""Benchmark the object storage backend against an S3 protocol server on loopback (moto).

    .venv/bin/python bench/s3.py --size medium        # about 2 minutes on 2 cores

Reports, for each operation, the requests it sent (PUT, GET, HEAD, LIST, DELETE, POST as the
server counted them: request count is what a provider bills) and its time, next to the same
operation on a local store (the ratio is what the network protocol costs with no network
latency at all; a real provider adds its round trip to each request). Operations: the first
snapshot of the tree, a snapshot with 1% of its files changed, a restore into an empty
directory from a second host (a cold cache), and ``list()`` of a session with 1,000 snapshots,
from a cold host cache and from a warm one. Writes JSON to --out if given.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

import trees  # noqa: E402
from helpers.s3server import S3Server  # noqa: E402

from snapstore import SnapStore  # noqa: E402
from snapstore.backend.s3.backend import S3Backend  # noqa: E402

KINDS = ("PUT", "GET", "HEAD", "LIST", "DELETE", "POST")


def _measure(server: S3Server, action: Any) -> tuple[float, Counter[str]]:
    with server.counting() as counts:
        started = time.perf_counter()
        action()
        elapsed = time.perf_counter() - started
    return elapsed, counts


def _timed(action: Any) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def _fill_states(store: SnapStore, count: int) -> None:
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda i: store.put_state("many", f"s{i:04d}", i), range(count)))


def run(size: str, snapshots: int, work: Path) -> dict[str, Any]:
    """Every operation on S3 and locally; the rows of the report."""
    tree = work / "tree"
    paths = trees.generate(tree, trees.SIZES[size], seed=1)
    files, total = trees.tree_stats(tree)
    server = S3Server()
    os.environ.update(server.env())
    url = server.url("bench")
    host_a = SnapStore(S3Backend(url, cache_dir=str(work / "cache-a")))
    host_b = SnapStore(S3Backend(url, cache_dir=str(work / "cache-b")))
    local = SnapStore(work / "local")
    rows: dict[str, Any] = {}

    def row(name: str, s3_action: Any, local_action: Any) -> None:
        seconds, counts = _measure(server, s3_action)
        local_seconds = _timed(local_action) if local_action is not None else None
        rows[name] = {
            "requests": {kind: counts.get(kind, 0) for kind in KINDS},
            "seconds": round(seconds, 3),
            "local_seconds": None if local_seconds is None else round(local_seconds, 3),
        }

    try:
        row(
            "first snapshot",
            lambda: host_a.create("s", "first", ["."], base_dir=tree),
            lambda: local.create("s", "first", ["."], base_dir=tree),
        )
        changed = trees.change_files(tree, paths, 0.01, seed=2)
        row(
            "snapshot, 1% changed",
            lambda: host_a.create("s", "second", ["."], base_dir=tree),
            lambda: local.create("s", "second", ["."], base_dir=tree),
        )
        row(
            "restore into empty dir (other host)",
            lambda: host_b.restore("s", "second", work / "restored-s3", backup=False),
            lambda: local.restore("s", "second", work / "restored-local", backup=False),
        )
        _fill_states(host_a, snapshots)
        _fill_states(local, snapshots)
        host_c = SnapStore(S3Backend(url, cache_dir=str(work / "cache-c")))
        row(f"list() of {snapshots}, cold cache", lambda: host_c.list("many"), None)
        row(
            f"list() of {snapshots}, warm cache",
            lambda: host_c.list("many"),
            lambda: local.list("many"),
        )
    finally:
        server.stop()
    return {
        "meta": {"size": size, "files": files, "bytes": total, "changed_files": len(changed)},
        "rows": rows,
    }


def report(result: dict[str, Any]) -> str:
    """The result as a Markdown table."""
    meta = result["meta"]
    lines = [
        f"{meta['size']} tree: {meta['files']} files, {meta['bytes'] / 1e6:.0f} MB; "
        f"{meta['changed_files']} files changed",
        "",
        "| operation | PUT | GET | HEAD | LIST | DELETE | POST | time | local | ratio |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, row in result["rows"].items():
        counts = " | ".join(str(row["requests"][kind]) for kind in KINDS)
        local = row["local_seconds"]
        ratio = f"{row['seconds'] / local:.1f}x" if local else "-"
        local_text = f"{local:.2f} s" if local is not None else "-"
        lines.append(f"| {name} | {counts} | {row['seconds']:.2f} s | {local_text} | {ratio} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", default="medium", choices=sorted(trees.SIZES))
    parser.add_argument("--snapshots", type=int, default=1000)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="snapstore-s3-bench-") as work:
        result = run(args.size, args.snapshots, Path(work))
    print(report(result))
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
