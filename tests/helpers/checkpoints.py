"""Helpers for the checkpoint tests: input files of numbered lines."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def write_lines(path: Path, count: int, prefix: str = "record") -> list[str]:
    """Write ``count`` numbered lines to ``path`` and return them."""
    lines = [f"{prefix}-{index:05d}" for index in range(count)]
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return lines


def subprocess_env() -> dict[str, str]:
    """The environment for a child process: this checkout importable, no preset store root."""
    env = {key: value for key, value in os.environ.items() if key != "SNAPSTORE_ROOT"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env
