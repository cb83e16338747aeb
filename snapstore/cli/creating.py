"""``snapstore create``: checkpoint files as a snapshot of a session.

A module of its own, apart from the commands that inspect snapshots: ``create`` is the
command bridges and scripts run most, and each run pays for the imports of its module. It
builds the JSON shapes of its output only for ``--json``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import click

from snapstore.cli.allocator import keep_freed_memory
from snapstore.cli.completion import complete_session, snapshot_names
from snapstore.cli.context import Settings, finish, pass_settings
from snapstore.cli.output import print_note
from snapstore.cli.params import DURATION, META_ITEM
from snapstore.cli.parsing import Command
from snapstore.frontend.exitcodes import ExitCode
from snapstore.frontend.words import count, human_expiry, human_size

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


@click.command(cls=Command)
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
    type=click.Path(exists=True, file_okay=False),
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
    base_dir: str,
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
        f"{'replaced' if info.replaced else 'created'} {f'{info.session}/{info.name}'}: "
        f"{count(info.file_count, 'file')}, {human_size(info.total_bytes)}, "
        f"expires {human_expiry(info.expires_at)}"
    )
    document: dict[str, Any] = {}
    if settings.json:
        from snapstore.frontend.shapes import snapshot_document

        document = {**snapshot_document(info), "replaced": info.replaced, "absent": absent}
    if settings.quiet and name is None and not settings.json:
        settings.emit(document, [info.name])
    else:
        settings.emit(document, [line], info=True)
    if info.skipped:
        finish(ExitCode.PARTIAL)
