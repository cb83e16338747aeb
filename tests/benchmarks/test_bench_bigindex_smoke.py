"""bench/bigindex.py runs end to end on a small pack and reports each way of reading it (no
timing is asserted: this only keeps the script from rotting)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "bigindex.py"


def test_bigindex_bench_reports_both_ways_of_reading_the_index() -> None:
    command = [sys.executable, str(BENCH), "--blobs", "3000", "--rounds", "1"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "one pack of 3,000 blobs" in done.stdout
    assert "digests mapped one by one: 0)" in done.stdout  # lookup: none of them
    assert "digests mapped one by one: 3,000)" in done.stdout  # whole: every one
