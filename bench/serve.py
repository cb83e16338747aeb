"""Benchmark snapstore as a service: a small checkpoint through `snapstore serve`, through the
library and through the command line; watched checkpoints of a large tree against shadow git;
and the memory of an idle server.

    .venv/bin/python bench/serve.py                      # ~3 minutes on 2 cores
    .venv/bin/python bench/serve.py --calls 50 --tree-files 2000

Each small call checkpoints the same 5-file set (durable, files unchanged between calls, as a
bridge checkpointing before each edit mostly sees). Reports p50 and p90 per path and the
resident memory of an idle server. Then a server watches a tree of --tree-files files: a first
watched checkpoint (a full scan), then --watched-calls unchanged watched checkpoints and as
many after editing one file, each followed by a shadow git ``add -A && commit`` of the same
tree (interleaved, so both see the same machine load), and the resident memory of the idle
server watching it, before any checkpoint and after all of them. Targets are reported met or
missed; --out writes the result as JSON.
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

from tools import ShadowGit, run

from snapstore import SnapStore

TARGETS = {
    "serve_p50_ms": 5.0,
    "library_p50_ms": 2.0,
    "idle_watching_rss_mb": 100.0,
    "watched_unchanged_to_git": 0.1,
}
RACY_SECONDS = 2.1
"""Just over the stat cache's racy window: the bench's tree is written that long before its
first checkpoint, as a real tree's files mostly are (a file changed within the window of a
checkpoint is read again by the next one)."""
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


class QuietGit(ShadowGit):
    """Shadow git without automatic ``git gc``: its first commit of a large tree leaves enough
    loose objects to start a detached gc that would run during the timed rounds (and slow
    everything measured meanwhile). Without it git's timings are its best case."""

    def setup(self) -> None:
        super().setup()
        run(["git", "config", "gc.auto", "0"], env=self._env())


def make_tree(tree: Path, files: int) -> None:
    """``files`` small files, 100 per directory, 50 directories per top-level directory."""
    per_dir = 100
    for index in range(files):
        directory = tree / f"d{index // per_dir // 50}" / f"e{index // per_dir}"
        if index % per_dir == 0:
            directory.mkdir(parents=True, exist_ok=True)
        (directory / f"f{index}.txt").write_bytes(b"%d\n" % index)


def watched_rounds(
    client: Client, git: QuietGit, params: dict[str, Any], calls: int, edit: Path | None
) -> tuple[list[float], list[float], list[str]]:
    """``calls`` rounds of a watched checkpoint then a shadow git commit of the same tree
    (after editing ``edit``, if given, before each round); their seconds, and the scans.
    Each timed operation starts with nothing left to write back (``sync``): git's commit
    leaves megabytes of index and objects dirty, which the next durable write would
    otherwise pay for."""
    ours, theirs, scans = [], [], []
    for round_number in range(calls):
        if edit is not None:
            edit.write_bytes(b"edit %d\n" % round_number)
        os.sync()
        start = time.perf_counter()
        result = client.call("create", {**params, "watch": True})
        ours.append(time.perf_counter() - start)
        scans.append(result["watch"]["scan"])
        os.sync()
        theirs.append(git.again())
    return ours, theirs, scans


def bench_watching(root: Path, work: Path, files: int, calls: int) -> dict[str, Any]:
    tree = work / "tree"
    make_tree(tree, files)
    git = QuietGit()
    first_git = git.first(tree, work / "shadow-git")
    time.sleep(RACY_SECONDS)
    client = Client(root, work)
    client.call("initialize", {})
    start = time.perf_counter()
    status = client.call("watch", {"paths": ["."], "base_dir": str(tree)})
    watch_seconds = time.perf_counter() - start
    time.sleep(0.5)
    rss_watching = rss_mb(client.process.pid)
    params = {"session": "watch", "name": "tree", "paths": ["."], "base_dir": str(tree)}
    start = time.perf_counter()
    first = client.call("create", {**params, "watch": True})
    first_seconds = time.perf_counter() - start
    unchanged, git_unchanged, unchanged_scans = watched_rounds(client, git, params, calls, None)
    edit = tree / "d0" / "e0" / "f0.txt"
    edited, git_edited, edited_scans = watched_rounds(client, git, params, calls, edit)
    time.sleep(1.0)
    rss = rss_mb(client.process.pid)
    client.close()
    ours, theirs = statistics.median(unchanged), statistics.median(git_unchanged)
    return {
        "files": files,
        "watched_dirs": status["watched_dirs"],
        "active": status["active"],
        "seconds_to_add_watches": round(watch_seconds, 3),
        "first_create_seconds": round(first_seconds, 3),
        "first_scan": first["watch"]["scan"],
        "unchanged": {**percentiles(unchanged), "scans": sorted(set(unchanged_scans))},
        "one_file_edited": {**percentiles(edited), "scans": sorted(set(edited_scans))},
        "shadow_git_first_seconds": round(first_git, 3),
        "shadow_git_unchanged": percentiles(git_unchanged),
        "shadow_git_one_file_edited": percentiles(git_edited),
        "unchanged_to_git": round(ours / theirs, 4),
        "edited_to_git": round(statistics.median(edited) / statistics.median(git_edited), 4),
        "rss_watching_before_any_create_mb": rss_watching,
        "rss_idle_watching_mb": rss,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=200, help="timed calls per path")
    parser.add_argument("--cli-calls", type=int, default=10, help="timed command-line runs")
    parser.add_argument("--tree-files", type=int, default=50_000, help="files of the watched tree")
    parser.add_argument(
        "--watched-calls",
        type=int,
        default=15,
        help="watched checkpoints per kind, each with a shadow git commit",
    )
    parser.add_argument("--out", type=Path, help="write the result as JSON here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="snapstore-bench-serve-") as scratch:
        work = Path(scratch)
        project = work / "project"
        write_files(project, FILES)
        library = bench_library(work / "store-library", project, args.calls)
        serve, memory = bench_serve(work / "store-serve", project, args.calls)
        cli = bench_cli(work / "store-cli", project, args.cli_calls)
        watching = bench_watching(work / "store-watch", work, args.tree_files, args.watched_calls)
    met = {
        "serve_p50_ms": serve["p50_ms"] <= TARGETS["serve_p50_ms"],
        "library_p50_ms": library["p50_ms"] <= TARGETS["library_p50_ms"],
        "idle_watching_rss_mb": watching["rss_idle_watching_mb"] <= TARGETS["idle_watching_rss_mb"],
        "watched_unchanged_to_git": watching["unchanged_to_git"]
        <= TARGETS["watched_unchanged_to_git"],
    }
    result = {
        "meta": {
            "python": sys.version.split()[0],
            "cpus": os.cpu_count(),
            "load_average": [round(x, 2) for x in os.getloadavg()],
            "calls": args.calls,
        },
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
    unchanged, edited = watching["unchanged"], watching["one_file_edited"]
    git_unchanged, git_edited = (
        watching["shadow_git_unchanged"],
        watching["shadow_git_one_file_edited"],
    )
    print(
        f"watching {watching['files']} files in {watching['watched_dirs']} dirs (watches added "
        f"in {watching['seconds_to_add_watches']} s); first watched checkpoint "
        f"{watching['first_create_seconds']} s ({watching['first_scan']} scan)"
    )
    print(
        f"  unchanged        {unchanged['p50_ms']:8.2f} ms ({unchanged['p90_ms']:.2f}) "
        f"{unchanged['scans']}; shadow git {git_unchanged['p50_ms']:.1f} ms; "
        f"ratio {watching['unchanged_to_git']}"
    )
    print(
        f"  one file edited  {edited['p50_ms']:8.2f} ms ({edited['p90_ms']:.2f}) "
        f"{edited['scans']}; shadow git {git_edited['p50_ms']:.1f} ms; "
        f"ratio {watching['edited_to_git']}"
    )
    print(
        f"idle server watching: {watching['rss_watching_before_any_create_mb']} MB before any "
        f"checkpoint, {watching['rss_idle_watching_mb']} MB after all of them"
    )
    for key, target in TARGETS.items():
        print(f"target {key} <= {target}: {'met' if met[key] else 'MISSED'}")
    print(f"load average at the end: {result['meta']['load_average']}")
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
