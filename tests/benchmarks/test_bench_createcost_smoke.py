"""bench/createcost.py runs end to end and prints every figure, alternating with another
checkout (here this one): no timing is asserted, this only keeps the script from rotting."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "createcost.py"


def test_createcost_bench_quick_run_prints_every_figure() -> None:
    command = [
        sys.executable,
        str(BENCH),
        "--creates",
        "3",
        "--rounds",
        "1",
        "--against",
        str(ROOT),
        "--warm",
        "2",
        "--settle",
        "0",
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    for label in ("against", "this"):
        assert re.search(
            rf"^{label} +durable +CPU p50 per create [\d.]+ ms .*; floor [\d.]+ ms$",
            done.stdout,
            re.M,
        )
        assert re.search(rf"^{label} +no flush +CPU p50 per create [\d.]+ ms", done.stdout, re.M)
        calls = re.search(rf"^{label} +function calls per create: \[(\d+)\]$", done.stdout, re.M)
        assert calls is not None and int(calls.group(1)) > 100
