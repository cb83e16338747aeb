"""``delete``, ``delete-session``, ``sweep``, ``gc`` and ``verify``; corrupt and locked stores."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import portalocker
from helpers.blobs import corrupt_blob, remove_blob
from helpers.cli import Cli, Result, cli_env
from helpers.locks import session_lock_path

from snapstore.frontend.exitcodes import ExitCode


def names(cli: Cli) -> list[str]:
    return [f"{info.session}/{info.name}" for info in cli.store().list()]


def test_delete_needs_yes(cli: Cli, project: Path) -> None:
    cli.snapshot(project, "README.md")
    result = cli.run("delete", "s1", "n1")
    assert result.code == 2
    assert "refusing to delete snapshot s1/n1 without --yes" in result.stderr
    cli.fails("delete", "s1", "n1", code=2, error_type="UsageError")
    assert names(cli) == ["s1/n1"]


def test_delete(cli: Cli, project: Path) -> None:
    cli.snapshot(project, "README.md")
    cli.snapshot(project, "README.md", name="n2")
    assert cli.ok("delete", "s1", "n1", "--yes").stdout.strip() == "deleted s1/n1"
    assert names(cli) == ["s1/n2"]
    assert cli.json("delete", "s1", "n2", "-y") == {"session": "s1", "name": "n2", "deleted": True}
    assert names(cli) == []


def test_delete_missing(cli: Cli, project: Path) -> None:
    cli.snapshot(project, "README.md")
    cli.fails(
        "delete", "s1", "nope", "--yes", code=ExitCode.NOT_FOUND, error_type="SnapshotNotFound"
    )
    document = cli.json("delete", "s1", "nope", "--yes", "--missing-ok")
    assert document["deleted"] is False


def test_delete_session(cli: Cli, project: Path) -> None:
    for name in ("a", "b"):
        cli.snapshot(project, "README.md", name=name)
    cli.snapshot(project, "README.md", session="other", name="c")
    assert cli.run("delete-session", "s1").code == 2
    assert cli.json("delete-session", "s1", "--yes") == {"session": "s1", "deleted": 2}
    assert names(cli) == ["other/c"]
    cli.fails(
        "delete-session", "s1", "--yes", code=ExitCode.NOT_FOUND, error_type="SessionNotFound"
    )
    assert cli.json("delete-session", "s1", "--yes", "--missing-ok")["deleted"] == 0


def test_sweep_by_ttl(cli: Cli, project: Path) -> None:
    cli.snapshot(project, "README.md")
    assert cli.json("sweep", "--ttl", "1h") == {"deleted": [], "dry_run": False}
    time.sleep(0.05)
    dry = cli.json("sweep", "--ttl", "0.01", "--dry-run")
    assert dry == {"deleted": [{"session": "s1", "name": "n1"}], "dry_run": True}
    assert names(cli) == ["s1/n1"]
    assert cli.ok("sweep", "--ttl", "0s", "--yes").stdout.splitlines()[0] == "deleted 1 snapshot"
    assert names(cli) == []


def test_sweep_keep_last(cli: Cli, project: Path) -> None:
    for name in ("old", "mid", "new"):
        cli.snapshot(project, "README.md", name=name)
    deleted = cli.json("sweep", "--keep-last", "1")["deleted"]
    assert sorted(pair["name"] for pair in deleted) == ["mid", "old"]
    assert names(cli) == ["s1/new"]


def test_sweep_removes_expired_snapshots(cli: Cli, project: Path) -> None:
    cli.snapshot(project, "README.md", name="short", ttl=0.01)
    cli.snapshot(project, "README.md", name="long")
    time.sleep(0.05)
    assert cli.json("sweep")["deleted"] == [{"session": "s1", "name": "short"}]


def test_sweep_rejects_bad_arguments(cli: Cli, project: Path) -> None:
    cli.snapshot(project, "README.md")
    cli.fails("sweep", "--ttl", "7 days", code=2, error_type="UsageError")
    cli.fails("sweep", "--keep-last", "-1", code=2, error_type="UsageError")


def test_gc_frees_unreferenced_blobs(cli: Cli, project: Path) -> None:
    cli.snapshot(project, "data")
    cli.store().delete("s1", "n1")
    dry = cli.json("gc", "--dry-run")
    # data/blob.bin and the two directory listings of the snapshot (its base, data/)
    assert dry["dry_run"] is True and dry["blobs_deleted"] == 3
    assert dry["bytes_freed"] > 0
    document = cli.json("gc")
    assert set(document) >= {"blobs_deleted", "bytes_freed", "temp_files_removed", "skipped"}
    assert document["blobs_deleted"] == 3 and document["skipped"] is False
    assert document["bytes_freed"] == dry["bytes_freed"]
    assert cli.json("gc")["blobs_deleted"] == 0
    assert cli.ok("gc").stdout.startswith(
        "freed 0 B: deleted 0 unreferenced blobs and 0 temp files"
    )


def test_verify_ok(cli: Cli, project: Path) -> None:
    cli.snapshot(project)
    # four files and three directory listings (the base, src/, data/)
    assert cli.ok("verify").stdout.startswith("checked 1 snapshot and 7 blobs: ok")
    document = cli.json("verify", "--deep")
    assert document["ok"] is True and document["problems"] == []
    assert set(document) >= {"ok", "problems", "garbage", "snapshots_checked", "blobs_checked"}


def _manifest(root: Path) -> Path:
    (manifest,) = root.glob("sessions/*/*.manifest")
    return manifest


def test_corrupt_manifest(cli: Cli, project: Path) -> None:
    cli.snapshot(project, "README.md")
    cli.snapshot(project, "README.md", session="good")
    (broken,) = [path for path in cli.root.glob("sessions/s1-*/*.manifest")]
    broken.write_bytes(b"\x00garbage\xff" * 10)
    cli.fails("show", "s1", "n1", code=ExitCode.DAMAGED, error_type="CorruptManifestError")
    listed = cli.run("--json", "list")
    assert listed.code == 0
    assert [info["session"] for info in listed.json()["snapshots"]] == ["good"]
    assert listed.stderr.startswith("warning: ") and len(listed.stderr.splitlines()) == 1
    gc = cli.run("-q", "gc")
    assert gc.code == ExitCode.DAMAGED, gc
    assert gc.stderr.startswith("error: gc skipped: 1 corrupt manifest")
    assert "freed" not in gc.stdout
    gc_document = cli.json("gc", code=ExitCode.DAMAGED)
    assert gc_document["skipped"] is True and "corrupt manifest" in gc_document["reason"]
    verified = cli.run("verify")
    assert verified.code == ExitCode.DAMAGED
    assert "problem:" in verified.stdout
    assert verified.stderr.startswith("error: the store is damaged")
    document = cli.json("verify", code=ExitCode.DAMAGED)
    assert document["ok"] is False and len(document["problems"]) == 1


def _digest(cli: Cli, path: str) -> bytes:
    entry = cli.store().get("s1", "n1").entry(path)
    assert entry is not None and entry.digest is not None
    return entry.digest


def test_corrupt_blob_is_found_by_deep_verify(cli: Cli, project: Path) -> None:
    cli.snapshot(project, "README.md")
    corrupt_blob(cli.store(), _digest(cli, "README.md"))
    assert cli.json("verify", "--deep", code=ExitCode.DAMAGED)["ok"] is False
    cli.fails("cat", "s1", "n1", "README.md", code=ExitCode.DAMAGED, error_type="CorruptBlobError")


def test_missing_blob_is_found_by_verify(cli: Cli, project: Path) -> None:
    cli.snapshot(project, "README.md")
    remove_blob(cli.store(), _digest(cli, "README.md"))
    problems = cli.json("verify", code=ExitCode.DAMAGED)["problems"]
    assert len(problems) == 1


def test_unknown_format_is_refused(cli: Cli, project: Path) -> None:
    cli.snapshot(project, "README.md")
    (cli.root / "FORMAT").write_text("snapstore 99\n")
    cli.fails("list", error_type="FormatError")


def test_locked_store_times_out(cli: Cli, project: Path) -> None:
    cli.snapshot(project, "README.md")
    lock_path = session_lock_path(cli.root, "s1")
    with portalocker.Lock(str(lock_path), mode="a", flags=portalocker.LockFlags.EXCLUSIVE):
        started = time.monotonic()
        error = cli.fails(
            "--lock-timeout",
            "0.2",
            "delete",
            "s1",
            "n1",
            "--yes",
            code=ExitCode.LOCKED,
            error_type="LockTimeout",
        )
        assert time.monotonic() - started < 10
        assert "session 's1'" in error["message"]
        result = cli.run(
            "--lock-timeout",
            "0.2",
            "create",
            "s1",
            "--name",
            "n2",
            "README.md",
            "--base",
            str(project),
        )
        assert result.code == ExitCode.LOCKED
        assert result.stderr.startswith("error: could not take lock")
        assert len(result.stderr.splitlines()) == 1
    assert names(cli) == ["s1/n1"]


def test_gc_that_cannot_take_the_lock_says_so_and_exits_locked(cli: Cli, project: Path) -> None:
    cli.snapshot(project, "data")
    cli.store().delete("s1", "n1")
    lock_path = cli.root / "locks" / "gc"
    with portalocker.Lock(str(lock_path), mode="a", flags=portalocker.LockFlags.SHARED):
        result = cli.run("--lock-timeout", "0.2", "gc")
        assert result.code == ExitCode.LOCKED, result
        assert "freed" not in result.stdout
        assert result.stderr.startswith("error: gc skipped: the store is busy: could not take")
        document = cli.json("--lock-timeout", "0.2", "gc", code=ExitCode.LOCKED)
    assert document["skipped"] is True and "could not take lock 'gc'" in document["reason"]
    assert document["blobs_deleted"] == 0
    assert cli.json("gc")["blobs_deleted"] == 3


FAIL_SECOND_UNLINK = """
import sys
from snapstore.fs.seam import FileSystem
from snapstore.cli import main
from tests.helpers.locks import session_lock_path

calls = []
real_unlink = FileSystem.unlink

def unlink(self, path, *args, **kwargs):
    if "/sessions/" in path:
        calls.append(path)
        if len(calls) == 2:
            raise OSError(5, "Input/output error (injected)", path)
    return real_unlink(self, path, *args, **kwargs)

FileSystem.unlink = unlink
main(sys.argv[1:])
"""


def _run_failing_second_delete(cli: Cli, *args: str) -> Result:
    """Run the command line in a process whose second manifest unlink fails with EIO."""
    completed = subprocess.run(
        [sys.executable, "-c", FAIL_SECOND_UNLINK, "--root", str(cli.root), *args],
        cwd=cli.cwd,
        env=cli_env(),
        capture_output=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=False,
    )
    return Result(completed.returncode, completed.stdout, completed.stderr.decode())


def test_delete_session_that_stops_part_way_is_a_partial_success(cli: Cli, project: Path) -> None:
    for name in ("a", "b", "c"):
        cli.snapshot(project, "README.md", name=name)
    result = _run_failing_second_delete(cli, "--json", "delete-session", "s1", "--yes")
    assert result.code == ExitCode.PARTIAL, result
    error = result.json()["error"]
    assert error["type"] == "PartialFailure"
    assert "1 of 3 snapshots were gone" in error["message"]
    assert "Input/output error (injected)" in error["message"]
    assert result.stderr.startswith("error: stopped part-way: 1 of 3 snapshots")
    assert len(names(cli)) == 2


def test_sweep_that_stops_part_way_is_a_partial_success(cli: Cli, project: Path) -> None:
    for name in ("a", "b", "c"):
        cli.snapshot(project, "README.md", name=name)
    result = _run_failing_second_delete(cli, "sweep", "--keep-last", "0", "--yes")
    assert result.code == ExitCode.PARTIAL, result
    assert "1 of 3 snapshots were gone" in result.stderr
    assert len(names(cli)) == 2


def test_delete_session_that_fails_before_deleting_anything_keeps_its_error(
    cli: Cli, project: Path
) -> None:
    cli.snapshot(project, "README.md", name="a")
    cli.snapshot(project, "README.md", name="b")
    lock_path = session_lock_path(cli.root, "s1")
    with portalocker.Lock(str(lock_path), mode="a", flags=portalocker.LockFlags.EXCLUSIVE):
        error = cli.fails(
            "--lock-timeout", "0.1", "delete-session", "s1", "-y", code=ExitCode.LOCKED
        )
    assert error["type"] == "LockTimeout"
    assert len(names(cli)) == 2


def test_gc_says_when_it_merged_packs(cli: Cli, project: Path) -> None:
    for round_ in range(2):
        (project / f"round-{round_}.txt").write_text(f"new content {round_}\n" * 50)
        cli.snapshot(project, f"round-{round_}.txt", name=f"n{round_}")  # two packs, same size
    dry = cli.ok("gc", "--dry-run").stdout.strip()
    assert dry.endswith("; would replace 2 packs with 1 new pack"), dry
    out = cli.ok("gc").stdout.strip()
    assert out.endswith("; replaced 2 packs with 1 new pack"), out
    assert (
        out.split(";")[0].replace("freed", "would free").replace("deleted", "would delete")
        == dry.split(";")[0]
    )
    assert out.startswith("freed ") and ": deleted 0 unreferenced blobs" in out, out
    assert cli.ok("gc").stdout.strip() == "freed 0 B: deleted 0 unreferenced blobs and 0 temp files"
