"""Benchmark the small durable checkpoint a bridge makes before each edit: a long series in
one store, the same through ``snapstore serve``, several bridges on one root against the same
in separate roots, and the floor (a minimal durable write of the same bytes), all in one run.

    .venv/bin/python bench/commits.py                          # ~3 minutes on 2 cores
    .venv/bin/python bench/commits.py --creates 400 --bridge-creates 50 --out result.json

Each checkpoint records 5 files of a 50-file project, one of them edited just before (what a
bridge checkpointing before each edit of an agent turn sees), durable, with a generated name,
and no gc. Reports p50/p90/p99 per block of ``--block`` creates, the floor's p50, and the
targets: p50 within 2x the floor and 3 ms, the last block's p50 within 1.2x the first's,
every block's p99 within 4x its p50, p50 through serve within 4 ms, and 4 bridges on one root
at 0.9x the throughput of 4 in separate roots or better. Times on a shared machine vary: the
ratios, measured side by side, are what to compare (``--rounds N`` runs each bridge count N
times, one root and separate roots alternating which goes first, and reports the median).
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

from serve import Client

from snapstore import SnapStore

PROJECT_FILES = 50
CHECKPOINT_FILES = 5
BRIDGE_CHILD = """
import json, sys, time
from pathlib import Path
from snapstore import SnapStore
root, project, session, count, start_at = sys.argv[1:6]
project = Path(project)
store = SnapStore(root)
while time.time() < float(start_at):
    time.sleep(0.001)
samples = []
begun = time.perf_counter()
for n in range(int(count)):
    paths = [f"d{i % 5}/f{i}.py" for i in ((n * 5 + k) % 50 for k in range(5))]
    (project / paths[0]).write_text(f"# {session} edit {n}\\n" + "x = 2\\n" * 40)
    started = time.perf_counter()
    store.create(session, None, paths, base_dir=project)
    samples.append(time.perf_counter() - started)
print(json.dumps({"seconds": time.perf_counter() - begun, "samples": samples}))
"""


def make_project(project: Path) -> None:
    """50 small source files in 5 directories."""
    for index in range(PROJECT_FILES):
        path = project / f"d{index % 5}" / f"f{index}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# file {index}\n" + "x = 1\n" * 40)


def checkpoint_paths(n: int) -> list[str]:
    """The 5 files checkpointed by the ``n``-th create (the first one is edited before it):
    files of the project (``make_project`` puts file ``i`` in directory ``i % 5``)."""
    indexes = ((n * CHECKPOINT_FILES + k) % PROJECT_FILES for k in range(CHECKPOINT_FILES))
    return [f"d{i % 5}/f{i}.py" for i in indexes]


def edit(project: Path, n: int, tag: str) -> list[str]:
    paths = checkpoint_paths(n)
    (project / paths[0]).write_text(f"# {tag} edit {n}\n" + "x = 2\n" * 40)
    return paths


def ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


def blocks(samples: list[float], size: int) -> list[dict[str, Any]]:
    """p50/p90/p99 of each block of ``size`` samples."""
    found = []
    for start in range(0, len(samples), size):
        block = sorted(samples[start : start + size])
        found.append(
            {
                "first": start + 1,
                "last": start + len(block),
                "p50_ms": ms(statistics.median(block)),
                "p90_ms": ms(block[max(0, int(len(block) * 0.9) - 1)]),
                "p99_ms": ms(block[max(0, int(len(block) * 0.99) - 1)]),
            }
        )
    return found


def floor_series(
    work: Path,
    calls: int,
    data: bytes,
    manifest: bytes,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, float]:
    """The floor: write a pack and fsync it, write the manifest to a temp name, fsync it,
    rename it, fsync its directory (three flushes), from Python; its p50 by ``clock``."""
    for name in ("packs", "sessions", "tmp"):
        (work / name).mkdir(parents=True, exist_ok=True)
    directory = os.open(work / "sessions", os.O_RDONLY | os.O_DIRECTORY)
    samples = []
    try:
        for index in range(calls):
            started = clock()
            fd = os.open(work / "packs" / f"p{index}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
            os.write(fd, data)
            os.fsync(fd)
            os.close(fd)
            temp = work / "tmp" / f"m{index}"
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
            os.write(fd, manifest)
            os.fsync(fd)
            os.close(fd)
            os.rename(temp, work / "sessions" / f"m{index}")
            os.fsync(directory)
            samples.append(clock() - started)
    finally:
        os.close(directory)
    return {"p50_ms": ms(statistics.median(samples)), "calls": calls}


def library_series(root: Path, project: Path, creates: int) -> list[float]:
    store = SnapStore(root)
    samples = []
    for n in range(creates):
        paths = edit(project, n, "library")
        started = time.perf_counter()
        store.create("bridge", None, paths, base_dir=project)
        samples.append(time.perf_counter() - started)
    store.close()
    return samples


def serve_series(root: Path, project: Path, creates: int) -> list[float]:
    client = Client(root, project)
    client.call("initialize", {})
    samples = []
    for n in range(creates):
        paths = edit(project, n, "serve")
        params = {"session": "bridge", "paths": paths, "base_dir": str(project)}
        started = time.perf_counter()
        client.call("create", params)
        samples.append(time.perf_counter() - started)
    client.close()
    return samples


def bridges(work: Path, processes: int, creates: int, shared: bool) -> dict[str, Any]:
    """``processes`` bridges, each checkpointing its own session (and project) ``creates``
    times, into one root (``shared``) or one root each; their total throughput."""
    start_at = time.time() + 1.0 + 0.1 * processes
    children = []
    for index in range(processes):
        project = work / f"project-{index}"
        make_project(project)
        root = work / ("root" if shared else f"root-{index}")
        children.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    BRIDGE_CHILD,
                    str(root),
                    str(project),
                    f"bridge-{index}",
                    str(creates),
                    str(start_at),
                ],
                stdout=subprocess.PIPE,
            )
        )
    results = []
    for child in children:
        out, _ = child.communicate(timeout=600)
        if child.returncode:
            raise RuntimeError(f"a bridge failed with exit code {child.returncode}")
        results.append(json.loads(out))
    wall = max(result["seconds"] for result in results)
    samples = sorted(s for result in results for s in result["samples"])
    return {
        "processes": processes,
        "creates_per_second": round(processes * creates / wall, 1),
        "p50_ms": ms(statistics.median(samples)),
        "p99_ms": ms(samples[max(0, int(len(samples) * 0.99) - 1)]),
    }


def bridge_rounds(work: Path, processes: int, creates: int, rounds: int) -> dict[str, Any]:
    """``processes`` bridges in one root against separate roots, ``rounds`` times, the two
    alternating which runs first; the median ratio, and the runs of the median round."""
    found = []
    for number in range(rounds):
        order = (True, False) if number % 2 == 0 else (False, True)
        runs = {
            shared: bridges(work / f"{number}-{shared}", processes, creates, shared)
            for shared in order
        }
        ratio = runs[True]["creates_per_second"] / runs[False]["creates_per_second"]
        found.append((round(ratio, 3), runs))
    found.sort(key=lambda item: item[0])
    ratio, runs = found[len(found) // 2]
    return {
        "processes": processes,
        "one_root": runs[True],
        "separate_roots": runs[False],
        "ratio": ratio,
        "ratios": [item[0] for item in found],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--creates", type=int, default=2000, help="creates of the long series")
    parser.add_argument("--serve-creates", type=int, default=None, help="default: --creates")
    parser.add_argument("--block", type=int, default=200, help="creates per reported block")
    parser.add_argument("--bridge-creates", type=int, default=200, help="creates per bridge")
    parser.add_argument("--bridges", default="1,2,4,8", help="bridge counts to run")
    parser.add_argument(
        "--rounds", type=int, default=1, help="one root against separate roots, this many times"
    )
    parser.add_argument("--out", type=Path, help="write the result as JSON here")
    args = parser.parse_args(argv)
    serve_creates = args.creates if args.serve_creates is None else args.serve_creates
    with tempfile.TemporaryDirectory(prefix="snapstore-bench-commits-") as scratch:
        work = Path(scratch)
        project = work / "project"
        make_project(project)
        floor = floor_series(work / "floor", 300, os.urandom(700), os.urandom(350))
        library = library_series(work / "store-library", project, args.creates)
        serve = serve_series(work / "store-serve", project, serve_creates)
        floor_after = floor_series(work / "floor-after", 300, os.urandom(700), os.urandom(350))
        multi = [
            bridge_rounds(work / f"bridges-{count}", count, args.bridge_creates, args.rounds)
            for count in (int(n) for n in args.bridges.split(","))
        ]
    result = report(args, floor, floor_after, library, serve, multi)
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


def report(
    args: argparse.Namespace,
    floor: dict[str, float],
    floor_after: dict[str, float],
    library: list[float],
    serve: list[float],
    multi: list[dict[str, Any]],
) -> dict[str, Any]:
    """Print the tables and targets; the whole result."""
    floor_ms = statistics.median([floor["p50_ms"], floor_after["p50_ms"]])
    lib_blocks, serve_blocks = blocks(library, args.block), blocks(serve, args.block)
    lib_p50, serve_p50 = ms(statistics.median(library)), ms(statistics.median(serve))
    four = next((m for m in multi if m["processes"] == 4), None)
    targets = {
        "library_p50_within_2x_floor": lib_p50 <= 2 * floor_ms,
        "library_p50_within_3ms": lib_p50 <= 3.0,
        "serve_p50_within_4ms": serve_p50 <= 4.0,
        "flat": lib_blocks[-1]["p50_ms"] <= 1.2 * lib_blocks[0]["p50_ms"],
        "p99_within_4x_p50": all(b["p99_ms"] <= 4 * b["p50_ms"] for b in lib_blocks),
        "four_bridges_one_root": None if four is None else four["ratio"] >= 0.9,
    }
    print(f"floor (3 flushes) p50: {floor['p50_ms']} ms before, {floor_after['p50_ms']} ms after")
    ratio = lib_p50 / floor_ms
    print(f"library p50 {lib_p50} ms ({ratio:.2f}x the floor); serve p50 {serve_p50} ms")
    for name, found in (("library", lib_blocks), ("serve", serve_blocks)):
        for block in found:
            print(
                f"  {name:8} {block['first']:5}-{block['last']:<5} p50 {block['p50_ms']:7.2f}"
                f"  p90 {block['p90_ms']:7.2f}  p99 {block['p99_ms']:7.2f} ms"
            )
    for item in multi:
        one, apart = item["one_root"], item["separate_roots"]
        print(
            f"  {item['processes']} bridges: one root {one['creates_per_second']}/s "
            f"(p99 {one['p99_ms']} ms), separate roots {apart['creates_per_second']}/s "
            f"(p99 {apart['p99_ms']} ms): {item['ratio']}x"
            + (f" (median of {item['ratios']})" if len(item["ratios"]) > 1 else "")
        )
    for key, met in targets.items():
        print(f"target {key}: {'n/a' if met is None else 'met' if met else 'MISSED'}")
    print(f"load average at the end: {[round(x, 2) for x in os.getloadavg()]}")
    return {
        "meta": {"python": sys.version.split()[0], "cpus": os.cpu_count()},
        "floor": floor,
        "floor_after": floor_after,
        "library": {"p50_ms": lib_p50, "blocks": lib_blocks},
        "serve": {"p50_ms": serve_p50, "blocks": serve_blocks},
        "bridges": multi,
        "targets": targets,
    }


if __name__ == "__main__":
    sys.exit(main())
