"""The JSON documents that describe API results, shared by ``--json`` and the services.

docs/cli.md documents each shape; ``snapstore serve`` returns the same documents as its
results, so a bridge sees one vocabulary whether it runs a command or keeps a server. Pure
functions of the API's return values: no click, no I/O.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from snapstore.models import (
    DiffReport,
    FileSlice,
    GcReport,
    PathVersion,
    RestoreReport,
    Snapshot,
    SnapshotInfo,
    SweepReport,
    VerifyReport,
)

if TYPE_CHECKING:
    from snapstore.patch import Patch


def json_default(value: Any) -> Any:
    """Encode what ``json`` cannot: bytes as hex, datetimes as ISO 8601, models through their
    ``to_dict()``, anything else as its text."""
    if isinstance(value, bytes | bytearray):
        return value.hex()
    if isinstance(value, datetime):
        return value.isoformat()
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    return str(value)


def snapshot_document(info: SnapshotInfo) -> dict[str, Any]:
    """``create``: the committed snapshot's header."""
    return {"snapshot": info.to_dict()}


def snapshots_document(infos: Sequence[SnapshotInfo]) -> dict[str, Any]:
    """``list``: every header, oldest first."""
    return {"snapshots": [info.to_dict() for info in infos]}


def backups_document(infos: Sequence[SnapshotInfo]) -> dict[str, Any]:
    """``backups``: a session's undo backups, oldest first."""
    return {"backups": [info.to_dict() for info in infos]}


def show_document(snapshot: Snapshot, value: Any) -> dict[str, Any]:
    """``show`` (the service's ``get``): header, entries, and the value of a state snapshot."""
    document: dict[str, Any] = {
        "snapshot": snapshot.info.to_dict(),
        "entries": [entry.to_dict() for entry in snapshot.entries],
    }
    if snapshot.info.kind == "state":
        document["value"] = value
    return document


def file_document(session: str, name: str, path: str, data: bytes) -> dict[str, Any]:
    """``cat --json`` (the service's ``read``): one file's bytes, base64-encoded."""
    return {
        "session": session,
        "name": name,
        "path": path,
        "size": len(data),
        "base64": base64.b64encode(data).decode("ascii"),
    }


def _capped(document: dict[str, Any], keys: Sequence[str], limit: int | None) -> None:
    """Add ``counts`` (the length of each list ``keys`` names) and, with a ``limit``, cut
    each list to its first ``limit`` paths, ``truncated`` saying whether any was cut."""
    document["counts"] = {key: len(document[key]) for key in keys}
    if limit is None:
        return
    cut = False
    for key in keys:
        if len(document[key]) > limit:
            document[key] = document[key][:limit]
            cut = True
    document["truncated"] = cut


DIFF_KEYS = ("added", "modified", "removed")
RESTORE_KEYS = ("written", "removed", "unchanged", "kept")


def diff_document(
    session: str, name: str, target: str, report: DiffReport, *, limit: int | None = None
) -> dict[str, Any]:
    """``diff``: what changed from (session, name) to the directory ``target``; ``counts``
    of each kind, each list cut to ``limit`` paths if given."""
    document = {
        "session": session,
        "name": name,
        "other": None,
        "target": target,
        **report.to_dict(),
        "changed": report.changed,
    }
    _capped(document, DIFF_KEYS, limit)
    return document


def snapshots_diff_document(
    session: str, name: str, other: str, report: DiffReport, *, limit: int | None = None
) -> dict[str, Any]:
    """``diff`` of two snapshots of a session: what changed from ``name`` to ``other``."""
    document = {
        "session": session,
        "name": name,
        "other": other,
        "target": None,
        **report.to_dict(),
        "changed": report.changed,
    }
    _capped(document, DIFF_KEYS, limit)
    return document


def restore_document(
    session: str,
    name: str,
    report: RestoreReport,
    *,
    limit: int | None = None,
    unchanged: bool = True,
) -> dict[str, Any]:
    """``restore``: what was written, removed, left alone, and the undo backup kept; the
    ``counts`` of each, each list cut to ``limit`` paths if given, and the unchanged paths
    left out (only counted) unless ``unchanged``."""
    document = {"session": session, "name": name, **report.to_dict()}
    _capped(document, RESTORE_KEYS, limit)
    if not unchanged:
        del document["unchanged"]
    return document


def undo_document(
    session: str, report: RestoreReport, *, limit: int | None = None, unchanged: bool = True
) -> dict[str, Any]:
    """``undo``: as ``restore``, without a snapshot name (the backup is in ``backup``)."""
    document = restore_document(session, "", report, limit=limit, unchanged=unchanged)
    del document["name"]
    return document


def patch_document(patch: Patch) -> dict[str, Any]:
    """A patch: its unified diff ``text`` and, per file, its change and hunks."""
    return patch.to_dict()


def slice_document(session: str, name: str, part: FileSlice) -> dict[str, Any]:
    """``read`` with ``offset``/``length``: the part's bytes in base64, where it starts and
    ends, and the file's size."""
    return {
        "session": session,
        "name": name,
        "path": part.path,
        "size": part.size,
        "base64": base64.b64encode(part.data).decode("ascii"),
        "offset": part.offset,
        "length": len(part.data),
        "complete": part.complete,
        "binary": part.binary,
    }


def deleted_document(session: str, name: str, deleted: bool) -> dict[str, Any]:
    """``delete`` and ``state reset``: whether the snapshot existed and is gone now."""
    return {"session": session, "name": name, "deleted": deleted}


def session_deleted_document(session: str, deleted: int) -> dict[str, Any]:
    """``delete-session``: how many snapshots were deleted."""
    return {"session": session, "deleted": deleted}


def sweep_document(report: SweepReport, dry_run: bool) -> dict[str, Any]:
    """``sweep``: the snapshots deleted (or that would be)."""
    pairs = [{"session": session, "name": name} for session, name in report.deleted]
    return {"deleted": pairs, "dry_run": dry_run}


def gc_document(report: GcReport, dry_run: bool) -> dict[str, Any]:
    """``gc``: what was freed, or why it was skipped."""
    return {**report.to_dict(), "dry_run": dry_run}


def verify_document(report: VerifyReport) -> dict[str, Any]:
    """``verify``: damage found and leftovers gc would clean."""
    return report.to_dict()


def state_document(session: str, name: str, found: bool, value: Any) -> dict[str, Any]:
    """``state get``: the value, or the default given when ``found`` is false."""
    return {"session": session, "name": name, "found": found, "value": value}


def saved_state_document(info: SnapshotInfo, value: Any) -> dict[str, Any]:
    """``state set``: the committed header and the value saved."""
    return {"snapshot": info.to_dict(), "value": value}


def history_document(session: str, path: str, versions: Sequence[PathVersion]) -> dict[str, Any]:
    """``log`` (the service's ``history``): each checkpoint where ``path`` changed, with its
    entry there (null: gone)."""
    return {
        "session": session,
        "path": path,
        "history": [version.to_dict() for version in versions],
    }
