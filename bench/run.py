"""Benchmark snapstore against shadow git, tar, cp -a and restic on a seeded tree.

    .venv/bin/python bench/run.py --size medium          # ~2 minutes on 2 cores
    .venv/bin/python bench/run.py --size large --reps 1  # 50,000 files, 600 MB

Prints a table of medians and the targets of issue 6 (pass/fail), and writes the whole
result as JSON to bench/results/<size>-<time>.json (and bench/results/latest-<size>.json).
All data is in the page cache (no cache dropping): the numbers are CPU and syscall cost plus
fsync, which is what a checkpoint in an editor's turn pays.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scenarios
import targets
import tools
import trees

RESULTS = Path(__file__).resolve().parent / "results"
OPERATIONS = {
    "first": "first snapshot",
    "changed": "snapshot, 1% changed",
    "unchanged": "snapshot, unchanged",
    "restore_empty": "restore into empty dir",
    "restore_in_place": "restore in place, 1% changed",
}
SCENARIOS = ("durability", "space", "memory", "concurrency", "list_open")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", choices=sorted(trees.SIZES), default="medium")
    parser.add_argument("--reps", type=int, default=3, help="repetitions per measurement")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--snapshots", type=int, default=10_000, help="catalog size for list()")
    parser.add_argument("--tools", help="comma-separated subset of tools to compare")
    parser.add_argument("--skip", default="", help=f"comma-separated scenarios: {SCENARIOS}")
    parser.add_argument("--work", type=Path, help="work directory (default: a fresh temp dir)")
    parser.add_argument("--out", type=Path, help="JSON result path")
    parser.add_argument(
        "--settle",
        type=float,
        default=2.5,
        help="seconds to let the fresh tree age once written (snapstore's stat cache, like "
        "git's index, does not trust files modified within 2 s of a scan)",
    )
    return parser.parse_args(argv)


def compare(
    subjects: list[tools.Subject], tree: Path, paths: list[str], work: Path, args: Any
) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, list[float]]]]:
    """Time every operation for every subject; returns medians and raw samples."""
    samples: dict[str, dict[str, list[float]]] = {op: {} for op in OPERATIONS}

    def record(operation: str, subject: tools.Subject, measure: Callable[[], float | None]) -> None:
        # Flush what earlier runs left dirty, so no tool's fsyncs wait on another's writeback.
        os.sync()
        seconds = measure()
        if seconds is not None:
            samples[operation].setdefault(subject.name, []).append(seconds)

    for _ in range(args.reps):
        for subject in subjects:
            repo = work / "repos" / subject.name
            record("first", subject, functools.partial(subject.first, tree, repo))
    for _ in range(args.reps):
        for subject in subjects:
            record("unchanged", subject, subject.again)
    for rep in range(args.reps):
        trees.change_files(tree, paths, 0.01, args.seed * 1000 + rep)
        for subject in subjects:
            record("changed", subject, subject.again)
    for rep in range(args.reps):
        for subject in subjects:
            dest = work / "restored" / f"{subject.name}-{rep}"
            record("restore_empty", subject, functools.partial(subject.restore_empty, dest))
            shutil.rmtree(dest, ignore_errors=True)
    for rep in range(args.reps):
        for index, subject in enumerate(subjects):
            if subject.in_place:
                trees.change_files(tree, paths, 0.01, args.seed * 1000 + 100 + rep * 10 + index)
                record("restore_in_place", subject, subject.restore_in_place)
    medians = {
        op: {name: statistics.median(values) for name, values in by_tool.items()}
        for op, by_tool in samples.items()
    }
    return medians, samples


def run_scenarios(
    tree: Path, paths: list[str], work: Path, args: Any, skip: set[str]
) -> dict[str, Any]:
    """The store-only measurements (each may be skipped by name)."""
    size = trees.SIZES[args.size]
    found: dict[str, Any] = {}
    if "durability" not in skip:
        found["durability"] = scenarios.durability_cost(tree, work, args.reps)
    if "space" not in skip:
        found["space"] = scenarios.space_series(tree, paths, work, args.seed)
    if "memory" not in skip:
        found["memory"] = scenarios.peak_memory(tree, work)
    if "concurrency" not in skip:
        found["concurrency"] = scenarios.concurrent_writers(work, size, args.seed, args.reps)
    if "list_open" not in skip:
        found["list_open"] = scenarios.list_and_open(work, args.snapshots, args.reps)
    return found


def format_seconds(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value * 1000:.0f} ms" if value < 10 else f"{value:.1f} s"


def table(medians: dict[str, dict[str, float]], names: list[str]) -> str:
    """The medians as a fixed-width text table, one row per operation."""
    widths = [max(12, len(name) + 2) for name in names]
    lines = [
        "operation".ljust(30) + "".join(n.rjust(w) for n, w in zip(names, widths, strict=True))
    ]
    for op, label in OPERATIONS.items():
        cells = [
            format_seconds(medians[op].get(n)).rjust(w) for n, w in zip(names, widths, strict=True)
        ]
        lines.append(label.ljust(30) + "".join(cells))
    return "\n".join(lines)


def target_lines(found: list[targets.Target]) -> str:
    lines = []
    for target in found:
        verdict = {True: "PASS", False: "FAIL", None: "n/a "}[target.passed]
        value = "-" if target.value is None else f"{target.value:.2f}"
        cli = "" if target.cli_value is None else f"  (CLI: {target.cli_value:.2f})"
        lines.append(f"{verdict}  {target.number:3} {target.text}: {value} [{target.limit}]{cli}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    size = trees.SIZES[args.size]
    work = args.work or Path(tempfile.mkdtemp(prefix="snapstore-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    skip = {name for name in args.skip.split(",") if name}
    chosen = set(args.tools.split(",")) if args.tools else None
    subjects = [
        s for s in tools.subjects() if (chosen is None or s.name in chosen) and s.available()
    ]
    missing = [s.name for s in tools.subjects() if s not in subjects and not s.available()]
    try:
        tree = work / "tree"
        if tree.exists():
            shutil.rmtree(tree)
        paths = trees.generate(tree, size, args.seed)
        time.sleep(args.settle)  # counted from the newest file, not from the first
        file_count, total_bytes = trees.tree_stats(tree)
        megabytes = total_bytes / 1e6
        print(f"tree: {args.size}, {file_count} files, {megabytes:.1f} MB, seed {args.seed}")
        medians, samples = compare(subjects, tree, paths, work, args)
        found_scenarios = run_scenarios(tree, paths, work, args, skip)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    found_targets = targets.evaluate(medians, found_scenarios, args.size)
    names = [s.name for s in subjects]
    print(table(medians, names))
    print()
    print(target_lines(found_targets))
    if missing:
        print(f"\nnot installed (skipped): {', '.join(missing)}")
    result = {
        "meta": {
            "size": args.size,
            "files": file_count,
            "bytes": total_bytes,
            "reps": args.reps,
            "seed": args.seed,
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "skipped_tools": missing,
        },
        "medians": medians,
        "samples": samples,
        "scenarios": found_scenarios,
        "targets": [t.to_dict() for t in found_targets],
    }
    out = args.out or RESULTS / f"{args.size}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    if args.out is None:
        (RESULTS / f"latest-{args.size}.json").write_text(out.read_text())
    print(f"\nwrote {out}")
    return result


if __name__ == "__main__":
    main()
