"""Compare two checkouts of snapstore on one tree: CPU time of the core operations, the
checkouts' runs interleaved round after round so that a busy machine slows both alike.

    .venv/bin/python bench/versions.py --old /path/to/old-checkout [--new .] [--rounds 5]

Each round runs, in a fresh process per checkout (its code first on ``PYTHONPATH``), a first
snapshot of the tree, an unchanged snapshot, a snapshot with 1% of the files changed, a
restore into an empty directory and ``list()``, on a store with ``durable=False`` so that
what is measured is snapstore's own work rather than the disk's flushes. Prints the median
CPU time (user + system) of each operation per checkout and the ratio new / old.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from trees import SIZES, generate  # noqa: E402

OPERATIONS = ("first", "unchanged", "changed_1pct", "restore_empty", "list")

CHILD = r"""
import json, resource, sys, time
from pathlib import Path
from snapstore import SnapStore

def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime

tree, work, changed = Path(sys.argv[1]), Path(sys.argv[2]), json.loads(sys.argv[3])
store = SnapStore(work / "store", durable=False)
times = {}
start = cpu(); store.create("s", "a", ["."], base_dir=tree); times["first"] = cpu() - start
start = cpu(); store.create("s", "b", ["."], base_dir=tree); times["unchanged"] = cpu() - start
for path in changed:
    with open(tree / path, "ab") as handle:
        handle.write(b"changed\n")
start = cpu(); store.create("s", "c", ["."], base_dir=tree); times["changed_1pct"] = cpu() - start
start = cpu(); store.restore("s", "a", work / "out"); times["restore_empty"] = cpu() - start
start = cpu(); store.list(); times["list"] = cpu() - start
print(json.dumps(times))
"""


def run_once(checkout: Path, tree: Path, paths: list[str], seed: int) -> dict[str, float]:
    """One round for one checkout, on a fresh copy of the tree; CPU seconds by operation."""
    work = Path(tempfile.mkdtemp(prefix="snapstore-versions-"))
    try:
        copy = work / "tree"
        shutil.copytree(tree, copy, symlinks=True)
        changed = random.Random(seed).sample(paths, max(1, len(paths) // 100))
        env = {**os.environ, "PYTHONPATH": str(checkout)}
        output = subprocess.run(
            [sys.executable, "-c", CHILD, str(copy), str(work), json.dumps(changed)],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        result: dict[str, float] = json.loads(output)
        return result
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", type=Path, required=True, help="the baseline checkout")
    parser.add_argument("--new", type=Path, default=BENCH.parent, help="default: this one")
    parser.add_argument("--size", choices=sorted(SIZES), default="medium")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="snapstore-versions-tree-"))
    try:
        paths = generate(base / "tree", SIZES[args.size], args.seed)
        results: dict[str, list[dict[str, float]]] = {"old": [], "new": []}
        for _ in range(args.rounds):
            for label, checkout in (("old", args.old), ("new", args.new)):
                results[label].append(run_once(checkout.resolve(), base / "tree", paths, args.seed))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"CPU time, median of {args.rounds} interleaved rounds ({args.size} tree)")
    print(f"{'operation':<16}{'old':>10}{'new':>10}{'new/old':>10}")
    for operation in OPERATIONS:
        old = statistics.median(r[operation] for r in results["old"]) * 1000
        new = statistics.median(r[operation] for r in results["new"]) * 1000
        ratio = new / old if old else float("nan")
        print(f"{operation:<16}{old:>8.0f}ms{new:>8.0f}ms{ratio:>9.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
