"""``snapstore demo``: two bridges share a store; one is killed mid-edit, the other restores."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

import snapstore
from snapstore import SnapStore
from snapstore.cli.context import Settings, finish, pass_settings
from snapstore.cli.demo_bridges import (
    MID_EDIT_MARKER,
    SAMPLE_PROJECT,
    build_sample_project,
    compare,
    fingerprint,
)
from snapstore.cli.output import print_note
from snapstore.cli.parsing import Command
from snapstore.frontend.exitcodes import ExitCode

SESSION = "demo"
CHECKPOINT = "before-edit"
CHILD_TIMEOUT = 120.0


class DemoError(click.ClickException):
    """A bridge process of the demo failed in a way the demo cannot narrate past."""


@dataclass
class Narrator:
    """Prints each step as it happens (human mode) and keeps them all for ``--json``."""

    live: bool
    steps: list[dict[str, str]] = field(default_factory=list)

    def step(self, actor: str, message: str) -> None:
        """Record (and maybe print) one step told by ``actor``."""
        self.steps.append({"actor": actor, "message": message})
        if self.live:
            click.echo(f"{'[' + actor + ']':<11}{message}")


def _child_env() -> dict[str, str]:
    """The environment for bridge processes: this snapstore importable, output unbuffered."""
    env = dict(os.environ)
    package_parent = str(Path(snapstore.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_parent, env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _bridge_command(settings: Settings, root: Path, *args: str) -> list[str]:
    """``python -m snapstore`` with this run's store, running one hidden bridge subcommand."""
    options = ["--root", str(root), "--lock-timeout", str(settings.lock_timeout)]
    return [sys.executable, "-m", "snapstore", *options, *args]


def _run_editor(command: Sequence[str], narrator: Narrator) -> None:
    """Start bridge A, relay its steps, and SIGKILL it once it is half-way through an edit."""
    with subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_child_env(),
    ) as editor:
        narrator.step("bridge A", f"started as pid {editor.pid}")
        watchdog = threading.Timer(CHILD_TIMEOUT, editor.kill)
        watchdog.start()
        try:
            _relay_until_mid_edit(editor, narrator)
        finally:
            watchdog.cancel()
            editor.kill()
    signal_name = "SIGKILL" if os.name == "posix" else "TerminateProcess"
    narrator.step("demo", f"killed bridge A with {signal_name} in the middle of an edit")


def _relay_until_mid_edit(editor: subprocess.Popen[str], narrator: Narrator) -> None:
    """Relay bridge A's steps until it says it is mid-edit; fail if it exits before that."""
    assert editor.stdout is not None and editor.stderr is not None
    for line in editor.stdout:
        if line.strip() == MID_EDIT_MARKER:
            return
        narrator.step("bridge A", line.rstrip("\n"))
    errors = editor.stderr.read().strip()
    raise DemoError(f"bridge A exited before its edit (code {editor.wait()}): {errors}")


def _run_recover(command: Sequence[str], narrator: Narrator) -> None:
    """Run bridge B to completion and relay its steps."""
    with subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_child_env(),
    ) as recover:
        narrator.step("bridge B", f"started as pid {recover.pid}")
        try:
            output, errors = recover.communicate(timeout=CHILD_TIMEOUT)
        except subprocess.TimeoutExpired:
            recover.kill()
            raise DemoError(f"bridge B did not finish within {CHILD_TIMEOUT:g}s") from None
    for line in output.splitlines():
        narrator.step("bridge B", line)
    if recover.returncode != 0:
        raise DemoError(f"bridge B failed (code {recover.returncode}): {errors.strip()}")


def _check_outcome(
    settings: Settings, root: Path, project: Path, expected: dict[str, Any], narrator: Narrator
) -> dict[str, Any]:
    """Compare the project with its checkpointed state and verify the store; say how it went."""
    mismatches = compare(expected, fingerprint(project))
    if mismatches:
        narrator.step("demo", "project differs from the checkpoint: " + "; ".join(mismatches))
    else:
        count = len(expected)
        narrator.step("demo", f"project is byte-for-byte back to the checkpoint ({count} files)")
    report = SnapStore(root, lock_timeout=settings.lock_timeout).verify(deep=True)
    status = "ok" if report.ok else "problems: " + "; ".join(report.problems)
    narrator.step("demo", f"verify --deep: {status} ({report.snapshots_checked} snapshots)")
    ok = report.ok and not mismatches
    return {"ok": ok, "mismatches": mismatches, "verify": report.to_dict()}


def run_demo(settings: Settings, workdir: Path, root: Path, narrator: Narrator) -> dict[str, Any]:
    """The whole demo in ``workdir`` with the store at ``root``; returns its JSON document."""
    project = workdir / "project"
    build_sample_project(project)
    expected = fingerprint(project)
    narrator.step("demo", f"sample project with {len(SAMPLE_PROJECT)} files in {project}")
    narrator.step("demo", f"shared store in {root}")
    editor = _bridge_command(settings, root, "_demo-editor", str(project), SESSION, CHECKPOINT)
    _run_editor(editor, narrator)
    _run_recover(_bridge_command(settings, root, "_demo-recover", SESSION), narrator)
    outcome = _check_outcome(settings, root, project, expected, narrator)
    narrator.step("demo", "demo passed" if outcome["ok"] else "demo FAILED")
    return {"root": str(root), "project": str(project), **outcome, "steps": narrator.steps}


@click.command(cls=Command)
@click.option("--keep", is_flag=True, help="Keep the temporary project and store for a look.")
@pass_settings
def demo(settings: Settings, keep: bool) -> None:
    """Show the store at work: a bridge is killed mid-edit and another one restores its files.

    Runs in a temporary folder (and a temporary store, unless --root is given) and exits 1 if
    the project does not come back byte for byte.
    """
    if settings.root.startswith("s3://"):
        raise click.UsageError("the demo runs on a local store: give --root a directory")
    workdir = Path(tempfile.mkdtemp(prefix="snapstore-demo-"))
    root = Path(settings.root).resolve() if settings.root_given else workdir / "store"
    try:
        document = run_demo(settings, workdir, root, Narrator(live=not settings.json))
    finally:
        if keep:
            print_note(f"kept the demo files in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    if settings.json:
        settings.emit({**document, "kept": keep}, [])
    if not document["ok"]:
        finish(ExitCode.ERROR)
