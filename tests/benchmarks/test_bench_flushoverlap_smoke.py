"""bench/flushoverlap.py runs end to end, every flush order committing its creates, and
prints every figure: no timing is asserted, this only keeps the script from rotting."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "flushoverlap.py"


def test_flushoverlap_bench_quick_run_prints_every_figure() -> None:
    command = [sys.executable, str(BENCH), "--creates", "3", "--rounds", "1"]
    command += ["--warm", "2", "--settle", "0"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["floor_p50_ms"] > 0
    assert found["flusher_start_lag_p50_ms"] >= 0
    for order in ("today", "overlap", "yield"):
        assert found[order]["wall_p50_ms"] > 0
        assert found[order]["cpu_p50_ms"] > 0
