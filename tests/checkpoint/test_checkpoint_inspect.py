"""What ``explain`` tells an operator about a checkpoint and the next run."""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path
from typing import Any

from helpers.checkpoints import write_lines

from snapstore.checkpoint import (
    Checkpointer,
    CountedSource,
    CsvSource,
    LinesSource,
    MemoryCheckpointStore,
    explain,
)
from snapstore.checkpoint.inspect import plan_lines


def _read_some(path: Path, store: Any, key: str, count: int, every: int = 4) -> None:
    """Run a lines pipeline on ``path`` and stop after ``count`` records."""
    records = Checkpointer(store, key, every=every).iterate(LinesSource(path))
    for _ in range(count):
        next(records)
    records.close()


def test_explains_a_file_checkpoint_with_its_bound(tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    write_lines(path, 10)
    store = MemoryCheckpointStore()
    _read_some(path, store, "feed", count=6)
    checkpoint = store.load("feed")
    assert checkpoint is not None
    plan = explain(checkpoint, now=checkpoint.saved_at + timedelta(seconds=90))
    assert plan.value == {"offset": 65, "records": 5}
    assert plan.source == "lines" and plan.every == 4 and plan.reprocess_bound == 3
    assert plan.resume_key == "byte offset of the next line" and plan.granularity == "one line"
    assert plan.age_seconds == 90 and plan.file_problem is None
    assert plan.next_run == (
        f"seek to byte 65 of {path} and read the 65 bytes not read yet, starting with record 6"
    )
    assert "at most 3 records" in plan.reprocess
    assert "stopped early" in plan.saved_when
    text = "\n".join(plan_lines(plan))
    assert "1m ago" in text and "every        4 records" in text
    assert json.loads(json.dumps(plan.to_dict()))["reprocess_bound"] == 3


def test_explains_a_finished_run_and_new_appends(tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    write_lines(path, 3)
    store = MemoryCheckpointStore()
    list(Checkpointer(store, "feed").iterate(LinesSource(path)))
    checkpoint = store.load("feed")
    assert checkpoint is not None
    plan = explain(checkpoint)
    assert "end of the stream" in plan.saved_when
    assert "find nothing new until the file grows" in plan.next_run
    with path.open("a", encoding="utf-8") as handle:
        handle.write("more\n")
    assert "read the 5 bytes not read yet, starting with record 4" in explain(checkpoint).next_run


def test_explains_that_a_replaced_file_will_be_refused(tmp_path: Path) -> None:
    path = tmp_path / "in.csv"
    path.write_text("n\n1\n2\n3\n", encoding="utf-8")
    store = MemoryCheckpointStore()
    records = Checkpointer(store, "table", every=1).iterate(CsvSource(path))
    next(records)
    next(records)
    records.close()
    checkpoint = store.load("table")
    assert checkpoint is not None
    assert explain(checkpoint).next_run.startswith("read the header row again, then seek")
    replacement = tmp_path / "new.csv"
    replacement.write_text("n\n" + "9\n" * 50, encoding="utf-8")
    os.replace(replacement, path)
    plan = explain(checkpoint)
    assert plan.file_problem is not None and "replaced" in plan.file_problem
    assert plan.next_run.startswith("refuse to start with IdentityMismatchError")
    path.unlink()
    path.write_text("n\n" + "8\n" * 50, encoding="utf-8")
    assert explain(checkpoint).file_problem is not None, "a recreated file went unnoticed"
    path.unlink()
    assert explain(checkpoint).file_problem == "the file no longer exists"


def test_explains_count_and_direct_checkpoints() -> None:
    store = MemoryCheckpointStore()
    list(Checkpointer(store, "n", every=10).iterate(CountedSource(range(25))))
    store.save("api", {"cursor": "c-17"})
    counted, direct = store.load("n"), store.load("api")
    assert counted is not None and direct is not None
    assert (
        explain(counted).next_run == "re-read the input, skip the first 25 records, start with 26"
    )
    plan = explain(direct)
    assert plan.source is None and plan.every is None and plan.reprocess_bound is None
    assert plan.next_run == """load {"cursor": "c-17"} with load('api') and continue after it"""
    assert plan.reprocess.startswith("unknown")
