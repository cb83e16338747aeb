"""Writers racing a process that runs gc back to back: gc never deletes a blob that a
committed manifest or an in-flight writer needs (writers also reuse each other's blobs)."""

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

WRITERS = {"create": 6, "read": 3, "restore": 1, "delete": 2, "gc": 0}
COLLECTOR = {"gc": 1}


def test_writers_racing_gc(scratch: Path) -> None:
    root, work = scratch / "root", scratch / "work"
    ensure_dirs(work)
    duration = float(depth(5, 60))
    specs = [WorkerSpec(str(root), str(work / "gc"), 0, 1, duration, seed=0, operations=COLLECTOR)]
    specs += [
        WorkerSpec(str(root), str(work / f"p{p}"), p, 2, duration, seed=p, operations=WRITERS)
        for p in range(1, 4)
    ]
    results = run_processes(root, work, specs)
    errors = errors_of(results)
    assert not errors, "\n".join(errors[:10])
    check_final(root, results)
    counts = totals(results)
    skipped = sum(r["gc_skipped"] for r in results)
    assert counts["gc"] - skipped > 0, "gc never ran: the writers starved it"
    record(
        "concurrency",
        test="gc_race",
        processes=len(specs),
        operations=sum(counts.values()),
        gc_runs=counts["gc"] - skipped,
        gc_skipped=skipped,
        creates=counts["create"],
    )
