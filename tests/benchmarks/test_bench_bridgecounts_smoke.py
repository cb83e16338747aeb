"""bench/bridgecounts.py runs end to end with two small bridges and reports its counts (no
timing is asserted: this only keeps the script from rotting)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "bridgecounts.py"


def test_bridge_counts_quick_run_reports_the_counts(tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    command = [sys.executable, str(BENCH), "--bridges", "2", "--creates", "5", "--out", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    for side in ("one root", "separate roots"):
        (run,) = result[side]
        counts = run["per_create"]
        assert counts["lock attempt: gc"] >= 1
        assert counts["fsync of sessions/<session>/"] >= 1
        assert "segment loads" in counts and "CPU ms" in counts
    assert "creates per second" in done.stdout
