"""The first whole-tree snapshot through the command line, against ``tar cf``, in alternation.

    .venv/bin/python bench/firstsnap.py                          # medium tree, 10 rounds
    .venv/bin/python bench/firstsnap.py --baseline /tmp/old      # also a checkout of older code
    .venv/bin/python bench/firstsnap.py --phases --reps 3        # and where the time goes

Each round runs ``tar cf`` of the tree, then for each side (this checkout, and the
``--baseline`` checkout if given, run with it on ``PYTHONPATH``) ``python -m snapstore create``
into a new store and ``SnapStore.create`` in a new process (timed inside, imports excluded),
with ``sync()`` before each. A busy moment of the shared machine hits every command of a round
alike, so the figures to compare are ratios to ``tar cf`` within one run: the median of each
command's times over the median of tar's. CPU time (user and system, of the whole process) is
the steadier figure where other jobs compete for the cores; for the library it is given for
the create alone (imports excluded), all threads and the calling thread apart: the calling
thread reads, hashes and commits, the others compress, so on two cores the calling thread's
CPU is the floor of the create's wall time. ``--phases`` runs the command line
once more per side, timing each phase of the create from the process's start.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import trees

REPO = Path(__file__).resolve().parents[1]
LIBRARY_CREATE = """
import sys, time
from snapstore import SnapStore
started, cpu, main = time.perf_counter(), time.process_time(), time.thread_time()
SnapStore(sys.argv[1]).create("bench", "s1", ["."], base_dir=sys.argv[2])
wall = time.perf_counter() - started
print(wall, time.process_time() - cpu, time.thread_time() - main)
"""
PHASES = """
import sys, time
STARTED = time.perf_counter()
marks = []
import snapstore.cli.app as app
marks.append(("imports of the command line", time.perf_counter()))
from snapstore.repo import batch
from snapstore.worktree import create, scan, statcache
marks.append(("imports of the create", time.perf_counter()))
def timed(owner, name, label):
    real = getattr(owner, name, None)
    if real is None:
        return
    def wrapper(*args, **kwargs):
        marks.append((label + " starts", time.perf_counter()))
        try:
            return real(*args, **kwargs)
        finally:
            marks.append((label + " ends", time.perf_counter()))
    setattr(owner, name, wrapper)
timed(create, "take_snapshot", "snapshot")
timed(scan.Scanner, "add", "scan")
timed(create, "ingest_scan", "reading, hashing, compressing")
timed(create, "_store_trees", "trees")
timed(batch.BlobBatch, "finish", "pack published and flushed")
timed(create, "commit_recorded", "commit")
timed(statcache.StatCache, "save", "stat cache saved")
def finish(code):
    marks.append(("exit", time.perf_counter()))
    for label, at in marks:
        print(f"{(at - STARTED) * 1000:8.1f} ms  {label}")
    sys.stdout.flush()
    app.os._exit(code)
app.finish_process = finish
app.main(sys.argv[1:])
"""


SAMPLE_KEYS = ("cli", "cli_cpu", "library", "library_cpu", "library_main_cpu")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", choices=sorted(trees.SIZES), default="medium")
    parser.add_argument("--reps", type=int, default=10, help="rounds")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--baseline", type=Path, help="a checkout of the code to compare with")
    parser.add_argument("--phases", action="store_true", help="time each phase once per side")
    parser.add_argument("--out", type=Path, help="write every sample as JSON here")
    return parser.parse_args(argv)


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measured(command: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, str]:
    """Wall seconds and CPU seconds of one run of ``command`` in ``cwd``, and what it printed.
    (Not in this checkout: ``python -m`` and ``-c`` import from the working directory first,
    before ``PYTHONPATH``, so the baseline would be this checkout again.)"""
    os.sync()
    cpu, started = children_cpu(), time.perf_counter()
    done = subprocess.run(command, env=env, cwd=cwd, check=True, capture_output=True, text=True)
    return time.perf_counter() - started, children_cpu() - cpu, done.stdout


def side_env(checkout: Path) -> dict[str, str]:
    """The environment that makes ``checkout``'s snapstore the one imported."""
    return dict(os.environ, PYTHONPATH=str(checkout))


def check_imported_from(checkout: Path, cwd: Path) -> None:
    """Exit if ``python`` in ``cwd`` with ``side_env(checkout)`` imports another snapstore."""
    code = "import snapstore; print(snapstore.__file__)"
    _wall, _cpu, out = measured([sys.executable, "-c", code], side_env(checkout), cwd)
    if not Path(out.strip()).resolve().is_relative_to(checkout):
        raise SystemExit(f"{checkout}: the snapstore imported is {out.strip()}")


def run(args: argparse.Namespace) -> dict[str, dict[str, list[float]]]:
    sides = {"snapstore": REPO}
    if args.baseline is not None:
        sides["baseline"] = args.baseline.resolve()
    work = Path(tempfile.mkdtemp(prefix="snapstore-firstsnap-"))
    try:
        tree = work / "tree"
        trees.generate(tree, trees.SIZES[args.size], args.seed)
        for checkout in sides.values():  # as pip does at install (see bench/tools.py)
            subprocess.run([sys.executable, "-m", "compileall", "-q", str(checkout / "snapstore")])
            check_imported_from(checkout, work)
        time.sleep(2.5)  # older than the stat cache's racy window, as in bench/run.py
        samples: dict[str, dict[str, list[float]]] = {"tar": {"wall": []}, "load": {"1min": []}}
        for _ in range(args.reps):
            archive = work / "tree.tar"
            wall, _cpu, _out = measured(["tar", "cf", str(archive), "-C", str(tree), "."], {}, work)
            samples["tar"]["wall"].append(wall)
            archive.unlink()
            for name, checkout in sides.items():
                root = work / "store"
                command = [sys.executable, "-m", "snapstore", "--root", str(root), "-q"]
                command += ["create", "bench", ".", "--name", "s1", "--base", str(tree)]
                wall, cpu, _out = measured(command, side_env(checkout), work)
                shutil.rmtree(root)
                library = [sys.executable, "-c", LIBRARY_CREATE, str(root), str(tree)]
                _wall, _cpu, out = measured(library, side_env(checkout), work)
                shutil.rmtree(root)
                found = samples.setdefault(name, {key: [] for key in SAMPLE_KEYS})
                found["cli"].append(wall)
                found["cli_cpu"].append(cpu)
                library_wall, library_cpu, library_main_cpu = map(float, out.split())
                found["library"].append(library_wall)
                found["library_cpu"].append(library_cpu)
                found["library_main_cpu"].append(library_main_cpu)
            samples["load"]["1min"].append(os.getloadavg()[0])
        report(samples, sides)
        if args.phases:
            for name, checkout in sides.items():
                root = work / "store"
                command = [sys.executable, "-c", PHASES, "--root", str(root), "-q", "create"]
                command += ["bench", ".", "--name", "s1", "--base", str(tree)]
                print(f"\nphases of the command line ({name}):")
                print(measured(command, side_env(checkout), work)[2], end="")
                shutil.rmtree(root)
        return samples
    finally:
        shutil.rmtree(work, ignore_errors=True)


def report(samples: dict[str, dict[str, list[float]]], sides: dict[str, Path]) -> None:
    tar = statistics.median(samples["tar"]["wall"])
    loads = samples["load"]["1min"]
    print(f"tar cf: median {tar * 1000:.0f} ms (min {min(samples['tar']['wall']) * 1000:.0f})")
    for name in sides:
        found = samples[name]
        cli, library = statistics.median(found["cli"]), statistics.median(found["library"])
        cpu = statistics.median(found["cli_cpu"])
        library_cpu = statistics.median(found["library_cpu"])
        library_main = statistics.median(found["library_main_cpu"])
        print(
            f"{name}: command line {cli * 1000:.0f} ms = {cli / tar:.2f}x tar cf "
            f"(min {min(found['cli']) * 1000:.0f} ms, CPU {cpu * 1000:.0f} ms); "
            f"library {library * 1000:.0f} ms = {library / tar:.2f}x tar cf "
            f"(CPU {library_cpu * 1000:.0f} ms, of it the calling thread {library_main * 1000:.0f})"
        )
    print(f"load average (1 min) during the rounds: {min(loads):.2f} to {max(loads):.2f}")


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    samples = run(args)
    if args.out is not None:
        args.out.write_text(json.dumps(samples, indent=2) + "\n")


if __name__ == "__main__":
    main()
