"""Would a small create be faster if its pack's flush overlapped its commit? A measurement,
not a feature: the answer decided against building it (docs/performance.md, "The pack's
flush overlapped with the commit").

    .venv/bin/python bench/flushoverlap.py                     # 3 rounds of 240 creates
    .venv/bin/python bench/flushoverlap.py --rounds 6 --creates 300

One process, one store, the series of ``bench/commits.py`` (5 files of a 50-file project, one
edited before each create, folding off). The flush order changes from one create to the
next, so that every order sees the same load of the disk:

- ``today``: the pack's segment flushed by the calling thread, then the commit (the
  manifest's temp file written and flushed, renamed, its directory flushed);
- ``overlap``: the pack's flush handed to a flusher thread (``os.fsync`` lets the GIL go),
  the commit going on meanwhile, the flush waited for right before the manifest's rename
  (the rename never comes before the pack is durable);
- ``yield``: as ``overlap``, the calling thread giving the GIL away right after the
  hand-off (``time.sleep(0)``), so the flusher starts at once.

The flusher is wired in by replacing two functions of the library in this process only
(the appendable pack's ``sync`` and the manifest's ``write_atomic``); the pack log line
and the process's view of the pack are not deferred as a real implementation would have to.
Per order and round: p50 wall time and the calling thread's CPU time per create, how long the
flusher waited for the GIL before its ``fsync`` began, and the floor of ``bench/commits.py``
measured between the creates of the same round.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from commits import floor_series, make_project

ORDERS = ("today", "overlap", "yield")


class FlushOrder:
    """Switches the flush order of the creates of this process (see the module docstring)."""

    def __init__(self) -> None:
        from snapstore.backend import localmanifests, localstaged
        from snapstore.fs import durable

        self.order = "today"
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="flusher")
        self.pool.submit(lambda: None).result()
        self.pending: list[Future[None]] = []
        self.start_lags: list[float] = []
        self._durable = durable
        appendable = localstaged.AppendableFile
        original_sync: Callable[[Any], None] = appendable.sync

        def sync(file: Any) -> None:
            if self.order == "today" or not file._backend.durable:
                original_sync(file)
                return
            self.pending.append(self.pool.submit(self._flush, file._fd, time.perf_counter()))
            if self.order == "yield":
                time.sleep(0)

        appendable.sync = sync  # type: ignore[method-assign]
        localmanifests.write_atomic = self._write_atomic  # type: ignore[assignment]

    def _flush(self, fd: int, handed_over: float) -> None:
        self.start_lags.append(time.perf_counter() - handed_over)
        os.fsync(fd)

    def _write_atomic(
        self, fs: Any, path: str, data: bytes, *, tmp_dir: str, durable: bool, mode: int = 0o644
    ) -> None:
        """``fs.durable.write_atomic``, waiting for the pack's flush before the rename."""
        fd, tmp_path = self._durable.create_temp(fs, tmp_dir)
        try:
            try:
                fs.write(fd, data)
                fs.fchmod(fd, mode)
                if durable:
                    fs.fsync(fd)
            finally:
                fs.close(fd)
            while self.pending:
                self.pending.pop().result()
            fs.replace(tmp_path, path)
        except BaseException:
            self._durable.discard(fs, tmp_path)
            raise
        if durable:
            fs.fsync_dir(os.path.dirname(path))


def one_round(
    args: argparse.Namespace, orders: tuple[str, ...], flush_order: FlushOrder
) -> dict[str, Any]:
    """``args.creates`` creates per order (after ``args.warm`` untimed), the orders taking
    turns create by create."""
    from snapstore import SnapStore

    with tempfile.TemporaryDirectory(prefix="snapstore-bench-flushoverlap-") as scratch:
        work = Path(scratch)
        project = work / "project"
        make_project(project)
        time.sleep(args.settle)  # the project's files leave the racy window, as a bridge's do
        store = SnapStore(work / "store")
        wall: dict[str, list[float]] = {order: [] for order in orders}
        cpu: dict[str, list[float]] = {order: [] for order in orders}
        floors = []
        flush_order.start_lags.clear()
        for n in range(args.warm + args.creates * len(orders)):
            order = orders[n % len(orders)]
            flush_order.order = order
            paths = [f"d{i % 5}/f{i}.py" for i in ((n * 5 + k) % 50 for k in range(5))]
            (project / paths[0]).write_text(f"# edit {n}\n" + "x = 2\n" * 40)
            started, started_cpu = time.perf_counter(), time.thread_time()
            store.create("bridge", None, paths, base_dir=project)
            if flush_order.pending:
                raise RuntimeError("a create returned before its pack's flush was waited for")
            if n >= args.warm:
                wall[order].append(time.perf_counter() - started)
                cpu[order].append(time.thread_time() - started_cpu)
            if n % 60 == 0:
                floor = floor_series(work / f"floor-{n}", 20, os.urandom(700), os.urandom(350))
                floors.append(floor["p50_ms"])
        store.close()
    found: dict[str, Any] = {"floor_p50_ms": statistics.median(floors)}
    for order in orders:
        found[order] = {
            "wall_p50_ms": round(statistics.median(wall[order]) * 1000, 3),
            "cpu_p50_ms": round(statistics.median(cpu[order]) * 1000, 3),
        }
    if flush_order.start_lags:
        found["flusher_start_lag_p50_ms"] = round(
            statistics.median(flush_order.start_lags) * 1000, 3
        )
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--creates", type=int, default=240, help="creates per order and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--orders", default=",".join(ORDERS))
    parser.add_argument("--warm", type=int, default=30, help="untimed creates first")
    parser.add_argument(
        "--settle", type=float, default=2.1, help="seconds between the project and its creates"
    )
    args = parser.parse_args(argv)
    os.environ["SNAPSTORE_FOLD_THRESHOLD"] = "off"
    orders = tuple(args.orders.split(","))
    unknown = set(orders) - set(ORDERS)
    if unknown:
        parser.error(f"unknown orders: {sorted(unknown)}")
    flush_order = FlushOrder()
    for _ in range(args.rounds):
        found = one_round(args, orders, flush_order)
        found["load"] = os.getloadavg()[0]
        print(json.dumps(found), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
