"""Benchmark snapstore as a service: a small checkpoint through `snapstore serve`, through the
library and through the command line, and the memory of an idle server.

    .venv/bin/python bench/serve.py                      # ~1 minute on 2 cores
    .venv/bin/python bench/serve.py --calls 50 --tree-files 2000

Each call checkpoints the same 5-file set (durable, files unchanged between calls, as a
bridge checkpointing before each edit mostly sees). Reports p50 and p90 per path, the
resident memory of an idle server, and of an idle server watching a tree of --tree-files
files (before any checkpoint of it, and idle again after three watched checkpoints of it),
with the targets met or missed. Writes the result as JSON with --out.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from snapstore import SnapStore

TARGETS = {"serve_p50_ms": 5.0, "library_p50_ms": 2.0, "idle_watching_rss_mb": 100.0}
FILES = {f"src/file{index}.py": f"# file {index}\n" + "x = 1\n" * 40 for index in range(5)}


def snapstore_command() -> list[str]:
    script = Path(sys.executable).parent / "snapstore"
    return [str(script)] if script.exists() else [sys.executable, "-m", "snapstore"]


def write_files(base: Path, files: dict[str, str]) -> None:
    for relative, content in files.items():
        (base / relative).parent.mkdir(parents=True, exist_ok=True)
        (base / relative).write_text(content)


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 3),
        "p90_ms": round(ordered[int(len(ordered) * 0.9) - 1] * 1000, 3),
        "calls": len(ordered),
    }


def rss_mb(pid: int) -> float:
    """Resident memory of a process, from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    raise RuntimeError("no VmRSS")


class Client:
    """A minimal line client for one server."""

    def __init__(self, root: Path, cwd: Path) -> None:
        self.process = subprocess.Popen(
            [*snapstore_command(), "--root", str(root), "serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=cwd,
        )
        self.next_id = 0

    def call(self, method: str, params: dict[str, Any]) -> Any:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.next_id += 1
        request = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        self.process.stdin.write(json.dumps(request).encode() + b"\n")
        self.process.stdin.flush()
        while True:
            reply = json.loads(self.process.stdout.readline())
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(reply["error"])
                return reply["result"]

    def close(self) -> int:
        assert self.process.stdin is not None
        self.process.stdin.close()
        return self.process.wait(60)


def bench_library(root: Path, project: Path, calls: int) -> dict[str, float]:
    store = SnapStore(root)
    paths = sorted(FILES)
    for _ in range(5):
        store.create("library", "bench", paths, base_dir=project)
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        store.create("library", "bench", paths, base_dir=project)
        samples.append(time.perf_counter() - start)
    store.close()
    return percentiles(samples)


def bench_serve(root: Path, project: Path, calls: int) -> tuple[dict[str, float], dict[str, float]]:
    client = Client(root, project)
    params = {"session": "serve", "name": "bench", "paths": sorted(FILES), "base_dir": str(project)}
    client.call("initialize", {})
    started_rss = rss_mb(client.process.pid)
    for _ in range(5):
        client.call("create", params)
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        client.call("create", params)
        samples.append(time.perf_counter() - start)
    time.sleep(0.5)
    memory = {"rss_after_initialize_mb": started_rss, "rss_idle_mb": rss_mb(client.process.pid)}
    client.close()
    return percentiles(samples), memory


def bench_cli(root: Path, project: Path, calls: int) -> dict[str, float]:
    command = [*snapstore_command(), "--root", str(root), "-q", "create", "cli", "bench"]
    command += [*sorted(FILES), "--base", str(project)]
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True)
        samples.append(time.perf_counter() - start)
    return percentiles(samples)


def bench_watching(root: Path, work: Path, files: int) -> dict[str, Any]:
    tree = work / "tree"
    per_dir = 100
    for index in range(files):
        directory = tree / f"d{index // per_dir // 50}" / f"e{index // per_dir}"
        if index % per_dir == 0:
            directory.mkdir(parents=True, exist_ok=True)
        (directory / f"f{index}.txt").write_bytes(b"%d\n" % index)
    client = Client(root, work)
    client.call("initialize", {})
    start = time.perf_counter()
    status = client.call("watch", {"paths": ["."], "base_dir": str(tree)})
    watch_seconds = time.perf_counter() - start
    time.sleep(0.5)
    rss_watching = rss_mb(client.process.pid)
    params = {"session": "watch", "name": "tree", "paths": ["."], "base_dir": str(tree)}
    timings = []
    for _ in range(3):
        start = time.perf_counter()
        result = client.call("create", {**params, "watch": True})
        timings.append(time.perf_counter() - start)
    time.sleep(1.0)
    rss = rss_mb(client.process.pid)
    client.close()
    return {
        "files": files,
        "watched_dirs": status["watched_dirs"],
        "active": status["active"],
        "seconds_to_add_watches": round(watch_seconds, 3),
        "watched_create_seconds": [round(t, 3) for t in timings],
        "last_scan": result["watch"].get("scan"),
        "rss_watching_before_any_create_mb": rss_watching,
        "rss_idle_watching_mb": rss,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=200, help="timed calls per path")
    parser.add_argument("--cli-calls", type=int, default=10, help="timed command-line runs")
    parser.add_argument("--tree-files", type=int, default=50_000, help="files of the watched tree")
    parser.add_argument("--out", type=Path, help="write the result as JSON here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="snapstore-bench-serve-") as scratch:
        work = Path(scratch)
        project = work / "project"
        write_files(project, FILES)
        library = bench_library(work / "store-library", project, args.calls)
        serve, memory = bench_serve(work / "store-serve", project, args.calls)
        cli = bench_cli(work / "store-cli", project, args.cli_calls)
        watching = bench_watching(work / "store-watch", work, args.tree_files)
    met = {
        "serve_p50_ms": serve["p50_ms"] <= TARGETS["serve_p50_ms"],
        "library_p50_ms": library["p50_ms"] <= TARGETS["library_p50_ms"],
        "idle_watching_rss_mb": watching["rss_idle_watching_mb"] <= TARGETS["idle_watching_rss_mb"],
    }
    result = {
        "meta": {"python": sys.version.split()[0], "cpus": os.cpu_count(), "calls": args.calls},
        "library": library,
        "serve": serve,
        "cli": cli,
        "memory": memory,
        "watching": watching,
        "targets": {key: {"target": TARGETS[key], "met": met[key]} for key in TARGETS},
    }
    print(f"5-file checkpoint, durable, p50 (p90) over {args.calls} calls:")
    print(f"  library        {library['p50_ms']:8.2f} ms ({library['p90_ms']:.2f})")
    print(f"  serve          {serve['p50_ms']:8.2f} ms ({serve['p90_ms']:.2f})")
    print(f"  command line   {cli['p50_ms']:8.2f} ms ({cli['p90_ms']:.2f}), {cli['calls']} runs")
    print(f"idle server RSS: {memory['rss_idle_mb']} MB")
    print(
        f"idle server watching {watching['files']} files in {watching['watched_dirs']} dirs: "
        f"{watching['rss_watching_before_any_create_mb']} MB before any checkpoint, "
        f"{watching['rss_idle_watching_mb']} MB after three; watches added in "
        f"{watching['seconds_to_add_watches']} s; watched creates "
        f"{watching['watched_create_seconds']} s ({watching['last_scan']} scan)"
    )
    for key, target in TARGETS.items():
        print(f"target {key} <= {target}: {'met' if met[key] else 'MISSED'}")
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
