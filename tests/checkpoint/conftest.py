"""Fixtures of the checkpoint tests: pipeline worker processes that can be killed."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers.checkpoints import subprocess_env

WORKER = Path(__file__).with_name("checkpoint_worker.py")


@pytest.fixture
def start_worker(tmp_path: Path) -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    """Start ``checkpoint_worker.py`` on the root ``tmp_path/root``; all are reaped at teardown."""
    started: list[subprocess.Popen[bytes]] = []

    def start(
        key: str, source: Path, output: Path, every: int, delay: float = 0.0
    ) -> subprocess.Popen[bytes]:
        args = [str(tmp_path / "root"), key, str(source), str(output), str(every), str(delay)]
        process = subprocess.Popen(
            [sys.executable, str(WORKER), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=subprocess_env(),
        )
        started.append(process)
        return process

    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=30)
