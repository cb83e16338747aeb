"""bench/firstlevels.py runs end to end, on a tiny tree and on a tiny git history, and the
level it names is the one the packs were written with (blocks stored as they are take more
room than level 1's). No timing is asserted: this only keeps the script from rotting."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "firstlevels.py"


def _run(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(BENCH), *args], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _rows(out: str) -> dict[str, list[str]]:
    return {
        cells[0]: cells[1:]
        for line in out.splitlines()
        if line.startswith("| ") and not line.startswith("| level")
        for cells in [[cell.strip() for cell in line.strip("|").split("|")]]
    }


def _megabytes(cell: str) -> float:
    found = re.fullmatch(r"([\d.]+) MB", cell)
    assert found is not None, cell
    return float(found.group(1))


def test_first_snapshot_levels_print_every_figure() -> None:
    rows = _rows(_run("--size", "tiny", "--reps", "1", "--levels", "1,none"))
    assert set(rows) == {"1", "none"}
    for cells in rows.values():
        assert re.fullmatch(r"\d+ ms", cells[0]) and re.fullmatch(r"[\d.]+x", cells[1])
    assert _megabytes(rows["none"][3]) > _megabytes(rows["1"][3])


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git on PATH")
def test_history_levels_print_sizes_before_and_after_gc(tmp_path: Path) -> None:
    env = dict(os.environ, GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull)
    env.update(GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.invalid")
    env.update(GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.invalid")
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, env=env, check=True)
    for step in range(3):
        (repo / "text.txt").write_text(f"state {step}\n" + "a line that repeats\n" * 2000)
        subprocess.run(["git", "add", "-A"], cwd=repo, env=env, check=True)
        subprocess.run(["git", "commit", "-q", "-m", str(step)], cwd=repo, env=env, check=True)
    rows = _rows(_run("--history", str(repo), "--states", "3", "--levels", "1,none"))
    assert set(rows) == {"1", "none"}
    assert _megabytes(rows["none"][0]) > _megabytes(rows["1"][0])
    for cells in rows.values():
        assert re.fullmatch(r"[\d.]+ s", cells[1])
        assert _megabytes(cells[3]) <= _megabytes(cells[2])
