"""``bench/serve.py`` runs end to end on a tiny tree and writes every result key (no timing is
asserted: this only keeps the benchmark from rotting)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from helpers.service import REPO, service_env


def test_bench_serve_smoke_run_writes_every_key(tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    command = [sys.executable, str(REPO / "bench/serve.py"), "--calls", "5", "--cli-calls", "1"]
    command += ["--tree-files", "300", "--watched-calls", "2", "--out", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, env=service_env(), timeout=300)
    assert done.returncode == 0, done.stderr
    assert "idle server RSS" in done.stdout
    result = json.loads(out.read_text())
    assert set(result) >= {"meta", "library", "serve", "cli", "memory", "watching", "targets"}
    assert result["watching"]["files"] == 300
    assert result["watching"]["unchanged"]["scans"] == ["incremental"]
    assert result["watching"]["one_file_edited"]["scans"] == ["incremental"]
    assert set(result["targets"]) == {
        "serve_p50_ms",
        "library_p50_ms",
        "idle_watching_rss_mb",
        "watched_unchanged_to_git",
    }
