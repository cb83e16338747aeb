"""Commands that remove or check data: delete, delete-session, sweep, gc and verify."""

from __future__ import annotations

import sys

import click

from snapstore.cli.context import Settings, json_option, pass_settings
from snapstore.cli.output import (
    align_rows,
    count,
    human_size,
    print_error,
    print_note,
    stderr_is_terminal,
)
from snapstore.cli.params import DURATION
from snapstore.errors import SnapshotNotFound


class SessionNotFound(click.ClickException):
    """``delete-session`` found no snapshot in the session."""

    def __init__(self, session: str) -> None:
        super().__init__(f"no snapshots in session {session!r}")


def confirm(settings: Settings, yes: bool, action: str) -> None:
    """Go ahead only with ``--yes`` (or a ``y`` typed at a terminal); else a usage error."""
    if yes:
        return
    if not settings.json and sys.stdin.isatty() and stderr_is_terminal():
        if click.confirm(f"{action}?", err=True):
            return
        raise click.Abort()
    raise click.UsageError(f"refusing to {action} without --yes")


yes_option = click.option("--yes", "-y", is_flag=True, help="Confirm the deletion.")
missing_ok_option = click.option(
    "--missing-ok", is_flag=True, help="Succeed even if there is nothing to delete."
)


@click.command()
@click.argument("session")
@click.argument("name")
@yes_option
@missing_ok_option
@json_option
@pass_settings
def delete(settings: Settings, session: str, name: str, yes: bool, missing_ok: bool) -> None:
    """Delete snapshot NAME of SESSION (its blobs are freed by the next gc)."""
    confirm(settings, yes, f"delete snapshot {session}/{name}")
    deleted = settings.store().delete(session, name)
    if not deleted and not missing_ok:
        raise SnapshotNotFound(session, name)
    line = f"deleted {session}/{name}" if deleted else f"{session}/{name} did not exist"
    settings.emit({"session": session, "name": name, "deleted": deleted}, [line], info=True)


@click.command("delete-session")
@click.argument("session")
@yes_option
@missing_ok_option
@json_option
@pass_settings
def delete_session(settings: Settings, session: str, yes: bool, missing_ok: bool) -> None:
    """Delete every snapshot of SESSION."""
    confirm(settings, yes, f"delete every snapshot of session {session}")
    deleted = settings.store().delete_session(session)
    if not deleted and not missing_ok:
        raise SessionNotFound(session)
    line = f"deleted {count(deleted, 'snapshot')} of session {session}"
    settings.emit({"session": session, "deleted": deleted}, [line], info=True)


@click.command()
@click.option("--ttl", type=DURATION, help="Delete snapshots older than this (90s, 15m, 24h, 7d).")
@click.option(
    "--keep-last",
    type=click.IntRange(min=0),
    help="Keep only the N newest snapshots of each session.",
)
@click.option("--dry-run", is_flag=True, help="Report what would be deleted; delete nothing.")
@json_option
@pass_settings
def sweep(settings: Settings, ttl: float | None, keep_last: int | None, dry_run: bool) -> None:
    """Delete expired snapshots, and those beyond --ttl or --keep-last."""
    report = settings.store().sweep(ttl=ttl, keep_last=keep_last, dry_run=dry_run)
    pairs = [{"session": session, "name": name} for session, name in report.deleted]
    verb = "would delete" if dry_run else "deleted"
    lines = [f"{verb} {count(len(pairs), 'snapshot')}"]
    lines += ["  " + line for line in align_rows([[p["session"], p["name"]] for p in pairs])]
    settings.emit({"deleted": pairs, "dry_run": dry_run}, lines, info=not dry_run)


@click.command()
@click.option("--dry-run", is_flag=True, help="Report what would be freed; delete nothing.")
@json_option
@pass_settings
def gc(settings: Settings, dry_run: bool) -> None:
    """Free blobs no snapshot references, and stale temp files."""
    report = settings.store().gc(dry_run=dry_run)
    if report.skipped and not settings.json:
        print_note(f"warning: gc skipped: {report.reason or 'the store is busy'}")
    verb = "would free" if dry_run else "freed"
    line = (
        f"{verb} {count(report.blobs_deleted, 'blob')} ({human_size(report.bytes_freed)}) "
        f"and {count(report.temp_files_removed, 'temp file')}"
    )
    settings.emit({**report.to_dict(), "dry_run": dry_run}, [line], info=not dry_run)


@click.command()
@click.option("--deep", is_flag=True, help="Re-hash every blob, not only check that it exists.")
@json_option
@pass_settings
@click.pass_context
def verify(ctx: click.Context, settings: Settings, deep: bool) -> None:
    """Check every snapshot and blob; exit 1 when committed data is damaged."""
    with settings.progress("verifying") as progress:
        report = settings.store().verify(deep=deep, progress=progress)
    status = "ok" if report.ok else count(len(report.problems), "problem")
    lines = [
        f"checked {count(report.snapshots_checked, 'snapshot')} and "
        f"{count(report.blobs_checked, 'blob')}"
        f"{' (deep)' if deep else ''}: {status}",
        *(f"  problem: {problem}" for problem in report.problems),
    ]
    if report.garbage:
        lines.append(f"{count(len(report.garbage), 'leftover')} that gc would clean:")
        lines += [f"  {item}" for item in report.garbage]
    settings.emit(report.to_dict(), lines, info=report.ok)
    if not report.ok:
        print_error(f"the store is damaged: {count(len(report.problems), 'problem')}")
        ctx.exit(1)
