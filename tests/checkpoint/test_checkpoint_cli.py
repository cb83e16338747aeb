"""``snapstore checkpoint list|inspect|reset``, run as real processes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from helpers.checkpoints import run_snapstore, write_lines

from snapstore import SnapStore
from snapstore.checkpoint import CHECKPOINT_SESSION, Checkpointer, FileCheckpointStore, LinesSource
from snapstore.frontend.exitcodes import ExitCode


def _read_some(path: Path, store: Any, key: str, count: int, every: int = 4) -> None:
    """Run a lines pipeline on ``path`` and stop after ``count`` records."""
    records = Checkpointer(store, key, every=every).iterate(LinesSource(path))
    for _ in range(count):
        next(records)
    records.close()


def _store_with_checkpoints(tmp_path: Path) -> tuple[Path, Path]:
    """A root with a lines checkpoint ``feed`` (mid-file) and a direct one ``api``."""
    root, path = tmp_path / "root", tmp_path / "in.txt"
    write_lines(path, 10)
    store = FileCheckpointStore(SnapStore(root, durable=False))
    _read_some(path, store, "feed", count=6)
    store.save("api", {"cursor": "c-17", "etag": b"\x01\x02"})
    return root, path


def test_cli_list(tmp_path: Path) -> None:
    root, _ = _store_with_checkpoints(tmp_path)
    result = run_snapstore(root, "checkpoint", "list")
    assert result.returncode == 0, result.stderr
    header, *rows = result.stdout.splitlines()
    assert header.split() == ["KEY", "SAVED", "SOURCE", "EVERY", "POSITION"]
    assert [row.split()[0] for row in rows] == ["api", "feed"]
    assert '{"offset":65,"records":5}' in rows[1]
    listed = json.loads(run_snapstore(root, "checkpoint", "list", "--json").stdout)
    by_key = {item["key"]: item for item in listed["checkpoints"]}
    assert by_key["api"]["value"] == {"cursor": "c-17", "etag": "0102"}
    assert by_key["feed"]["run"]["every"] == 4


def test_cli_list_marks_a_corrupt_checkpoint(tmp_path: Path) -> None:
    root, _ = _store_with_checkpoints(tmp_path)
    SnapStore(root, durable=False).put_state(CHECKPOINT_SESSION, "broken", [1, 2])
    result = run_snapstore(root, "checkpoint", "list")
    assert result.returncode == 0, result.stderr
    assert any(line.split()[:2] == ["broken", "CORRUPT"] for line in result.stdout.splitlines())
    listed = json.loads(run_snapstore(root, "--json", "checkpoint", "list").stdout)
    assert "is corrupt" in next(c for c in listed["checkpoints"] if c["key"] == "broken")["error"]


def test_cli_inspect(tmp_path: Path) -> None:
    root, path = _store_with_checkpoints(tmp_path)
    result = run_snapstore(root, "checkpoint", "inspect", "feed")
    assert result.returncode == 0, result.stderr
    assert f"seek to byte 65 of {path}" in result.stdout
    assert "at most 3 records" in result.stdout
    document = json.loads(run_snapstore(root, "checkpoint", "inspect", "feed", "--json").stdout)
    assert document["value"] == {"offset": 65, "records": 5}
    assert document["reprocess_bound"] == 3 and document["granularity"] == "one line"


def test_cli_inspect_of_a_missing_or_corrupt_key_fails_in_one_line(tmp_path: Path) -> None:
    root, _ = _store_with_checkpoints(tmp_path)
    missing = run_snapstore(root, "checkpoint", "inspect", "nope")
    assert missing.returncode == ExitCode.NOT_FOUND
    assert missing.stderr.strip() == "error: no checkpoint saved under key 'nope'"
    SnapStore(root, durable=False).put_state(CHECKPOINT_SESSION, "broken", "junk")
    corrupt = run_snapstore(root, "checkpoint", "inspect", "broken")
    assert (
        corrupt.returncode == ExitCode.DAMAGED
        and "checkpoint 'broken' is corrupt" in corrupt.stderr
    )
    assert len(corrupt.stderr.strip().splitlines()) == 1


def test_cli_reset_needs_yes_then_deletes(tmp_path: Path) -> None:
    root, _ = _store_with_checkpoints(tmp_path)
    refused = run_snapstore(root, "checkpoint", "reset", "feed")
    assert refused.returncode == 2 and "without --yes" in refused.stderr
    assert FileCheckpointStore(root).load("feed") is not None
    result = run_snapstore(root, "checkpoint", "reset", "feed", "--yes", "--json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["deleted"] is True and document["previous"] == {"offset": 65, "records": 5}
    assert FileCheckpointStore(root).keys() == ["api"]
    again = run_snapstore(root, "checkpoint", "reset", "feed", "--yes")
    assert (
        again.returncode == ExitCode.NOT_FOUND
        and "no checkpoint saved under key 'feed'" in again.stderr
    )


def test_cli_reset_removes_a_corrupt_checkpoint(tmp_path: Path) -> None:
    root, _ = _store_with_checkpoints(tmp_path)
    SnapStore(root, durable=False).put_state(CHECKPOINT_SESSION, "broken", "junk")
    result = run_snapstore(root, "checkpoint", "reset", "broken", "--yes")
    assert result.returncode == 0, result.stderr
    assert FileCheckpointStore(root).keys() == ["api", "feed"]
