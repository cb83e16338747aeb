"""Commands that take and inspect snapshots: ``create``, ``list``, ``show`` and ``cat``."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from snapstore.cli.allocator import keep_freed_memory
from snapstore.cli.completion import complete_file_path, complete_session, snapshot_names
from snapstore.cli.context import Settings, finish, pass_settings
from snapstore.cli.output import print_note, render_table, to_json
from snapstore.cli.params import DURATION, META_ITEM
from snapstore.format.extents import CHUNKED_FROM_BYTES
from snapstore.frontend import shapes
from snapstore.frontend.exitcodes import ExitCode
from snapstore.frontend.words import count, human_age, human_expiry, human_size
from snapstore.models import FileEntry, Snapshot, SnapshotInfo


def snapshot_label(info: SnapshotInfo) -> str:
    """``session/name``, the way people refer to a snapshot."""
    return f"{info.session}/{info.name}"


def _files_cell(info: SnapshotInfo) -> str:
    """The FILES cell: a count for file snapshots, ``-`` for state values."""
    return str(info.file_count) if info.kind == "files" else "-"


ABSENT_SHOWN = 10
"""Absent paths named in the warning of ``create``; the rest are counted."""


def requested_but_absent(base_dir: str, paths: Sequence[str]) -> list[str]:
    """The PATHs given to ``create`` that do not exist under ``base_dir`` (as typed)."""
    return [path for path in paths if not os.path.lexists(os.path.join(base_dir, path))]


def absent_warning(absent: Sequence[str], base_dir: str, maybe_name: str | None) -> str:
    """The one warning line of a ``create`` that recorded requested paths as absent: that it
    is on purpose, and that a typo looks the same. ``maybe_name``: an absent first PATH of
    several, given without ``--name``, as the earlier ``create SESSION NAME PATH...`` read."""
    shown = ", ".join(absent[:ABSENT_SHOWN])
    if len(absent) > ABSENT_SHOWN:
        shown += f" and {len(absent) - ABSENT_SHOWN} more"
    line = (
        f"warning: not found in {base_dir}, recorded as absent: {shown} (a restore removes "
        "them if they exist then; a mistyped path is recorded the same way: check the "
        "spelling, or pass --missing error to refuse paths that do not exist)"
    )
    if maybe_name is not None:
        line += f"; to name the snapshot {maybe_name!r}, pass --name {maybe_name}"
    return line


@click.command()
@click.argument("session", shell_complete=complete_session)
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option(
    "--name",
    "-n",
    metavar="NAME",
    shell_complete=snapshot_names(),
    help="Name the snapshot (default: a new name that sorts by time, printed).",
)
@click.option(
    "--base",
    "base_dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    metavar="DIR",
    default=".",
    show_default=True,
    help="Directory the PATHS are relative to; restores go back here.",
)
@click.option(
    "--exclude",
    "excludes",
    metavar="PATTERN",
    multiple=True,
    help="Leave out what PATTERN matches (gitignore syntax, relative to --base); repeatable.",
)
@click.option(
    "--gitignore/--no-gitignore",
    default=True,
    show_default=True,
    help="Leave out what git ignores (the .gitignore files from the work tree's top down, "
    ".git/info/exclude); --no-gitignore records it too.",
)
@click.option(
    "--no-default-excludes",
    is_flag=True,
    help="Keep .git, .hg, .svn and .jj directories (left out by default).",
)
@click.option(
    "--no-replace",
    is_flag=True,
    help="Fail (exit code 15) if the snapshot NAME exists, instead of replacing it.",
)
@click.option(
    "--missing",
    type=click.Choice(["absent", "error"]),
    default="absent",
    show_default=True,
    help="A PATH that does not exist: record it as absent (a restore removes it), or fail.",
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
    paths: tuple[str, ...],
    name: str | None,
    base_dir: Path,
    excludes: tuple[str, ...],
    gitignore: bool,
    no_default_excludes: bool,
    no_replace: bool,
    missing: str,
    meta: tuple[tuple[str, str], ...],
    ttl: float | None,
    skip_unreadable: bool,
    rehash: bool,
) -> None:
    """Checkpoint PATHS (files or directories) as a snapshot of SESSION.

    The snapshot is called NAME (--name), replacing one of that name unless --no-replace,
    or gets a new name that sorts by time, which is printed (alone, with --quiet). A PATH that
    does not exist is recorded as absent, with a warning. Left out: .git, .hg, .svn and .jj
    (unless --no-default-excludes), what --exclude and the base dir's .snapstoreignore match,
    and what git ignores (unless --no-gitignore). Exits 3 (partial success) when
    --skip-unreadable left files out of the committed snapshot.
    """
    store = settings.writable_store("create writes new blobs and a manifest", create=True)
    keep_freed_memory()
    base = os.path.abspath(base_dir)
    absent = requested_but_absent(base, paths)
    with settings.progress("snapshotting") as progress:
        info = store.create(
            session,
            name,
            list(paths),
            base_dir=base,
            meta=dict(meta) or None,
            ttl=ttl,
            exclude=excludes,
            default_excludes=not no_default_excludes,
            gitignore=gitignore,
            if_exists="error" if no_replace else "replace",
            missing=missing,
            skip_unreadable=skip_unreadable,
            rehash=rehash,
            progress=progress,
        )
    if absent:
        old_style = name is None and len(paths) > 1 and absent[0] == paths[0]
        print_note(absent_warning(absent, base, paths[0] if old_style else None))
    for skipped in info.skipped:
        print_note(f"warning: skipped {skipped.path}: {skipped.error}")
    line = (
        f"{'replaced' if info.replaced else 'created'} {snapshot_label(info)}: "
        f"{count(info.file_count, 'file')}, {human_size(info.total_bytes)}, "
        f"expires {human_expiry(info.expires_at)}"
    )
    document = {**shapes.snapshot_document(info), "replaced": info.replaced, "absent": absent}
    if settings.quiet and name is None and not settings.json:
        settings.emit(document, [info.name])
    else:
        settings.emit(document, [line], info=True)
    if info.skipped:
        finish(ExitCode.PARTIAL)


@click.command("list")
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


@click.command()
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


@click.command()
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


@click.command()
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
