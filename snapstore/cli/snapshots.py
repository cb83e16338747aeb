"""Commands that inspect snapshots: ``list``, ``backups``, ``show`` and ``cat`` (``create`` is
``snapstore.cli.creating``)."""

from __future__ import annotations

import sys
from typing import Any

import click

from snapstore.cli.completion import complete_file_path, complete_session, snapshot_names
from snapstore.cli.context import Settings, pass_settings
from snapstore.cli.output import print_note, render_table, to_json
from snapstore.cli.parsing import Command
from snapstore.format.extents import CHUNKED_FROM_BYTES
from snapstore.frontend import shapes
from snapstore.frontend.words import human_age, human_expiry, human_size
from snapstore.models import FileEntry, Snapshot, SnapshotInfo


def snapshot_label(info: SnapshotInfo) -> str:
    """``session/name``, the way people refer to a snapshot."""
    return f"{info.session}/{info.name}"


def _files_cell(info: SnapshotInfo) -> str:
    """The FILES cell: a count for file snapshots, ``-`` for state values."""
    return str(info.file_count) if info.kind == "files" else "-"


@click.command("list", cls=Command)
@click.argument("session", required=False, shell_complete=complete_session)
@pass_settings
def list_snapshots(settings: Settings, session: str | None) -> None:
    """List snapshots, oldest first (only SESSION's, if given)."""
    infos = settings.store().list(session)
    if not infos and not settings.json and not settings.quiet:
        print_note("no snapshots" + (f" in session {session!r}" if session else ""))
    settings.emit_listing(lambda: shapes.snapshots_document(infos), lambda: _list_lines(infos))


def _list_lines(infos: list[SnapshotInfo]) -> list[str]:
    """The table ``list`` prints for a person (no lines for no snapshots)."""
    rows = [
        [
            info.session,
            info.name,
            info.kind,
            _files_cell(info),
            human_size(info.total_bytes),
            "-" if info.stored_bytes is None else human_size(info.stored_bytes),
            human_age(info.created_at),
            human_expiry(info.expires_at),
        ]
        for info in infos
    ]
    headers = ["SESSION", "NAME", "KIND", "FILES", "SIZE", "STORED", "CREATED", "EXPIRES"]
    return render_table(headers, rows, right=(3, 4, 5)) if rows else []


@click.command(cls=Command)
@click.argument("session")
@pass_settings
def backups(settings: Settings, session: str) -> None:
    """List the undo backups of SESSION, oldest first: what each restore replaced."""
    infos = settings.store().backups(session)
    if not infos and not settings.json and not settings.quiet:
        print_note(f"no undo backups in session {session!r}")
    settings.emit_listing(lambda: shapes.backups_document(infos), lambda: _backup_lines(infos))


def _backup_lines(infos: list[SnapshotInfo]) -> list[str]:
    """The table ``backups`` prints for a person (no lines for no backups)."""
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
    return render_table(headers, rows, right=(2, 3)) if rows else []


def _entry_row(entry: FileEntry) -> list[str]:
    """One line of the entries table of ``show``."""
    present = entry.kind != "absent"
    path = entry.path
    if entry.kind == "symlink":
        path = f"{path} -> {entry.target}"
    if entry.link is not None:
        path = f"{path} (hard link of {entry.link})"
    if entry.extents:
        path = f"{path} ({'chunked' if entry.size >= CHUNKED_FROM_BYTES else 'holes'})"
    return [
        entry.kind,
        f"{entry.mode & 0o7777:04o}" if present else "-",
        human_size(entry.size) if entry.kind == "file" else "-",
        entry.digest.hex()[:12] if entry.digest else "-",
        path,
    ]


def _header_lines(info: SnapshotInfo) -> list[str]:
    """The ``key: value`` summary at the top of ``show``: for file snapshots also the exclude
    rules they were taken with (what a restore leaves alone), and for an undo backup the
    snapshot whose restore it was kept before."""
    fields = [("snapshot", snapshot_label(info)), ("kind", info.kind)]
    if info.backup_of is not None:
        fields.append(
            ("backup", f"undo backup taken before restoring {info.session}/{info.backup_of}")
        )
    fields += [
        ("created", f"{info.created_at.isoformat()} ({human_age(info.created_at)})"),
        ("expires", _expiry_detail(info)),
        ("base dir", info.base_dir),
        ("files", f"{_files_cell(info)} ({human_size(info.total_bytes)})"),
    ]
    if info.meta:
        fields.append(("meta", ", ".join(f"{key}={value}" for key, value in info.meta.items())))
    if info.kind == "files":
        fields.append(("excludes", ", ".join(info.excludes) if info.excludes else "none"))
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


@click.command(cls=Command)
@click.argument("session", shell_complete=complete_session)
@click.argument("name", shell_complete=snapshot_names())
@pass_settings
def show(settings: Settings, session: str, name: str) -> None:
    """Show one snapshot: its header, then every entry with mode, size and digest.

    NAME may be latest, latest~N or the start of one snapshot's name.
    """
    store = settings.store()
    name = settings.snapshot_name(session, name)
    snapshot = store.get(session, name)
    value = store.get_state(session, name) if snapshot.info.kind == "state" else None
    settings.emit_listing(
        lambda: shapes.show_document(snapshot, value), lambda: _show_lines(snapshot, value)
    )


def _show_lines(snapshot: Snapshot, value: Any) -> list[str]:
    """What ``show`` prints for a person: the header, then the value or every entry."""
    lines = _header_lines(snapshot.info)
    if snapshot.info.kind == "state":
        lines.append(f"{'value:':<10}{to_json(value)}")
    elif snapshot.entries:
        headers = ["KIND", "MODE", "SIZE", "DIGEST", "PATH"]
        rows = [_entry_row(entry) for entry in snapshot.entries]
        lines += ["", *render_table(headers, rows, right=(2,))]
    return lines


@click.command(cls=Command)
@click.argument("session", shell_complete=complete_session)
@click.argument("name", shell_complete=snapshot_names("files"))
@click.argument("path", shell_complete=complete_file_path)
@pass_settings
def cat(settings: Settings, session: str, name: str, path: str) -> None:
    """Write the bytes PATH had in the snapshot to stdout (verified against its digest).

    NAME may be latest, latest~N or the start of one snapshot's name.
    """
    name = settings.snapshot_name(session, name)
    data = settings.store().read(session, name, path)
    if settings.json:
        settings.emit(shapes.file_document(session, name, path, data), [])
        return
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()
