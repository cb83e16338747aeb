"""Commands that say what a store holds: ``stats`` and ``sessions``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from snapstore.cli.completion import complete_session
from snapstore.cli.context import Settings, pass_settings
from snapstore.cli.maintenance import SessionNotFound
from snapstore.cli.output import print_note, render_table
from snapstore.cli.params import DURATION
from snapstore.cli.parsing import Command
from snapstore.frontend.words import count, human_age, human_size
from snapstore.internals import repository

if TYPE_CHECKING:
    from snapstore.maintenance.stats import SessionStats


@click.command(cls=Command)
@click.argument("session", required=False, shell_complete=complete_session)
@click.option("--ttl", type=DURATION, help="Count what a sweep --ttl DURATION would free.")
@click.option(
    "--keep-last",
    type=click.IntRange(min=0),
    help="Count what a sweep --keep-last N would free.",
)
@pass_settings
def stats(
    settings: Settings, session: str | None, ttl: float | None, keep_last: int | None
) -> None:
    """Show what the store holds and costs, per session (only SESSION's, if given).

    Per session: checkpoints, their logical size, the stored size of what they reference,
    the bytes only that session holds, and what a sweep (with --ttl/--keep-last) and the next
    gc would free. Store-wide: format, packs, blobs, stored and on-disk bytes. A SESSION
    with no snapshots fails (exit code 14).
    """
    report = settings.store().stats(session, ttl=ttl, keep_last=keep_last)
    if session is not None and not report.sessions:
        raise SessionNotFound(session)
    rows = [
        [
            item.session,
            str(item.checkpoints),
            human_size(item.logical_bytes),
            human_size(item.stored_bytes),
            human_size(item.unique_bytes),
            f"{item.sweep_deletes} / {human_size(item.sweep_frees)}",
            item.newest.name if item.newest else "-",
        ]
        for item in report.sessions
    ]
    headers = ["SESSION", "CHECKPOINTS", "LOGICAL", "STORED", "ONLY HERE", "SWEEP FREES", "NEWEST"]
    lines = render_table(headers, rows, right=(1, 2, 3, 4, 5)) if rows else []
    lines += [""] if rows else []
    lines += [
        f"store: format {report.format}, {count(report.manifests, 'snapshot')}, "
        f"{count(report.blobs, 'blob')} ({report.packed_blobs} packed in "
        f"{count(report.packs, 'pack')}, {report.loose_blobs} loose)",
        f"stored {human_size(report.stored_bytes)} "
        f"({human_size(report.referenced_bytes)} referenced, "
        f"{human_size(report.garbage_bytes)} for gc), {human_size(report.disk_bytes)} on disk",
        f"a sweep{_options(ttl, keep_last)} would delete "
        f"{count(report.sweep_deletes, 'snapshot')} and, with the next gc, free "
        f"{human_size(report.sweep_frees)}",
    ]
    for problem in report.problems:
        print_note(f"warning: {problem}")
    settings.emit(report.to_dict(), lines)


def _options(ttl: float | None, keep_last: int | None) -> str:
    given = []
    if ttl is not None:
        given.append(f"--ttl {ttl:g}s")
    if keep_last is not None:
        given.append(f"--keep-last {keep_last}")
    return (" " + " ".join(given)) if given else ""


def _session_row(item: SessionStats) -> list[str]:
    newest = item.newest
    return [
        item.session,
        str(item.checkpoints),
        str(item.states),
        str(item.backups),
        newest.name if newest else "-",
        human_age(newest.created_at) if newest else "-",
    ]


def _session_document(item: SessionStats) -> dict[str, Any]:
    newest = item.newest
    return {
        "session": item.session,
        "checkpoints": item.checkpoints,
        "states": item.states,
        "backups": item.backups,
        "newest": newest.to_dict() if newest else None,
    }


@click.command(cls=Command)
@pass_settings
def sessions(settings: Settings) -> None:
    """List the sessions: their checkpoints, state values, undo backups and newest checkpoint."""
    from snapstore.maintenance.stats import session_counts

    infos = [manifest.header.info for manifest in repository(settings.store()).listing(None)]
    found = session_counts(infos)
    items = [found[name] for name in sorted(found)]
    headers = ["SESSION", "CHECKPOINTS", "STATES", "BACKUPS", "NEWEST", "CREATED"]
    lines = (
        render_table(headers, [_session_row(i) for i in items], right=(1, 2, 3)) if items else []
    )
    if not items and not settings.json and not settings.quiet:
        print_note("no sessions")
    settings.emit({"sessions": [_session_document(item) for item in items]}, lines)
