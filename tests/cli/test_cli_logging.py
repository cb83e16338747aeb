"""``-v``, ``-vv`` and ``--debug`` show the library's log records on stderr; nothing else does."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import portalocker
import pytest
from helpers.cli import Cli, cli_env
from helpers.locks import session_lock_path


def _many_small_files(project: Path, count: int = 40) -> None:
    """Enough small files that a snapshot stores them in a pack."""
    for index in range(count):
        (project / f"small-{index:02}.txt").write_text(f"small file {index}\n")


def _garbage_pack(cli: Cli, project: Path) -> None:
    _many_small_files(project)
    cli.snapshot(project)
    cli.store().delete("s1", "n1")


def test_without_verbose_gc_logs_nothing(cli: Cli, project: Path) -> None:
    _garbage_pack(cli, project)
    result = cli.run("gc")
    assert result.code == 0, result
    assert result.stderr == ""


@pytest.mark.parametrize("where", ["before", "after"])
def test_verbose_shows_what_gc_deleted(cli: Cli, project: Path, where: str) -> None:
    _garbage_pack(cli, project)
    result = cli.run("-v", "gc") if where == "before" else cli.run("gc", "-v")
    assert result.code == 0, result
    assert "info snapstore.maintenance.gcsteps: deleted pack " in result.stderr
    assert "unreferenced" in result.stderr
    assert "debug " not in result.stderr
    assert result.stdout.startswith("freed ")


@pytest.mark.parametrize("flags", [("-vv",), ("-v", "-v"), ("--debug",)])
def test_debug_records_with_two_v_or_debug(cli: Cli, project: Path, flags: tuple[str, ...]) -> None:
    cli.snapshot(project, "README.md")
    result = cli.run("delete", "s1", "n1", "-y", *flags)
    assert result.code == 0, result
    assert "debug snapstore.repo.catalog: removed manifest " in result.stderr
    quiet = cli.run("state", "set", "etl", "cursor", "1")
    assert quiet.code == 0 and quiet.stderr == ""


def test_verbose_reports_a_new_store(cli: Cli, project: Path) -> None:
    result = cli.run("create", "s1", "--name", "n1", "README.md", "--base", str(project), "-v")
    assert result.code == 0, result
    assert f"info snapstore.backend.layout: created a new store at {cli.root}" in result.stderr


def test_debug_shows_waiting_for_a_lock(cli: Cli, project: Path) -> None:
    cli.snapshot(project, "README.md")
    command = [
        sys.executable,
        "-m",
        "snapstore",
        "--root",
        str(cli.root),
        "--lock-timeout",
        "30",
        "delete",
        "s1",
        "n1",
        "-y",
        "--debug",
    ]
    lock_path = session_lock_path(cli.root, "s1")
    with portalocker.Lock(str(lock_path), mode="a", flags=portalocker.LockFlags.EXCLUSIVE):
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli_env(), cwd=cli.cwd
        )
        assert process.stderr is not None
        before = b""
        while b"waiting for lock" not in before:  # held until the command says it waits
            line = process.stderr.readline()
            assert line, "the command ended without waiting for the lock"
            before += line
    stdout, rest = process.communicate(timeout=60)
    assert process.returncode == 0, before + rest
    assert stdout.decode().strip() == "deleted s1/n1"
    text = (before + rest).decode()
    assert "debug snapstore.backend.filelock: waiting for lock \"session 's1'\" (exclusive)" in text
    assert "debug snapstore.backend.filelock: took lock \"session 's1'\" (exclusive) after " in text
