"""What encryption costs: the same operations on an unencrypted and an encrypted store, in
one run, alternating which goes first.

    .venv/bin/python bench/encryption.py --size medium --reps 3 \\
        --repo /tmp/flask-history --states 100 --json bench/results/encryption.json

Seeded tree (bench/trees.py): the first snapshot, a snapshot after 1% of the files changed,
and a restore into an empty directory, each the median of ``--reps``. History replay (with
``--repo``): the last ``--states`` first-parent commits materialized one after another
(bench/replay.py), each snapshotted into both stores, the total per store. Stores are kept
open across snapshots (as a server or a bridge keeps one), so the password's key derivation
is paid once; its cost is reported apart ("open"). Prints encrypted/unencrypted ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import trees
from replay import Replay, first_parent_commits

from snapstore import SnapStore

PASSWORD = "bench password"
SUBJECTS = ("plain", "encrypted")


def open_store(root: Path, subject: str) -> SnapStore:
    if subject == "encrypted":
        return SnapStore(root, password=PASSWORD, encrypt=True)
    return SnapStore(root)


def timed(action: Callable[[], object]) -> float:
    os.sync()
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def seeded_tree(work: Path, args: argparse.Namespace) -> dict[str, dict[str, list[float]]]:
    """First snapshot, 1%-changed snapshot and restore, per subject, ``args.reps`` times."""
    samples: dict[str, dict[str, list[float]]] = {
        op: {s: [] for s in SUBJECTS} for op in ("open", "first", "changed", "restore")
    }
    for rep in range(args.reps):
        tree = work / f"tree-{rep}"
        paths = trees.generate(tree, trees.SIZES[args.size], args.seed)
        time.sleep(args.settle)
        order = SUBJECTS if rep % 2 == 0 else SUBJECTS[::-1]
        stores = {}
        for subject in order:
            root = work / f"{subject}-{rep}"
            start = time.perf_counter()
            stores[subject] = open_store(root, subject)
            samples["open"][subject].append(time.perf_counter() - start)
        for subject in order:
            store = stores[subject]
            seconds = timed(partial(store.create, "bench", "first", ["."], base_dir=str(tree)))
            samples["first"][subject].append(seconds)
        trees.change_files(tree, paths, 0.01, args.seed + rep + 1)
        time.sleep(args.settle)
        for subject in order:
            store = stores[subject]
            seconds = timed(partial(store.create, "bench", "changed", ["."], base_dir=str(tree)))
            samples["changed"][subject].append(seconds)
        for subject in order:
            target = work / f"restored-{subject}-{rep}"
            store = stores[subject]
            seconds = timed(partial(store.restore, "bench", "changed", target=str(target)))
            samples["restore"][subject].append(seconds)
            shutil.rmtree(target)
        for store in stores.values():
            store.close()
        shutil.rmtree(tree)
    return samples


def history(work: Path, args: argparse.Namespace) -> dict[str, float]:
    """The total time of snapshotting every state of the replay, per subject."""
    commits = first_parent_commits(args.repo, None, args.states)
    tree = work / "history-tree"
    replay = Replay(args.repo, work, tree)
    stores = {subject: open_store(work / f"history-{subject}", subject) for subject in SUBJECTS}
    totals = dict.fromkeys(SUBJECTS, 0.0)
    for index, commit in enumerate(commits):
        replay.materialize(commit)
        order = SUBJECTS if index % 2 == 0 else SUBJECTS[::-1]
        for subject in order:
            store = stores[subject]
            totals[subject] += timed(
                partial(store.create, "bench", f"s{index}", ["."], base_dir=str(tree))
            )
    for store in stores.values():
        store.close()
    return totals


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", choices=sorted(trees.SIZES), default="medium")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--settle", type=float, default=2.5)
    parser.add_argument("--repo", type=Path, help="a git repository to replay (optional)")
    parser.add_argument("--states", type=int, default=100)
    parser.add_argument("--json", type=Path, help="write every sample here")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="snapstore-encryption-bench-"))
    result: dict[str, Any] = {"size": args.size, "reps": args.reps}
    try:
        samples = seeded_tree(work, args)
        medians = {
            op: {s: statistics.median(v) for s, v in by.items()} for op, by in samples.items()
        }
        result.update(samples=samples, medians=medians)
        if args.repo is not None:
            medians["history"] = history(work, args)
            result["states"] = args.states
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{'operation':<12} {'plain s':>10} {'encrypted s':>12} {'ratio':>7}")
    ratios = {}
    for op, by in medians.items():
        ratios[op] = by["encrypted"] / by["plain"] if by["plain"] else float("nan")
        print(f"{op:<12} {by['plain']:>10.3f} {by['encrypted']:>12.3f} {ratios[op]:>7.2f}")
    result["ratios"] = ratios
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
