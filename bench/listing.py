"""``SnapStore.list()`` in a new process against a bare walk of the manifests.

    .venv/bin/python bench/listing.py                          # 10,000 snapshots, 100 sessions
    .venv/bin/python bench/listing.py --snapshots 50000 --sessions 500 --rounds 5

Builds (once, kept in ``--work``) a store of N one-file snapshots spread evenly over S
sessions, lists it once so its header cache is written, then alternates, round after round,
new processes that each time one of:

- ``walk``: the bare walk (``scenarios.bare_walk``: an ``os.scandir`` of ``sessions/`` and of
  each session directory, and a ``stat`` of each manifest): the floor of a listing that looks
  at every manifest;
- ``list``: ``SnapStore(root).list()`` alone (the store opened first), with every session
  settled (unchanged for longer than the settling time: the header cache is believed by
  each session's stamp);
- ``list_one_recent``: the same just after one session directory's times moved (the usual
  case: the session a bridge just checkpointed is listed and matched by version, the
  others are read by their stamps);
- ``list_recent``: the same just after every session directory's times moved (each session
  is listed and its manifests matched with the cache by version, as right after a change).

Each child reports the CPU time (``time.process_time``: user and system, which a loaded
machine inflates far less than wall time) and wall time of the call alone, imports excluded.
Prints the medians and each case's ratio to the walk of the same round.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

CHILD = """
import json, sys, time
what, root, bench = sys.argv[1:4]
sys.path.insert(0, bench)
if what == "walk":
    from pathlib import Path
    from scenarios import bare_walk
    call = lambda: bare_walk(Path(root))
else:
    from snapstore import SnapStore
    store = SnapStore(root)
    call = store.list
cpu, wall = time.process_time(), time.perf_counter()
count = len(call()) if what != "walk" else call()
print(json.dumps([time.process_time() - cpu, time.perf_counter() - wall, count]))
"""
SETTLE_SECONDS = 3.5
"""Longer than a session directory takes to settle (``localmanifests.SETTLE_NS``)."""


def build(root: Path, snapshots: int, sessions: int) -> None:
    """A store of ``snapshots`` one-file snapshots over ``sessions`` sessions (kept)."""
    from snapstore import SnapStore

    marker = root / "bench-built.json"
    wanted = {"snapshots": snapshots, "sessions": sessions}
    if marker.exists() and json.loads(marker.read_text()) == wanted:
        return
    source = root.parent / f"source-{snapshots}-{sessions}"
    source.mkdir(parents=True, exist_ok=True)
    (source / "note.txt").write_text("one small file\n")
    store = SnapStore(root, durable=False)
    for index in range(snapshots):
        store.create(f"session-{index % sessions:05d}", f"snap-{index:06d}", ["."], base_dir=source)
    marker.write_text(json.dumps(wanted))


def _child(what: str, root: Path) -> tuple[float, float, int]:
    bench = str(Path(__file__).resolve().parent)
    done = subprocess.run(
        [sys.executable, "-c", CHILD, what, str(root), bench],
        check=True,
        capture_output=True,
        text=True,
    )
    cpu, wall, count = json.loads(done.stdout)
    return cpu, wall, count


def _unsettle(root: Path, *, every: bool = True) -> None:
    """Move every session directory's times (or the first one's) to now, as a change
    would."""
    sessions = root / "sessions"
    for name in sorted(os.listdir(sessions))[: None if every else 1]:
        os.utime(sessions / name)


def run(root: Path, rounds: int) -> dict[str, dict[str, float]]:
    """Alternate the cases ``rounds`` times; medians and ratios to the walk."""
    cases = ("walk", "list", "list_one_recent", "list_recent")
    seen: dict[str, list[tuple[float, float, int]]] = {case: [] for case in cases}
    ratios: dict[str, list[float]] = {case: [] for case in cases[1:]}
    for _ in range(rounds):
        time.sleep(SETTLE_SECONDS)
        _child("list", root)  # the cache, recorded at the settled stamps
        walk = _child("walk", root)
        seen["walk"].append(walk)
        seen["list"].append(_child("list", root))
        _unsettle(root, every=False)
        seen["list_one_recent"].append(_child("list_one_recent", root))
        _unsettle(root)
        seen["list_recent"].append(_child("list_recent", root))
        for case in cases[1:]:
            ratios[case].append(seen[case][-1][0] / walk[0])
    counts = {count for case in cases for _, _, count in seen[case]}
    assert len(counts) == 1, f"the cases saw different numbers of snapshots: {counts}"
    report: dict[str, dict[str, float]] = {}
    for case in cases:
        report[case] = {
            "cpu_ms": statistics.median(cpu for cpu, _, _ in seen[case]) * 1000,
            "wall_ms": statistics.median(wall for _, wall, _ in seen[case]) * 1000,
        }
        if case in ratios:
            report[case]["cpu_ratio_median"] = statistics.median(ratios[case])
            report[case]["cpu_ratio_max"] = max(ratios[case])
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--snapshots", type=int, default=10_000)
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--work", type=Path, default=Path("/tmp/snapstore-bench-listing"))
    args = parser.parse_args(argv)
    root = args.work / f"store-{args.snapshots}-{args.sessions}"
    build(root, args.snapshots, args.sessions)
    report = run(root, args.rounds)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"{args.snapshots} snapshots in {args.sessions} sessions, {args.rounds} rounds")
    print(f"load average at the end: {load:.1f}")
    for case, figures in report.items():
        line = f"{case:15} CPU {figures['cpu_ms']:7.1f} ms   wall {figures['wall_ms']:7.1f} ms"
        if "cpu_ratio_median" in figures:
            line += (
                f"   CPU vs walk {figures['cpu_ratio_median']:.2f}x"
                f" (max {figures['cpu_ratio_max']:.2f}x)"
            )
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
