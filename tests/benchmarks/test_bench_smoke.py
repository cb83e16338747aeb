"""The benchmark runs end to end on a tiny tree and writes every result key (no timings are
asserted: this only keeps ``bench/run.py`` from rotting)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "run.py"


def test_bench_smoke_run_writes_every_key(tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    command = [sys.executable, str(BENCH), "--size", "tiny", "--reps", "1", "--snapshots", "20"]
    command += ["--settle", "0", "--work", str(tmp_path / "work"), "--out", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "first snapshot" in done.stdout
    result = json.loads(out.read_text())
    assert set(result) >= {"meta", "medians", "samples", "scenarios", "targets"}
    assert result["meta"]["files"] == 60
    for operation in ("first", "changed", "unchanged", "restore_empty", "restore_in_place"):
        assert "snapstore" in result["medians"][operation]
    assert set(result["scenarios"]) == {"durability", "space", "memory", "concurrency", "list_open"}
    numbers = {target["number"] for target in result["targets"]}
    assert numbers >= {"1a", "1b", "2a", "2b", "3a", "3b", "4a", "4b", "5", "6", "7", "8"}


def test_fold_bench_reports_fewer_packs_with_folding_on(tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    command = [sys.executable, str(BENCH.parent / "folding.py"), "--creates", "40"]
    command += ["--block", "20", "--threshold", "8", "--out", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    off, on = json.loads(out.read_text())["series"]
    assert [item["packs"] for item in off["blocks"]] == [20, 40]
    assert off["fold_steps"] == 0 and on["fold_steps"] >= 4
    assert on["packs_before_gc"] < 8


def test_first_snapshot_bench_reports_ratios_to_tar_and_phases(tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    command = [sys.executable, str(BENCH.parent / "firstsnap.py"), "--size", "tiny"]
    command += ["--reps", "1", "--phases", "--baseline", str(BENCH.parents[1]), "--out", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "x tar cf" in done.stdout and "load average" in done.stdout
    for phase in ("scan ends", "reading, hashing, compressing ends", "commit ends", "exit"):
        assert done.stdout.count(phase) == 2, phase
    samples = json.loads(out.read_text())
    assert set(samples) == {"tar", "load", "snapstore", "baseline"}
    assert len(samples["snapstore"]["cli"]) == len(samples["baseline"]["library"]) == 1
    for side in ("snapstore", "baseline"):
        found = samples[side]
        assert set(found) == {"cli", "cli_cpu", "library", "library_cpu", "library_main_cpu"}
        assert 0 < found["library_main_cpu"][0] <= found["library_cpu"][0]
    assert "of it the calling thread" in done.stdout


def test_forked_ingest_prototype_reports_both_sides() -> None:
    command = [sys.executable, str(BENCH.parent / "forkedingest.py"), "--size", "tiny"]
    done = subprocess.run([*command, "--reps", "1"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    for side in ("tar cf: median", "serial: ", "forked: ", "load average"):
        assert side in done.stdout, side
