"""Commands that remove or check data: delete, delete-session, sweep, gc and verify."""

from __future__ import annotations

import contextlib
import shlex
import sys
from collections.abc import Iterator

import click

from snapstore import SnapStore
from snapstore.cli.completion import complete_session, snapshot_names
from snapstore.cli.context import Settings, finish, pass_settings
from snapstore.cli.output import align_rows, print_error, print_note, stderr_is_terminal
from snapstore.cli.params import DURATION
from snapstore.cli.parsing import Command
from snapstore.errors import SnapshotNotFound, SnapstoreError, SweepRefusedError
from snapstore.frontend import shapes
from snapstore.frontend.exitcodes import ExitCode
from snapstore.frontend.words import count, human_size
from snapstore.internals import repository
from snapstore.models import GcReport


class SessionNotFound(click.ClickException):
    """The session holds none of what the command works on: no snapshot (``delete-session``),
    no file checkpoint (``log``)."""

    exit_code = ExitCode.NOT_FOUND

    def __init__(self, session: str, what: str = "snapshots") -> None:
        super().__init__(f"no {what} in session {session!r}")


class PartialFailure(click.ClickException):
    """A command that deletes several snapshots failed after deleting some of them."""

    exit_code = ExitCode.PARTIAL


@contextlib.contextmanager
def partial_deletes(store: SnapStore, session: str | None = None) -> Iterator[None]:
    """Turn an error raised after some snapshots (of ``session``, or any) were deleted into a
    PartialFailure that says how many went; an error before any went is raised as it is.

    The count compares the manifests on disk before and after, so a snapshot another process
    deleted meanwhile is counted too; the message says "gone", not "deleted by this run".
    """
    before = set(repository(store).catalog.names(session))
    try:
        yield
    except (SnapstoreError, OSError) as error:
        try:
            gone = len(before - set(repository(store).catalog.names(session)))
        except OSError:
            raise error from None
        if not gone:
            raise
        raise PartialFailure(
            f"stopped part-way: {gone} of {count(len(before), 'snapshot')} were gone when "
            f"{type(error).__name__} stopped it: {error}"
        ) from error


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


@click.command(cls=Command)
@click.argument("session", shell_complete=complete_session)
@click.argument("name", shell_complete=snapshot_names())
@yes_option
@missing_ok_option
@pass_settings
def delete(settings: Settings, session: str, name: str, yes: bool, missing_ok: bool) -> None:
    """Delete snapshot NAME of SESSION (its blobs are freed by the next gc).

    NAME is the full name: unlike other commands, delete takes no prefix and no latest.
    """
    confirm(settings, yes, f"delete snapshot {session}/{name}")
    store = settings.store()
    deleted = store.delete(session, name)
    if not deleted and not missing_ok:
        _hint_full_name(settings, session, name)
        raise SnapshotNotFound(session, name)
    line = f"deleted {session}/{name}" if deleted else f"{session}/{name} did not exist"
    settings.emit(shapes.deleted_document(session, name, deleted), [line], info=True)


def _hint_full_name(settings: Settings, session: str, selector: str) -> None:
    """If ``selector`` would select a snapshot elsewhere (a prefix, ``latest``), say which on
    stderr: ``delete`` takes only full names, as a selector can come to mean another snapshot
    between looking and deleting, and a delete cannot be undone."""
    try:
        meant = settings.snapshot_name(session, selector)
    except (SnapstoreError, OSError):
        return
    command = shlex.join(["snapstore", "delete", session, meant])
    print_note(
        f"hint: delete takes a full name only; in other commands {selector!r} selects "
        f"{meant!r} ({command})"
    )


@click.command("delete-session", cls=Command)
@click.argument("session", shell_complete=complete_session)
@yes_option
@missing_ok_option
@pass_settings
def delete_session(settings: Settings, session: str, yes: bool, missing_ok: bool) -> None:
    """Delete every snapshot of SESSION."""
    confirm(settings, yes, f"delete every snapshot of session {session}")
    store = settings.store()
    with partial_deletes(store, session):
        deleted = store.delete_session(session)
    if not deleted and not missing_ok:
        raise SessionNotFound(session)
    line = f"deleted {count(deleted, 'snapshot')} of session {session}"
    settings.emit(shapes.session_deleted_document(session, deleted), [line], info=True)


@click.command(cls=Command)
@click.option("--ttl", type=DURATION, help="Delete snapshots older than this (90s, 15m, 24h, 7d).")
@click.option(
    "--keep-last",
    type=click.IntRange(min=0),
    help="Keep only the N newest snapshots of each session.",
)
@click.option("--dry-run", is_flag=True, help="Report what would be deleted; delete nothing.")
@click.option(
    "--yes",
    "-y",
    is_flag=True,
    help="Go ahead even if --ttl or --keep-last deletes every checkpoint of a session.",
)
@pass_settings
def sweep(
    settings: Settings, ttl: float | None, keep_last: int | None, dry_run: bool, yes: bool
) -> None:
    """Delete expired snapshots, and those beyond --ttl or --keep-last.

    A sweep whose --ttl or --keep-last would delete every file checkpoint of a session
    deletes nothing without --yes (exit code 2).
    """
    store = settings.store()
    try:
        with partial_deletes(store):
            report = store.sweep(ttl=ttl, keep_last=keep_last, dry_run=dry_run, allow_emptying=yes)
    except SweepRefusedError as error:
        raise click.UsageError(f"{error}: pass --yes to delete them") from None
    verb = "would delete" if dry_run else "deleted"
    lines = [f"{verb} {count(len(report.deleted), 'snapshot')}"]
    lines += ["  " + line for line in align_rows([list(pair) for pair in report.deleted])]
    settings.emit(shapes.sweep_document(report, dry_run), lines, info=not dry_run)


@click.command(cls=Command)
@click.option("--dry-run", is_flag=True, help="Report what would be freed; delete nothing.")
@pass_settings
def gc(settings: Settings, dry_run: bool) -> None:
    """Free blobs no snapshot references, and stale temp files.

    Exits 11 when it could not take the store's lock, 13 when damage stopped part of it.
    """
    report = settings.store().gc(dry_run=dry_run)
    document = shapes.gc_document(report, dry_run)
    code = gc_exit_code(report)
    if report.skipped:
        removed = report.temp_files_removed
        lines = [f"{'would remove' if dry_run else 'removed'} {count(removed, 'temp file')}"]
        settings.emit(document, lines if removed else [], info=not dry_run)
        print_error(f"gc skipped: {report.reason or 'no reason given'}")
        finish(code)
    free, delete = ("would free", "would delete") if dry_run else ("freed", "deleted")
    line = (
        f"{free} {human_size(report.bytes_freed)}: {delete} "
        f"{count(report.blobs_deleted, 'unreferenced blob')} "
        f"and {count(report.temp_files_removed, 'temp file')}"
    )
    if report.packs_deleted or report.packs_written:
        line += (
            f"; {'would replace' if dry_run else 'replaced'} "
            f"{count(report.packs_deleted, 'pack')} "
            f"with {count(report.packs_written, 'new pack')}"
        )
    settings.emit(document, [line], info=not dry_run)
    if report.reason:
        print_note(f"warning: {report.reason}")
    finish(code)


@click.command(cls=Command)
@pass_settings
def upgrade(settings: Settings) -> None:
    """Convert a store of an older format to the current one (gc does too).

    Marks the store as the current format, rewrites every older manifest and pack, and
    collects garbage on the way; a run that is stopped is taken up by the next one. Exits
    11 when it could not take the store's lock, 13 when damage stopped part of it.
    """
    store = settings.writable_store("upgrade rewrites manifests and packs")
    report = store.upgrade()
    document = shapes.gc_document(report, False)
    code = gc_exit_code(report)
    if report.skipped:
        settings.emit(document, [])
        print_error(f"upgrade stopped: {report.reason or 'no reason given'}")
        finish(code)
    line = (
        f"store at format {store.format_version}: converted "
        f"{count(report.manifests_converted, 'manifest')}, wrote "
        f"{count(report.packs_written, 'pack')}, deleted "
        f"{count(report.blobs_deleted, 'unreferenced blob')}, freed "
        f"{human_size(report.bytes_freed)}"
    )
    settings.emit(document, [line])
    if report.reason:
        print_note(f"warning: {report.reason}")
    finish(code)


def gc_exit_code(report: GcReport) -> ExitCode:
    """LOCKED for a gc that could not take the gc lock, DAMAGED for one that damage stopped
    in part (its ``problems``), else OK."""
    if report.locked:
        return ExitCode.LOCKED
    if report.problems:
        return ExitCode.DAMAGED
    return ExitCode.OK


@click.command(cls=Command)
@click.option("--deep", is_flag=True, help="Re-hash every blob, not only check that it exists.")
@pass_settings
def verify(settings: Settings, deep: bool) -> None:
    """Check every snapshot and blob; exit 13 when committed data is damaged."""
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
    settings.emit(shapes.verify_document(report), lines, info=report.ok)
    if not report.ok:
        print_error(f"the store is damaged: {count(len(report.problems), 'problem')}")
        finish(ExitCode.DAMAGED)
