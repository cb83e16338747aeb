"""With ``serve --allow``: deletions and replacements stay within the allowed directories.

Reading and restoring are confined by the paths a call names (``snapstore.service.confine``);
deleting is confined by what the snapshots themselves record. A checkpoint or undo backup
whose ``base_dir`` lies outside the allowed directories may be listed, but not deleted or
replaced: a client may not destroy what it may neither read nor restore. A call that would
remove several snapshots (``delete_session``, ``sweep``) is checked whole before anything is
deleted, and refused whole. State values record no directory and are never refused.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from snapstore.errors import NotAStateSnapshotError, SnapshotNotFound
from snapstore.format.times import ns_to_time
from snapstore.internals import repository
from snapstore.models import SnapshotInfo
from snapstore.service.confine import AllowedDirectories

if TYPE_CHECKING:
    from snapstore import SnapStore


def refuse_outside(
    allowed: AllowedDirectories, infos: Iterable[SnapshotInfo], consequence: str
) -> None:
    """PathNotAllowedError for the first of ``infos`` (a file snapshot or undo backup) whose
    base directory lies outside ``allowed``; ``consequence`` says what the call would do."""
    for info in infos:
        if info.kind == "files":
            allowed.check(
                info.base_dir,
                f"the base directory of snapshot {info.session}/{info.name}, which {consequence}",
            )


def _recorded(store: SnapStore, session: str | None) -> dict[tuple[str, str], SnapshotInfo]:
    """Every snapshot of ``session`` (None: of all), undo backups included, by (session,
    name)."""
    return {
        (info.session, info.name): info
        for info in (manifest.header.info for manifest in repository(store).listing(session))
    }


def check_delete(store: SnapStore, allowed: AllowedDirectories, session: str, name: str) -> None:
    """Refuse ``delete(session, name)`` of a snapshot of a directory outside ``allowed``."""
    found = _recorded(store, session).get((session, name))
    refuse_outside(allowed, [found] if found else [], "the call would delete")


def check_delete_session(store: SnapStore, allowed: AllowedDirectories, session: str) -> None:
    """Refuse ``delete_session(session)`` if any of its snapshots is of a directory outside
    ``allowed``."""
    refuse_outside(allowed, _recorded(store, session).values(), "the call would delete")


def check_replace(store: SnapStore, allowed: AllowedDirectories, session: str, name: str) -> None:
    """Refuse a ``create`` that would replace checkpoint ``name`` of a directory outside
    ``allowed`` (nothing to replace, or a state value: the library decides)."""
    try:
        info = repository(store).files_header(session, name)
    except (SnapshotNotFound, NotAStateSnapshotError):
        return
    if info.name == name:
        refuse_outside(allowed, [info], "the call would replace")


def confined_sweep(store: SnapStore, allowed: AllowedDirectories, args: dict[str, Any]) -> Any:
    """``store.sweep(**args)``, refused whole if it would delete a snapshot of a directory
    outside ``allowed``: a dry run at one moment (``now``, else the store's clock) decides,
    and the sweep runs at that same moment."""
    now = args["now"] if args["now"] is not None else ns_to_time(repository(store).backend.now_ns())
    planned = store.sweep(**{**args, "now": now, "dry_run": True})
    recorded = _recorded(store, None)
    doomed = [recorded[pair] for pair in planned.deleted if pair in recorded]
    refuse_outside(allowed, doomed, "the sweep would delete")
    if args["dry_run"]:
        return planned
    return store.sweep(**{**args, "now": now})
