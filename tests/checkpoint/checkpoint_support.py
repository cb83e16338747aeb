"""Helpers for the checkpoint tests (a module name of its own, apart from tests/support.py)."""

from __future__ import annotations

from pathlib import Path


def write_lines(path: Path, count: int, prefix: str = "record") -> list[str]:
    """Write ``count`` numbered lines to ``path`` and return them."""
    lines = [f"{prefix}-{index:05d}" for index in range(count)]
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return lines
