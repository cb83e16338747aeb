"""Commands that compare snapshots and directories and put snapshots back: ``diff``,
``restore`` and ``undo``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from snapstore.cli.completion import complete_session, snapshot_names
from snapstore.cli.context import Settings, pass_settings
from snapstore.cli.output import align_rows, capped_rows, render_table
from snapstore.cli.parsing import Command
from snapstore.frontend import shapes
from snapstore.frontend.words import count
from snapstore.models import DiffReport, RestoreReport

if TYPE_CHECKING:
    from snapstore.patch import Patch

PATHS_SHOWN = 20
"""Paths of each kind (written, removed; add, modify, remove) printed without ``--list``."""

list_option = click.option(
    "--list",
    "list_all",
    is_flag=True,
    help=f"Print every path (by default the first {PATHS_SHOWN} of each kind).",
)


def _target_text(settings: Settings, session: str, name: str, target: Path | None) -> str:
    """The directory a diff or restore works on: ``--target``, else the snapshot's base dir."""
    if target is not None:
        return str(target)
    return settings.store().get(session, name).info.base_dir


def diff_lines(
    report: DiffReport, label: str, target: str, limit: int | None = PATHS_SHOWN
) -> list[str]:
    """Human output of ``diff`` of a snapshot and a directory: a summary line, then a row per
    path that changed from the snapshot to the directory (at most ``limit`` of each kind)."""
    if not report.changed:
        return [f"{target} matches {label}"]
    return _change_lines(report, label, target, limit)


def snapshot_diff_lines(
    report: DiffReport, old: str, new: str, limit: int | None = PATHS_SHOWN
) -> list[str]:
    """Human output of ``diff`` of two snapshots: a summary line, then a row per path that
    changed from ``old`` to ``new`` (at most ``limit`` of each kind)."""
    if not report.changed:
        return [f"{new} matches {old}"]
    return _change_lines(report, old, new, limit)


def _change_lines(report: DiffReport, old: str, new: str, limit: int | None) -> list[str]:
    summary = (
        f"from {old} to {new}: added {len(report.added)}, modified {len(report.modified)}, "
        f"removed {len(report.removed)}"
    )
    groups = [("added", report.added), ("modified", report.modified), ("removed", report.removed)]
    return [summary, "", *render_table(["CHANGE", "PATH"], capped_rows(groups, limit))]


def stat_lines(patch: Patch) -> list[str]:
    """``git diff --stat``: a line per file with its count of changed lines as ``+`` and
    ``-``, then the totals."""
    if not patch.files:
        return []
    width = max(len(file.path) for file in patch.files)
    lines = []
    for file in patch.files:
        if file.binary or file.too_large:
            what = "Bin" if file.binary else "Large"
            lines.append(
                f" {file.path:<{width}} | {what} {file.old_size or 0} -> {file.new_size or 0} bytes"
            )
            continue
        changed = file.additions + file.deletions
        bar = "+" * min(file.additions, 40) + "-" * min(file.deletions, 40)
        lines.append(f" {file.path:<{width}} | {changed:>4} {bar}")
    added = sum(file.additions for file in patch.files)
    deleted = sum(file.deletions for file in patch.files)
    lines.append(
        f" {count(len(patch.files), 'file')} changed, {count(added, 'insertion')}(+), "
        f"{count(deleted, 'deletion')}(-)"
    )
    return lines


@click.command(cls=Command)
@click.argument("session", shell_complete=complete_session)
@click.argument("name", shell_complete=snapshot_names("files"))
@click.argument("other", required=False, shell_complete=snapshot_names("files"))
@click.option(
    "--target",
    type=click.Path(file_okay=False, path_type=Path),
    metavar="DIR",
    help="Compare NAME with this directory instead of its base dir.",
)
@click.option(
    "--patch", "-p", "show_patch", is_flag=True, help="Print the unified diff of the text files."
)
@click.option("--stat", "show_stat", is_flag=True, help="Print the lines changed per file.")
@list_option
@pass_settings
def diff(
    settings: Settings,
    session: str,
    name: str,
    other: str | None,
    target: Path | None,
    show_patch: bool,
    show_stat: bool,
    list_all: bool,
) -> None:
    """Show what changed from snapshot NAME to its base dir (or --target), or to OTHER.

    Reads as git diff does: 'added' is in the directory (or OTHER) and not in NAME. Nothing
    is written. NAME and OTHER may be latest, latest~N or the start of one snapshot's name.
    Prints the first 20 paths of each kind of change (--list: all; --json: all); --patch
    prints the unified diff instead, --stat the lines changed per file.
    """
    if other is not None and target is not None:
        raise click.UsageError(
            "--target compares a snapshot with a directory: give OTHER or --target, not both"
        )
    store = settings.store()
    name = settings.snapshot_name(session, name)
    limit = None if list_all else PATHS_SHOWN
    target_text = ""
    if other is not None:
        other = settings.snapshot_name(session, other)
        report = store.diff(session, name, other)
        lines = snapshot_diff_lines(report, f"{session}/{name}", f"{session}/{other}", limit)
        document = shapes.snapshots_diff_document(session, name, other, report)
    else:
        target_text = _target_text(settings, session, name, target)
        report = store.diff(session, name, target=target_text)
        lines = diff_lines(report, f"{session}/{name}", target_text, limit)
        document = shapes.diff_document(session, name, target_text, report)
    if show_patch or show_stat:
        patch = store.patch(session, name, other, target=target_text or None, max_bytes=None)
        document["patch"] = shapes.patch_document(patch)
        lines = stat_lines(patch) if show_stat else []
        if show_patch:
            lines += ([""] if lines else []) + patch.text.splitlines()
    settings.emit(document, lines)


def restore_lines(
    report: RestoreReport, session: str, what: str, limit: int | None = PATHS_SHOWN
) -> list[str]:
    """Human output of ``restore`` and ``undo`` (``what``: ``restore of S/N``, ``undo of S``):
    a summary line, then the written, removed and left-alone paths (at most ``limit`` of
    each), then where the replaced files were kept."""
    write, remove = ("would write", "would remove") if report.dry_run else ("wrote", "removed")
    prefix = "dry run: " if report.dry_run else ""
    summary = (
        f"{prefix}{what} into {report.target}: "
        f"{write} {len(report.written)}, {remove} {len(report.removed)}, "
        f"{len(report.unchanged)} unchanged"
    )
    if report.kept:
        summary += f", {len(report.kept)} left alone"
    rows = capped_rows(
        [(write, report.written), (remove, report.removed), ("left alone", report.kept)], limit
    )
    lines = [summary, *("  " + line for line in align_rows(rows))]
    if report.backup:
        lines.append(
            f"replaced files kept as the undo backup {report.backup} "
            f"(undo: snapstore undo {session})"
        )
    return lines


@click.command(cls=Command)
@click.argument("session", shell_complete=complete_session)
@click.argument("name", shell_complete=snapshot_names("files"))
@click.option(
    "--target",
    type=click.Path(file_okay=False, path_type=Path),
    metavar="DIR",
    help="Restore into this directory instead of the snapshot's base dir.",
)
@click.option(
    "--path",
    "paths",
    metavar="PATH",
    multiple=True,
    help="Restore only this path (a file or directory of the snapshot); repeatable.",
)
@click.option("--dry-run", is_flag=True, help="Report what would change; write nothing.")
@click.option(
    "--no-backup",
    is_flag=True,
    help="Do not keep the replaced files as an undo backup (no undo, no rollback on failure).",
)
@click.option(
    "--keep-special-bits", is_flag=True, help="Restore setuid, setgid and sticky bits too."
)
@list_option
@pass_settings
def restore(
    settings: Settings,
    session: str,
    name: str,
    target: Path | None,
    paths: tuple[str, ...],
    dry_run: bool,
    no_backup: bool,
    keep_special_bits: bool,
    list_all: bool,
) -> None:
    """Put the files of snapshot NAME of SESSION back, writing only what differs.

    NAME may be latest, latest~N or the start of one snapshot's name. Prints a summary and
    the first 20 written, removed and left-alone paths; --list prints them all, --json too.
    """
    name = settings.snapshot_name(session, name)
    if dry_run or no_backup:
        store = settings.store()
    else:
        store = settings.writable_store(
            "a restore first keeps the files it replaces in it as an undo backup "
            "(--no-backup restores without that backup, --dry-run only shows what would change)"
        )
    with settings.progress("restoring") as progress:
        report = store.restore(
            session,
            name,
            target,
            paths=list(paths) or None,
            dry_run=dry_run,
            backup=not no_backup,
            keep_special_bits=keep_special_bits,
            progress=progress,
        )
    document = shapes.restore_document(session, name, report)
    lines = restore_lines(
        report, session, f"restore of {session}/{name}", None if list_all else PATHS_SHOWN
    )
    settings.emit(document, lines, info=not dry_run)


@click.command(cls=Command)
@click.argument("session")
@click.option(
    "--backup",
    metavar="NAME",
    help="Put back this undo backup (see 'snapstore backups') instead of the newest.",
)
@click.option(
    "--target",
    type=click.Path(file_okay=False, path_type=Path),
    metavar="DIR",
    help="Restore into this directory instead of the one the backup was taken from.",
)
@click.option("--dry-run", is_flag=True, help="Report what would change; write nothing.")
@list_option
@pass_settings
def undo(
    settings: Settings,
    session: str,
    backup: str | None,
    target: Path | None,
    dry_run: bool,
    list_all: bool,
) -> None:
    """Undo the newest restore of SESSION: put back what it replaced. Undoable in turn."""
    store = settings.store()
    with settings.progress("restoring") as progress:
        report = store.undo(
            session, backup=backup, target=target, dry_run=dry_run, progress=progress
        )
    what = f"undo of {session}" + (f" (undo backup {backup})" if backup else "")
    document = shapes.undo_document(session, report)
    lines = restore_lines(report, session, what, None if list_all else PATHS_SHOWN)
    settings.emit(document, lines, info=not dry_run)
