"""``log``: the checkpoints of a session in which one path changed."""

from __future__ import annotations

import posixpath

import click

from snapstore.cli.completion import complete_session
from snapstore.cli.context import Settings, pass_settings
from snapstore.cli.maintenance import SessionNotFound
from snapstore.cli.output import render_table
from snapstore.cli.parsing import Command
from snapstore.errors import PathNotInSnapshotError
from snapstore.frontend import shapes
from snapstore.frontend.words import human_age, human_size
from snapstore.models import PathVersion


def version_row(version: PathVersion) -> list[str]:
    """One line of ``log``: the checkpoint, and what the path was there (or ``removed``)."""
    info, entry = version.snapshot, version.entry
    where = [info.name, human_age(info.created_at)]
    if entry is None:
        return [*where, "removed", "-", "-", "-"]
    if entry.kind == "file":
        content = entry.digest.hex()[:12] if entry.digest else "-"
    elif entry.kind == "symlink":
        content = f"-> {entry.target}"
    else:
        content = "-"
    return [
        *where,
        entry.kind,
        f"{entry.mode & 0o7777:04o}",
        human_size(entry.size) if entry.kind == "file" else "-",
        content,
    ]


@click.command("log", cls=Command)
@click.argument("session", shell_complete=complete_session)
@click.argument("path")
@pass_settings
def log(settings: Settings, session: str, path: str) -> None:
    """List the checkpoints of SESSION in which PATH changed, oldest first.

    PATH is relative to the checkpoints' base dir (as show prints it). One row for the
    checkpoint where PATH first appears, and one for each where its kind, mode, size, content
    or link target differs from the checkpoint before; "removed" where it is gone. Reads
    manifests only.
    """
    store = settings.store()
    wanted = posixpath.normpath(path) if path else path
    versions = store.history(session, wanted)
    if not versions:
        if not any(info.kind == "files" for info in store.list(session)):
            raise SessionNotFound(session, "checkpoints")
        raise PathNotInSnapshotError(f"{wanted!r} is in no checkpoint of session {session!r}")
    headers = ["NAME", "CREATED", "KIND", "MODE", "SIZE", "CONTENT"]
    settings.emit_listing(
        lambda: shapes.history_document(session, wanted, versions),
        lambda: render_table(headers, [version_row(v) for v in versions], right=(4,)),
    )
