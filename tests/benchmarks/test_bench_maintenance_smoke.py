"""bench/maintenance.py runs end to end on a small store and reports every figure (no timing
is asserted: this only keeps the script from rotting)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "maintenance.py"


def test_maintenance_bench_quick_run_reports_every_figure(tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    command = [sys.executable, str(BENCH), "--quick", "--work", str(tmp_path), "--out", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "during gc" in done.stdout and "during sweep" in done.stdout
    result = json.loads(out.read_text())
    assert result["snapshots"] == 400
    for key in ("idle", "during_gc", "during_sweep"):
        assert result[key]["creates"] + result[key]["errors"] >= 1, key
    assert result["during_gc"]["result"]["skipped"] is False
    # keep_last=10 of 8 sessions of 50, and of what the bench's creates added to the first
    swept = result["during_sweep"]["result"]
    assert swept["deleted"] >= 400 - 8 * 10
    assert swept["holds"] >= 1 and swept["longest_hold_ms"] > 0
    assert {"wait", "held"} <= set(swept["longest_hold_parts"])
    steps = result["during_gc"]["result"]
    assert steps["steps"] >= 1 and {"refresh", "settle", "delete"} <= set(
        steps["longest_hold_parts"]
    )
    assert result["gc_small"]["packs"] == 100 and result["gc_full"]["packs"] == 400
    assert not list(tmp_path.glob("maintenance-bench-*"))  # its work directory is removed
