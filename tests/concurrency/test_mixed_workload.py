"""At least 4 processes x several threads run a mixed workload against one root; at the end
nothing committed is lost, torn or resurrected, and nobody hung or timed out on a lock."""

from __future__ import annotations

from pathlib import Path

from helpers.figures import depth, record
from helpers.workload import (
    WorkerSpec,
    check_final,
    ensure_dirs,
    errors_of,
    run_processes,
    totals,
)

PROCESSES = 4
THREADS = 3
MIXED = {
    "create": 30,
    "create_expiring": 6,
    "read": 20,
    "read_expiring": 5,
    "restore": 8,
    "delete": 8,
    "delete_session": 1,
    "put_state": 8,
    "list": 6,
    "sweep": 3,
    "gc": 3,
}


def test_mixed_workload(scratch: Path) -> None:
    root, work = scratch / "root", scratch / "work"
    ensure_dirs(work)
    duration = float(depth(8, 120))
    specs = [
        WorkerSpec(str(root), str(work / f"p{p}"), p, THREADS, duration, seed=p, operations=MIXED)
        for p in range(PROCESSES)
    ]
    results = run_processes(root, work, specs)
    errors = errors_of(results)
    assert not errors, "\n".join(errors[:10])
    checked = check_final(root, results)
    counts = totals(results)
    assert counts["create"] > 0 and counts["gc"] > 0 and counts["restore"] > 0
    gc_skipped = sum(r["gc_skipped"] for r in results)
    record(
        "concurrency",
        test="mixed",
        processes=PROCESSES,
        threads=THREADS,
        seconds=duration,
        operations=sum(counts.values()),
        gc_skipped=gc_skipped,
        lost=0,
        torn=0,
        resurrected=0,
        **{f"op_{name}": count for name, count in counts.items()},
        **{f"checked_{name}": count for name, count in checked.items()},
    )
