"""The two bridge processes of ``snapstore demo``, as hidden subcommands, and the sample project.

Bridge A checkpoints the files it is about to change, edits them, and hangs half-way through
rewriting one until the demo kills it. Bridge B, a separate process, finds the checkpoint in the
shared store, shows what changed and restores it.
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import click

from snapstore.cli.context import Settings, pass_settings
from snapstore.cli.parsing import Command
from snapstore.cli.restoring import diff_lines
from snapstore.frontend.words import human_age, human_size
from snapstore.models import SnapshotInfo

MID_EDIT_MARKER = "@mid-edit"
EDITOR_HANG_SECONDS = 120.0

SAMPLE_PROJECT: dict[str, bytes] = {
    "README.md": b"# inventory\n\nA tiny service that counts things.\n",
    "src/app.py": b"from util import total\n\nprint(total([3, 4, 5]))\n",
    "src/util.py": b'def total(items):\n    """Sum of items."""\n    return sum(items)\n',
    "data/config.json": b'{"retries": 3, "region": "eu-west-1"}\n',
    "assets/logo.bin": bytes(range(256)) * 16,
}
CHECKPOINT_PATHS = ["README.md", "src", "data/config.json", "CHANGES.md"]

Fingerprint = dict[str, tuple[int, bytes]]


def build_sample_project(project: Path) -> None:
    """Write the sample project's files under ``project``."""
    for relative, content in SAMPLE_PROJECT.items():
        path = project / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)


def fingerprint(project: Path) -> Fingerprint:
    """Every file under ``project``: relative POSIX path -> (mode bits, bytes)."""
    result: Fingerprint = {}
    for path in sorted(project.rglob("*")):
        info = path.lstat()
        if stat.S_ISREG(info.st_mode):
            relative = path.relative_to(project).as_posix()
            result[relative] = (stat.S_IMODE(info.st_mode), path.read_bytes())
    return result


def compare(expected: Fingerprint, actual: Fingerprint) -> list[str]:
    """How ``actual`` differs from ``expected``, one line per path (empty when identical)."""
    problems = [f"missing {path}" for path in sorted(expected.keys() - actual.keys())]
    problems += [f"unexpected {path}" for path in sorted(actual.keys() - expected.keys())]
    for path in sorted(expected.keys() & actual.keys()):
        if expected[path][1] != actual[path][1]:
            problems.append(f"content differs: {path}")
        elif expected[path][0] != actual[path][0]:
            problems.append(f"mode differs: {path}")
    return problems


def say(message: str) -> None:
    """Report one step to the demo, which relays it."""
    click.echo(message)


def _edit_like_a_bridge(project: Path) -> None:
    """Bridge A's edits: modify one file, delete one, add one, then half-rewrite another."""
    app = project / "src/app.py"
    app.write_bytes(app.read_bytes() + b"print('new feature')\n")
    say("modified src/app.py")
    (project / "data/config.json").unlink()
    say("deleted data/config.json")
    (project / "CHANGES.md").write_bytes(b"# Changes\n\n- new feature\n")
    say("added CHANGES.md")
    with (project / "src/util.py").open("wb") as util:
        util.write(b"def total(items, *, start=0):\n    return sum(it")
        util.flush()
        say("rewriting src/util.py... (half written)")
        click.echo(MID_EDIT_MARKER)
        time.sleep(EDITOR_HANG_SECONDS)


@click.command("_demo-editor", cls=Command, hidden=True)
@click.argument("project", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("session")
@click.argument("name")
@pass_settings
def demo_editor(settings: Settings, project: Path, session: str, name: str) -> None:
    """Bridge A: checkpoint the files it will touch, then edit them until it is killed."""
    info = settings.store(create=True).create(
        session,
        name,
        CHECKPOINT_PATHS,
        base_dir=str(project),
        meta={"bridge": "A", "pid": str(os.getpid())},
    )
    say(
        f"checkpointed {', '.join(CHECKPOINT_PATHS)} as {session}/{name} "
        f"({info.file_count} files, {human_size(info.total_bytes)})"
    )
    _edit_like_a_bridge(project)


def _latest_checkpoint(infos: list[SnapshotInfo]) -> SnapshotInfo:
    """The newest file snapshot in ``infos`` (which are oldest first)."""
    for info in reversed(infos):
        if info.kind == "files":
            return info
    raise click.ClickException("no checkpoint found in the session")


@click.command("_demo-recover", cls=Command, hidden=True)
@click.argument("session")
@pass_settings
def demo_recover(settings: Settings, session: str) -> None:
    """Bridge B: find the session's latest checkpoint, show the damage, and restore it."""
    store = settings.store()
    infos = store.list(session)
    for info in infos:
        owner = f"bridge {info.meta.get('bridge', '?')} (pid {info.meta.get('pid', '?')})"
        say(f"found {info.session}/{info.name}, taken {human_age(info.created_at)} by {owner}")
    latest = _latest_checkpoint(infos)
    label = f"{latest.session}/{latest.name}"
    for line in diff_lines(store.diff(latest.session, latest.name), label, latest.base_dir):
        if line:
            say(line)
    report = store.restore(latest.session, latest.name)
    say(
        f"restored {label}: wrote {', '.join(report.written) or 'nothing'}; "
        f"removed {', '.join(report.removed) or 'nothing'}"
    )
    after = store.diff(latest.session, latest.name)
    say("the project matches the checkpoint again" if not after.changed else "still differs!")
