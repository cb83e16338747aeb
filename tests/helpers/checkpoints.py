"""Helpers for the checkpoint tests: input files of numbered lines."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def write_lines(path: Path, count: int, prefix: str = "record") -> list[str]:
    """Write ``count`` numbered lines to ``path`` and return them."""
    lines = [f"{prefix}-{index:05d}" for index in range(count)]
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return lines


def run_snapstore(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``snapstore --root ROOT ARGS`` as a real process, with no terminal on stdin."""
    return subprocess.run(
        [sys.executable, "-m", "snapstore", "--root", str(root), *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
        env=subprocess_env(),
    )


def subprocess_env() -> dict[str, str]:
    """The environment for a child process: this checkout importable, no preset store root."""
    env = {key: value for key, value in os.environ.items() if key != "SNAPSTORE_ROOT"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env
