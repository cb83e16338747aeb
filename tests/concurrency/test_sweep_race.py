"""A long-lived process that opened the store before anyone wrote sweeps with a TTL while
other processes create: it deletes only what is older than the TTL when it sweeps, decided
from the disk, never a snapshot made after it started."""

from __future__ import annotations

import json
import multiprocessing
import time
from pathlib import Path
from typing import Any

from helpers.figures import depth, record
from helpers.seam import FastFileSystem
from helpers.trees import write_tree

from snapstore import SnapStore
from snapstore.errors import SnapshotNotFound
from snapstore.format.times import time_to_ns

TTL = 0.6
SESSION = "shared"


def _sweeper(root: str, go: Any, stop_at: float, result_path: str) -> None:
    store = SnapStore(root, fs=FastFileSystem())
    store.list()
    go.wait()
    sweeps = []
    while time.time() < stop_at:
        time.sleep(0.05)
        started = time.time_ns()
        report = store.sweep(ttl=TTL)
        sweeps.append([started, time.time_ns(), [name for _, name in report.deleted]])
    Path(result_path).write_text(json.dumps(sweeps))


def _writer(root: str, index: int, go: Any, stop_at: float, work: str, result_path: str) -> None:
    store = SnapStore(root, fs=FastFileSystem())
    go.wait()
    created = {}
    number = 0
    while time.time() < stop_at:
        name = f"w{index}-{number}"
        source = Path(work) / name
        write_tree(source, {"f.txt": f"{name}\n".encode()})
        info = store.create(SESSION, name, ["."], base_dir=source)
        created[name] = time_to_ns(info.created_at)
        number += 1
    Path(result_path).write_text(json.dumps(created))


def test_long_lived_sweeper_never_deletes_newer(scratch: Path) -> None:
    root, work = str(scratch / "root"), scratch / "work"
    work.mkdir()
    SnapStore(root)
    context = multiprocessing.get_context("fork")
    go = context.Event()
    duration = float(depth(4, 30))
    stop_at = time.time() + 1.0 + TTL + duration
    sweeper = context.Process(target=_sweeper, args=(root, go, stop_at, str(work / "sweeps.json")))
    sweeper.start()
    time.sleep(TTL + 0.5)
    writers = [
        context.Process(
            target=_writer,
            args=(root, i, go, stop_at, str(work), str(work / f"created-{i}.json")),
        )
        for i in range(2)
    ]
    for writer in writers:
        writer.start()
    go.set()
    for process in [sweeper, *writers]:
        process.join(duration + 60)
        assert process.exitcode == 0, f"process {process.pid} failed or hung"
    sweeps = json.loads((work / "sweeps.json").read_text())
    created: dict[str, int] = {}
    for i in range(2):
        created.update(json.loads((work / f"created-{i}.json").read_text()))
    store = SnapStore(root)
    deleted_by: dict[str, int] = {}
    for _started, finished, names in sweeps:
        for name in names:
            assert name not in deleted_by, f"{name} deleted twice"
            deleted_by[name] = finished
            age = (finished - created[name]) / 1e9
            assert age > TTL, f"sweep deleted {name} when it was {age:.3f}s old (ttl {TTL}s)"
    for name in created:
        try:
            store.get(SESSION, name)
            present = True
        except SnapshotNotFound:
            present = False
        assert present != (name in deleted_by), (
            f"{name}: {'resurrected' if present else 'lost'} (sweeps deleted {len(deleted_by)})"
        )
    assert deleted_by, "the sweeper never deleted anything: the race was not exercised"
    record(
        "concurrency",
        test="sweep_race",
        processes=3,
        sweeps=len(sweeps),
        creates=len(created),
        swept=len(deleted_by),
    )
