"""Commands that take and inspect snapshots: ``create``, ``list``, ``show`` and ``cat``."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from snapstore.cli.completion import complete_file_path, complete_session, snapshot_names
from snapstore.cli.context import Settings, finish, pass_settings
from snapstore.cli.exitcodes import ExitCode
from snapstore.cli.output import (
    count,
    human_age,
    human_expiry,
    human_size,
    print_note,
    render_table,
    to_json,
)
from snapstore.cli.params import DURATION, META_ITEM
from snapstore.models import FileEntry, SnapshotInfo
from snapstore.service import shapes


def snapshot_label(info: SnapshotInfo) -> str:
    """``session/name``, the way people refer to a snapshot."""
    return f"{info.session}/{info.name}"


def _files_cell(info: SnapshotInfo) -> str:
    """The FILES cell: a count for file snapshots, ``-`` for state values."""
    return str(info.file_count) if info.kind == "files" else "-"


@click.command()
@click.argument("session", shell_complete=complete_session)
@click.argument("name", shell_complete=snapshot_names())
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option(
    "--base",
    "base_dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    metavar="DIR",
    default=".",
    show_default=True,
    help="Directory the PATHS are relative to; restores go back here.",
)
@click.option("--meta", type=META_ITEM, multiple=True, help="Attach KEY=VALUE metadata.")
@click.option("--ttl", type=DURATION, help="Expire after this long (90s, 15m, 24h, 7d).")
@click.option(
    "--skip-unreadable", is_flag=True, help="Skip files that cannot be read instead of failing."
)
@click.option(
    "--rehash", is_flag=True, help="Read every file, trusting no digest cached by earlier runs."
)
@pass_settings
def create(
    settings: Settings,
    session: str,
    name: str,
    paths: tuple[str, ...],
    base_dir: Path,
    meta: tuple[tuple[str, str], ...],
    ttl: float | None,
    skip_unreadable: bool,
    rehash: bool,
) -> None:
    """Checkpoint PATHS (files or directories) as snapshot NAME of SESSION.

    With --skip-unreadable, a snapshot that left files out is still committed, and the
    command exits 3 (partial success).
    """
    store = settings.writable_store("create writes new blobs and a manifest", create=True)
    with settings.progress("snapshotting") as progress:
        info = store.create(
            session,
            name,
            list(paths),
            base_dir=os.path.abspath(base_dir),
            meta=dict(meta) or None,
            ttl=ttl,
            skip_unreadable=skip_unreadable,
            rehash=rehash,
            progress=progress,
        )
    for skipped in info.skipped:
        print_note(f"warning: skipped {skipped.path}: {skipped.error}")
    line = (
        f"created {snapshot_label(info)}: {count(info.file_count, 'file')}, "
        f"{human_size(info.total_bytes)}, expires {human_expiry(info.expires_at)}"
    )
    settings.emit(shapes.snapshot_document(info), [line], info=True)
    if info.skipped:
        finish(ExitCode.PARTIAL)


@click.command("list")
@click.argument("session", required=False, shell_complete=complete_session)
@pass_settings
def list_snapshots(settings: Settings, session: str | None) -> None:
    """List snapshots, oldest first (only SESSION's, if given)."""
    infos = settings.store().list(session)
    rows = [
        [
            info.session,
            info.name,
            info.kind,
            _files_cell(info),
            human_size(info.total_bytes),
            human_age(info.created_at),
            human_expiry(info.expires_at),
        ]
        for info in infos
    ]
    headers = ["SESSION", "NAME", "KIND", "FILES", "SIZE", "CREATED", "EXPIRES"]
    lines = render_table(headers, rows, right=(3, 4)) if rows else []
    if not rows and not settings.json and not settings.quiet:
        print_note("no snapshots" + (f" in session {session!r}" if session else ""))
    settings.emit(shapes.snapshots_document(infos), lines)


@click.command()
@click.argument("session")
@pass_settings
def backups(settings: Settings, session: str) -> None:
    """List the undo backups of SESSION, oldest first: what each restore replaced."""
    infos = settings.store().backups(session)
    rows = [
        [
            info.name,
            info.backup_of or "",
            _files_cell(info),
            human_size(info.total_bytes),
            human_age(info.created_at),
            info.base_dir,
        ]
        for info in infos
    ]
    headers = ["NAME", "TAKEN BEFORE RESTORING", "FILES", "SIZE", "CREATED", "TARGET"]
    lines = render_table(headers, rows, right=(2, 3)) if rows else []
    if not rows and not settings.json and not settings.quiet:
        print_note(f"no undo backups in session {session!r}")
    settings.emit(shapes.backups_document(infos), lines)


def _entry_row(entry: FileEntry) -> list[str]:
    """One line of the entries table of ``show``."""
    present = entry.kind != "absent"
    path = f"{entry.path} -> {entry.target}" if entry.kind == "symlink" else entry.path
    return [
        entry.kind,
        f"{entry.mode & 0o7777:04o}" if present else "-",
        human_size(entry.size) if entry.kind == "file" else "-",
        entry.digest.hex()[:12] if entry.digest else "-",
        path,
    ]


def _header_lines(info: SnapshotInfo) -> list[str]:
    """The ``key: value`` summary at the top of ``show``."""
    fields = [
        ("snapshot", snapshot_label(info)),
        ("kind", info.kind),
        ("created", f"{info.created_at.isoformat()} ({human_age(info.created_at)})"),
        ("expires", _expiry_detail(info)),
        ("base dir", info.base_dir),
        ("files", f"{_files_cell(info)} ({human_size(info.total_bytes)})"),
    ]
    if info.meta:
        fields.append(("meta", ", ".join(f"{key}={value}" for key, value in info.meta.items())))
    if info.skipped:
        fields.append(
            ("skipped", ", ".join(f"{item.path} ({item.error})" for item in info.skipped))
        )
    return [f"{label + ':':<10}{value}" for label, value in fields]


def _expiry_detail(info: SnapshotInfo) -> str:
    """Expiry time and how far off it is, or ``never``."""
    if info.expires_at is None:
        return "never"
    return f"{info.expires_at.isoformat()} ({human_expiry(info.expires_at)})"


@click.command()
@click.argument("session", shell_complete=complete_session)
@click.argument("name", shell_complete=snapshot_names())
@pass_settings
def show(settings: Settings, session: str, name: str) -> None:
    """Show one snapshot: its header, then every entry with mode, size and digest."""
    store = settings.store()
    snapshot = store.get(session, name)
    value = store.get_state(session, name) if snapshot.info.kind == "state" else None
    lines = _header_lines(snapshot.info)
    if snapshot.info.kind == "state":
        lines.append(f"{'value:':<10}{to_json(value)}")
    elif snapshot.entries:
        headers = ["KIND", "MODE", "SIZE", "DIGEST", "PATH"]
        rows = [_entry_row(entry) for entry in snapshot.entries]
        lines += ["", *render_table(headers, rows, right=(2,))]
    settings.emit(shapes.show_document(snapshot, value), lines)


@click.command()
@click.argument("session", shell_complete=complete_session)
@click.argument("name", shell_complete=snapshot_names("files"))
@click.argument("path", shell_complete=complete_file_path)
@pass_settings
def cat(settings: Settings, session: str, name: str, path: str) -> None:
    """Write the bytes PATH had in the snapshot to stdout (verified against its digest)."""
    data = settings.store().read(session, name, path)
    if settings.json:
        settings.emit(shapes.file_document(session, name, path, data), [])
        return
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()
