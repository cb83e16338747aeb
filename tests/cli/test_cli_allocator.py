"""A one-shot ``create`` keeps the buffers it frees for reuse instead of faulting fresh pages
in for every block (``snapstore.cli.allocator``); a long-running process keeps glibc's
defaults."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from helpers.cli import REPO, Cli, cli_env

from snapstore.cli import allocator

FAULTS_OF_FREED_BUFFERS = """
import resource, sys
from snapstore.cli.allocator import keep_freed_memory
if sys.argv[1] == "keep" and not keep_freed_memory():
    print("unsupported")
    raise SystemExit
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for round in range(32):
    held = [bytearray(1 << 20) for _ in range(6)]  # zeroed: every page touched, as a read
    del held  # into it would; then freed, as the blocks of a pack are once written
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(mode: str) -> int | None:
    """Page faults of 32 rounds of six buffers of 1 MiB, made then freed, in a new process."""
    out = subprocess.run(
        [sys.executable, "-c", FAULTS_OF_FREED_BUFFERS, mode],
        env=cli_env(),
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()
    return None if out == "unsupported" else int(out)


def test_freed_buffers_are_reused_without_new_page_faults() -> None:
    kept = _faults("keep")
    if kept is None:
        pytest.skip("this C library has no mallopt (not glibc)")
    default = _faults("default")
    assert default is not None
    pages_per_round = (6 << 20) // 4096
    assert default >= 4 * pages_per_round, "glibc's defaults no longer fault buffers in again"
    assert kept < 2 * pages_per_round, f"{kept} faults: freed buffers were not reused"


def test_the_create_command_asks_for_it_and_the_library_does_not(cli: Cli, project: Path) -> None:
    code = (
        "import sys\n"
        "from snapstore.cli import allocator\n"
        "calls = []\n"
        "allocator.keep_freed_memory = lambda: calls.append(1) or True\n"
        "from snapstore import SnapStore\n"
        f"SnapStore({str(cli.root)!r}).create('lib', 'n', ['.'], base_dir={str(project)!r})\n"
        "assert calls == [], 'the library changed the allocator'\n"
        "from snapstore.cli.app import run\n"
        f"code = run(['--root', {str(cli.root)!r}, 'create', 's', '.', '--base', "
        f"{str(project)!r}])\n"
        "assert code == 0 and calls == [1], (code, calls)\n"
    )
    subprocess.run([sys.executable, "-c", code], env=cli_env(), cwd=REPO, check=True, timeout=60)


def test_without_mallopt_nothing_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    import ctypes

    class NoMallopt:
        def __init__(self, name: object) -> None:
            pass

    monkeypatch.setattr(ctypes, "CDLL", NoMallopt)
    assert allocator.keep_freed_memory() is False
