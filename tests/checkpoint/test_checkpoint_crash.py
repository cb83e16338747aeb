"""Real processes: a pipeline killed with SIGKILL resumes losing nothing, re-running little."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.checkpoints import write_lines

from snapstore.checkpoint import FileCheckpointStore

Starter = Callable[..., subprocess.Popen[bytes]]

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")


def _read_output(path: Path) -> list[str]:
    """The records a worker has appended so far."""
    if not path.exists():
        return []
    return path.read_text(encoding="utf-8").splitlines()


def _wait_for_lines(path: Path, count: int, process: subprocess.Popen[bytes]) -> None:
    """Block until ``path`` holds at least ``count`` lines (or the worker has exited)."""
    deadline = time.monotonic() + 30
    while len(_read_output(path)) < count and process.poll() is None:
        assert time.monotonic() < deadline, "the worker made no progress"
        time.sleep(0.002)


def _finish(process: subprocess.Popen[bytes]) -> None:
    """Wait for a worker that should succeed, showing its stderr if it did not."""
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 0, stderr.decode()


def test_sigkill_mid_stream_reruns_at_most_every_minus_one_and_loses_nothing(
    tmp_path: Path, start_worker: Starter
) -> None:
    every = 7
    source, output = tmp_path / "input.txt", tmp_path / "output.txt"
    records = write_lines(source, 900)
    store = FileCheckpointStore(tmp_path / "root")
    kills = 0
    for kill_after in (100, 350, 600):
        process = start_worker("copy", source, output, every)
        _wait_for_lines(output, kill_after, process)
        if process.poll() is not None:
            break
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
        assert process.returncode == -signal.SIGKILL
        kills += 1

        done_before = _read_output(output)
        reached = records.index(done_before[-1]) + 1
        saved = store.load("copy")
        resume_at = 0 if saved is None else saved.value["records"]
        assert resume_at <= reached, "a position was saved before its record was done"
        in_flight = 1
        assert reached - resume_at <= (every - 1) + in_flight, (
            f"killed after record {reached}, resuming after record {resume_at}"
        )
    assert kills >= 2, "the worker finished before it could be killed twice"

    _finish(start_worker("copy", source, output, every))
    done = _read_output(output)
    assert set(done) == set(records), "a record was lost across the crashes"
    assert done[-1] == records[-1]
    assert len(done) - len(records) <= kills * every
    final = store.load("copy")
    assert final is not None and final.run is not None
    assert final.value == {"offset": source.stat().st_size, "records": len(records)}
    assert final.run.trigger == "end"


def test_each_run_resumes_exactly_where_the_saved_position_says(
    tmp_path: Path, start_worker: Starter
) -> None:
    every = 5
    source, output = tmp_path / "input.txt", tmp_path / "output.txt"
    records = write_lines(source, 800)
    store = FileCheckpointStore(tmp_path / "root")
    process = start_worker("copy", source, output, every)
    _wait_for_lines(output, 300, process)
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=30)

    before = _read_output(output)
    saved = store.load("copy")
    assert saved is not None
    resume_at = saved.value["records"]
    assert before == records[: len(before)]

    _finish(start_worker("copy", source, output, every))
    after = _read_output(output)[len(before) :]
    assert after == records[resume_at:], "the second run did not start at the saved record"


def test_two_processes_with_different_keys_share_one_root(
    tmp_path: Path, start_worker: Starter
) -> None:
    inputs = {key: tmp_path / f"{key}.txt" for key in ("orders", "events")}
    expected = {key: write_lines(path, 500, prefix=key) for key, path in inputs.items()}
    outputs = {key: tmp_path / f"{key}.out" for key in inputs}
    processes = [start_worker(key, inputs[key], outputs[key], 10) for key in inputs]
    for process in processes:
        _finish(process)

    store = FileCheckpointStore(tmp_path / "root")
    assert store.keys() == ["events", "orders"]
    for key, path in inputs.items():
        assert _read_output(outputs[key]) == expected[key]
        saved = store.load(key)
        assert saved is not None and saved.identity is not None
        assert saved.value == {"offset": path.stat().st_size, "records": 500}
        assert saved.identity.path == str(path)
