"""Benchmark what maintenance costs a bridge: how long a create waits while ``gc`` or
``sweep(keep_last=10)`` runs on a large store, and whether gc's time grows linearly with the
packs it reads.

    .venv/bin/python bench/maintenance.py                     # 10,000 snapshots, ~2-4 minutes
    .venv/bin/python bench/maintenance.py --snapshots 50000 --sessions 500
    .venv/bin/python bench/maintenance.py --quick             # a smoke test, seconds
    .venv/bin/python bench/maintenance.py --snapshots 50000 --prepared ~/bench-stores

It builds a store of ``--snapshots`` checkpoints spread over ``--sessions`` sessions (one
file edited before each, automatic folding off, so each create leaves a pack of its own, as
a store does before anything merges its packs): the quarter store first, then a copy of it
carried on to the full size (non-durable creates: the build is set-up, not measured). With
``--prepared``, the stores built are kept in that directory and reused by later runs of the
same size (each run works on copies of them). It then copies the full store, and on each copy
runs, in this process, ``gc`` or ``sweep(keep_last=10)`` while a second process checkpoints
(durably, as a bridge does) in a loop into the first session of the store (the first the
sweep deletes from: a bridge whose own session is being swept). It reports that process's
create times (p50/p99/max) during each operation against the same loop with no maintenance
running, measured in the same run; and ``gc``'s time per pack on a store of a quarter of the
size and on the full one (a ratio near 1 is linear). Ratios only: timings on a shared
machine are noisy.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from snapstore import SnapStore
from snapstore.fs.seam import FileSystem
from snapstore.internals import repository
from snapstore.maintenance import gcsteps
from snapstore.maintenance import sweep as sweep_module
from snapstore.repo.sessions import SessionChange, Sessions

PROJECT_FILES = 20
IDLE_SECONDS = 20.0
"""The creates with no maintenance run for as long as gc did, at most this long."""
CREATOR = r"""
import json, sys, time
from pathlib import Path
from snapstore import SnapStore
from snapstore.maintenance import gcsteps
from snapstore.fs.seam import FileSystem
from snapstore.maintenance import sweep as sweep_module
from snapstore.repo.sessions import SessionChange, Sessions

root, project, out, stop = (Path(arg) for arg in sys.argv[1:5])
store = SnapStore(root, fold_threshold=0)
samples = []
n = 0
while not stop.exists():
    (project / "edited.txt").write_text(f"edit {n}\n")
    started = time.time()
    try:
        store.create("s00000", None, ["edited.txt"], base_dir=project)
        error = None
    except Exception as exc:  # a LockTimeout is a result here, not a crash
        error = type(exc).__name__
    samples.append([started, time.time() - started, error])
    if n == 0:
        (out.parent / (out.name + ".ready")).touch()
    n += 1
    time.sleep(0.002)
out.write_text(json.dumps(samples))
"""


def make_project(project: Path) -> None:
    for index in range(PROJECT_FILES):
        (project / f"f{index}.txt").write_text(f"file {index}\n" * 20)


def build(root: Path, project: Path, snapshots: int, sessions: int, start: int = 0) -> float:
    """Checkpoints ``start`` to ``snapshots`` of a store round-robin over ``sessions``, a
    small pack each (as one-shot commands leave them: a long-lived process would append its
    creates to one pack); seconds taken."""
    started = time.perf_counter()
    store = SnapStore(root, durable=False, fold_threshold=0)
    paths = [f"f{index}.txt" for index in range(PROJECT_FILES)]
    for n in range(start, snapshots):
        edited = n % PROJECT_FILES
        (project / paths[edited]).write_text(f"version {n}\n" * 20)
        chosen = [paths[(edited + k) % PROJECT_FILES] for k in range(5)]
        store.create(f"s{n % sessions:05d}", None, chosen, base_dir=project)
        repository(store).blobs.close()
    store.close()
    return time.perf_counter() - started


def copy_store(source: Path, target: Path) -> None:
    """A copy of a store (``cp -a`` where there is one: several times faster than Python)."""
    if shutil.which("cp"):
        subprocess.run(["cp", "-a", str(source), str(target)], check=True)
    else:
        shutil.copytree(source, target, symlinks=True)


def prepared_stores(
    work: Path, prepared: Path | None, snapshots: int, sessions: int
) -> tuple[Path, Path, float]:
    """The quarter and the full store (built, or found in ``prepared``), and the seconds
    building took."""
    home = prepared if prepared is not None else work
    home.mkdir(parents=True, exist_ok=True)
    quarter = max(1, snapshots // 4)
    small, full = home / f"store-{quarter}-{sessions}", home / f"store-{snapshots}-{sessions}"
    seconds = 0.0
    project = work / "project"
    project.mkdir(parents=True, exist_ok=True)
    make_project(project)
    if not small.exists():
        seconds += build(small.with_suffix(".partial"), project, quarter, sessions)
        small.with_suffix(".partial").rename(small)
    if not full.exists():
        partial = full.with_suffix(".partial")
        shutil.rmtree(partial, ignore_errors=True)
        copy_store(small, partial)
        seconds += build(partial, project, snapshots, sessions, start=quarter)
        partial.rename(full)
    return small, full, seconds


def pack_count(root: Path) -> int:
    return sum(1 for name in os.listdir(root / "packs") if name.endswith(".pack"))


def ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


def summary(waits: list[float], errors: int) -> dict[str, Any]:
    if not waits:
        return {"creates": 0, "errors": errors}
    ordered = sorted(waits)
    return {
        "creates": len(waits),
        "errors": errors,
        "p50_ms": ms(statistics.median(ordered)),
        "p99_ms": ms(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]),
        "max_ms": ms(ordered[-1]),
    }


def with_creator(root: Path, work: Path, operation: Any, idle_seconds: float) -> dict[str, Any]:
    """Run ``operation`` (or, if None, sleep ``idle_seconds``) while a second process creates
    checkpoints in a loop; the creates that started while it ran, and its own time."""
    project = work / "creator-project"
    project.mkdir(exist_ok=True)
    out, stop = work / "creator.json", work / "creator.stop"
    ready = out.parent / (out.name + ".ready")
    for path in (out, stop, ready):
        path.unlink(missing_ok=True)
    script = [sys.executable, "-c", CREATOR, str(root), str(project), str(out), str(stop)]
    child = subprocess.Popen(script)
    deadline = time.monotonic() + 120
    while not ready.exists() and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)  # the child imports and makes its first create, however loaded
    time.sleep(0.2)
    started = time.time()
    result = operation() if operation is not None else time.sleep(idle_seconds)
    ended = time.time()
    time.sleep(0.2)
    stop.touch()
    child.wait(timeout=600)
    samples = json.loads(out.read_text())
    during = [s for s in samples if started <= s[0] <= ended]
    waits = [s[1] for s in during if s[2] is None]
    found = summary(waits, sum(1 for s in during if s[2] is not None))
    found["seconds"] = round(ended - started, 2)
    found["result"] = result
    split = result.get("steps_started") if isinstance(result, dict) else None
    if split is not None:
        for label, part in (
            ("marking", [s for s in during if s[0] < split]),
            ("deleting", [s for s in during if s[0] >= split]),
        ):
            found[label] = summary(
                [s[1] for s in part if s[2] is None], sum(1 for s in part if s[2] is not None)
            )
    return found


def gc_time(root: Path) -> dict[str, Any]:
    packs = pack_count(root)
    store = SnapStore(root, fold_threshold=0)
    started = time.perf_counter()
    report = store.gc()
    seconds = time.perf_counter() - started
    store.close()
    return {"packs": packs, "seconds": round(seconds, 3), "skipped": report.skipped}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--snapshots", type=int, default=10_000)
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--quick", action="store_true", help="400 snapshots in 8 sessions")
    parser.add_argument("--work", type=Path, help="a directory for the stores (default: temp)")
    parser.add_argument(
        "--prepared", type=Path, help="keep the built stores here, and reuse them next time"
    )
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    args = parser.parse_args(argv)
    if args.quick:
        args.snapshots, args.sessions = 400, 8
    work = Path(tempfile.mkdtemp(dir=args.work, prefix="maintenance-bench-"))
    try:
        result = run(work, args.snapshots, args.sessions, args.prepared)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(report(result))
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))
    return 0


def run(work: Path, snapshots: int, sessions: int, prepared: Path | None = None) -> dict[str, Any]:
    prepared_small, full, build_seconds = prepared_stores(work, prepared, snapshots, sessions)
    small = work / "small"
    copy_store(prepared_small, small)
    copies = {name: work / name for name in ("for-gc", "for-sweep", "for-gc-alone", "idle")}
    for copy in copies.values():
        copy_store(full, copy)
    gc_store = SnapStore(copies["for-gc"], fold_threshold=0)
    sweep_store = SnapStore(copies["for-sweep"], fold_threshold=0)
    during_gc = with_creator(copies["for-gc"], work, lambda: _gc_summary(gc_store), 0)
    print(f"during gc: {during_gc}", flush=True)
    during_sweep = with_creator(copies["for-sweep"], work, lambda: _sweep_summary(sweep_store), 0)
    print(f"during sweep: {during_sweep}", flush=True)
    idle = with_creator(
        copies["idle"], work, None, min(IDLE_SECONDS, max(3.0, during_gc["seconds"]))
    )
    print(f"no maintenance: {idle}", flush=True)
    gc_store.close()
    sweep_store.close()
    small_gc = gc_time(small)
    print(f"gc alone, quarter store: {small_gc}", flush=True)
    full_gc = gc_time(copies["for-gc-alone"])
    print(f"gc alone, full store: {full_gc}", flush=True)
    per_pack = [item["seconds"] / max(1, item["packs"]) for item in (small_gc, full_gc)]
    return {
        "snapshots": snapshots,
        "sessions": sessions,
        "build_seconds": round(build_seconds, 1),
        "idle": idle,
        "during_gc": during_gc,
        "during_sweep": during_sweep,
        "gc_small": small_gc,
        "gc_full": full_gc,
        "gc_per_pack_ratio": round(per_pack[1] / per_pack[0], 2) if per_pack[0] else None,
    }


def _gc_summary(store: SnapStore) -> dict[str, Any]:
    """gc's report, with when its deletion steps began, how many there were and the longest
    (creates before the steps waited for marking and copying, those after for the steps)."""
    steps: dict[str, Any] = {}
    original = gcsteps.Steps.run

    def timed(self: gcsteps.Steps) -> gcsteps.StepResult:
        steps["steps_started"] = time.time()
        result = original(self)
        steps.update(
            steps=result.steps,
            longest_hold_ms=ms(result.longest_hold),
            longest_hold_parts={
                part: value if part.endswith("_items") else ms(value)
                for part, value in result.longest_hold_parts.items()
            },
            longest_wait_ms=ms(result.longest_wait),
        )
        return result

    gcsteps.Steps.run = timed  # type: ignore[method-assign]
    try:
        report = store.gc()
    finally:
        gcsteps.Steps.run = original  # type: ignore[method-assign]
    return {
        "skipped": report.skipped,
        "reason": report.reason,
        "packs_deleted": report.packs_deleted,
        "packs_written": report.packs_written,
        **steps,
    }


def _sweep_summary(store: SnapStore) -> dict[str, Any]:
    """How many snapshots sweep deleted, in how many holds of a session's lock, the longest
    hold (a create into that session waits for it) and where it went: the flushes of the
    session's directory in it, the unlinks, the write of the session's head as it ends; and
    the longest wait for a session's lock."""
    holds: list[dict[str, float]] = []
    original_hold = sweep_module._hold
    original_changing = Sessions.changing_dir
    original_flush = FileSystem.fsync_dir
    original_unlink = FileSystem.unlink
    original_finish = SessionChange.finish
    current: dict[str, float] = {}

    def add(part: str, started: float) -> None:
        current[part] = current.get(part, 0.0) + time.perf_counter() - started

    def flush(fs: FileSystem, path: str, *, dir_fd: int | None = None) -> None:
        started = time.perf_counter()
        try:
            original_flush(fs, path, dir_fd=dir_fd)
        finally:
            add("flush", started)

    def unlink(fs: FileSystem, path: str, *, dir_fd: int | None = None) -> None:
        started = time.perf_counter()
        try:
            original_unlink(fs, path, dir_fd=dir_fd)
        finally:
            add("unlink", started)

    def finish(change: SessionChange) -> None:
        started = time.perf_counter()
        try:
            original_finish(change)
        finally:
            add("head", started)

    @contextlib.contextmanager
    def changing(sessions: Sessions, session_dir: str, label: str | None = None) -> Any:
        asked = time.perf_counter()
        with original_changing(sessions, session_dir, label) as change:
            current["wait"] = time.perf_counter() - asked
            current["held_from"] = time.perf_counter()
            yield change
        current["held"] = time.perf_counter() - current.pop("held_from")

    def timed(*args: Any) -> Any:
        current.clear()
        try:
            return original_hold(*args)
        finally:
            holds.append(dict(current))

    sweep_module._hold = timed  # type: ignore[assignment]
    Sessions.changing_dir = changing  # type: ignore[assignment,method-assign]
    FileSystem.fsync_dir = flush  # type: ignore[method-assign]
    FileSystem.unlink = unlink  # type: ignore[method-assign]
    SessionChange.finish = finish  # type: ignore[method-assign]
    try:
        deleted = len(store.sweep(keep_last=10).deleted)
    finally:
        sweep_module._hold = original_hold  # type: ignore[assignment]
        Sessions.changing_dir = original_changing  # type: ignore[method-assign]
        FileSystem.fsync_dir = original_flush  # type: ignore[method-assign]
        FileSystem.unlink = original_unlink  # type: ignore[method-assign]
        SessionChange.finish = original_finish  # type: ignore[method-assign]
    longest = max(holds, key=lambda hold: hold.get("held", 0.0), default={})
    return {
        "deleted": deleted,
        "holds": len(holds),
        "longest_hold_ms": ms(longest.get("held", 0.0)),
        "longest_hold_parts": {part: ms(value) for part, value in longest.items()},
        "longest_wait_ms": ms(max((hold.get("wait", 0.0) for hold in holds), default=0.0)),
    }


def report(result: dict[str, Any]) -> str:
    lines = [
        f"store: {result['snapshots']} snapshots in {result['sessions']} sessions "
        f"(built in {result['build_seconds']} s)",
        "creates by another process into session s00000 (p50 / p99 / max, errors):",
    ]
    idle = result["idle"]
    rows = [("no maintenance", result["idle"]), ("during gc", result["during_gc"])]
    rows += [(f"  gc {part}", result["during_gc"].get(part)) for part in ("marking", "deleting")]
    rows.append(("during sweep", result["during_sweep"]))
    for label, item in rows:
        if item is None:
            continue
        if not item.get("creates"):
            lines.append(f"  {label:<15} no create completed ({item['errors']} errors)")
            continue
        ratio = item["max_ms"] / idle["max_ms"] if idle.get("max_ms") else float("nan")
        lines.append(
            f"  {label:<15} {item['p50_ms']} / {item['p99_ms']} / {item['max_ms']} ms, "
            f"{item['errors']} errors, {item['creates']} creates "
            f"(p99 {item['p99_ms'] / idle['p99_ms']:.1f}x, max {ratio:.1f}x no maintenance)"
        )
    steps = result["during_gc"]["result"]
    if isinstance(steps, dict) and "steps" in steps:
        swept = result["during_sweep"]["result"]
        lines.append(
            f"gc beside the bridge: {result['during_gc']['seconds']} s, {steps['steps']} "
            f"deletion steps, the longest {steps['longest_hold_ms']} ms "
            f"({steps.get('longest_hold_parts')}), the longest wait for the lock "
            f"{steps.get('longest_wait_ms')} ms; sweep {result['during_sweep']['seconds']} s, "
            f"{swept['holds']} holds, the longest {swept['longest_hold_ms']} ms "
            f"({swept['longest_hold_parts']}), the longest wait {swept['longest_wait_ms']} ms"
        )
    for key in ("gc_small", "gc_full"):
        item = result[key]
        lines.append(f"gc alone, {item['packs']} packs: {item['seconds']} s")
    lines.append(f"gc time per pack, full / quarter store: {result['gc_per_pack_ratio']}x")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
