"""bench/largefiles.py runs end to end on small files and writes every series for snapstore
(restic and borg too where installed; no timings are asserted: this only keeps it from
rotting). bench/chunkers.py runs too."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def test_large_file_bench_writes_every_series(tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    command = [sys.executable, str(BENCH / "largefiles.py"), "--edit-mib", "4"]
    command += ["--sqlite-mib", "2", "--gib", "0.01", "--work", str(tmp_path), "--out", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    edits, sqlite, big = result["edits"], result["sqlite"], result["big"]
    assert len(edits["snapstore-256k"]) == 3 and len(sqlite["snapstore-256k"]) == 4
    assert edits["snapstore-256k"][1] < 2 << 20  # the overwrite did not store the file again
    assert big["snapstore-256k"]["checkpoint_peak_rss_mb"] > 0


def test_chunker_bench_runs(tmp_path: Path) -> None:
    command = [sys.executable, str(BENCH / "chunkers.py"), "--mib", "4", "--avg-kib", "64"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "pyfastcdc cut_buf" in done.stdout
