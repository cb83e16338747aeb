"""The checkpoint tools of ``snapstore mcp`` as plain calls on a server's store, without the
MCP SDK (``snapstore.service.mcp`` binds them to it).

Each tool confines itself to the allowed directories (a ``base_dir``, each path under it, the
directory of a checkpoint it reads, compares or restores), names the checkpoint a selector
resolved to, and returns a result sized for a model's context: counts and the changed paths
(at most ``PATHS_SHOWN`` of each kind), unchanged paths only when asked, reads of at most
``READ_LIMIT`` bytes, patches of at most ``PATCH_LIMIT`` bytes. Each result is a JSON document
(the structured content) and a short text saying the same for a person or a model.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from snapstore.frontend import shapes
from snapstore.internals import repository
from snapstore.service.confine import AllowedDirectories
from snapstore.service.context import Service
from snapstore.service.removal import check_replace

if TYPE_CHECKING:
    from snapstore import SnapStore
    from snapstore.models import FileSlice, RestoreReport, SnapshotInfo

Progress = Callable[[int, int], None]

READ_LIMIT = 256 << 10
"""The most bytes of a file one ``read_checkpoint_file`` returns by default (256 KiB)."""
READ_MAX = 1 << 20
"""The most bytes one read may ask for."""
PATHS_SHOWN = 50
"""Paths of each kind (written, removed, added, ...) a result lists; the rest are counted."""
PATCH_LIMIT = 64 << 10
"""The default bound on a patch's text in ``diff_checkpoint`` (64 KiB)."""
LISTED = 100
"""Checkpoints ``list_checkpoints`` lists at most: the newest."""


@dataclass
class ToolResult:
    """A tool's answer: the JSON ``document`` and a ``text`` saying the same in words."""

    document: dict[str, Any]
    text: str


def absent_paths(base_dir: str, paths: Sequence[str]) -> list[str]:
    """The requested ``paths`` that do not exist under ``base_dir`` (a create records them as
    absent: on purpose for a file about to be made, a mistake for a typo)."""
    return [path for path in paths if not os.path.lexists(os.path.join(base_dir, path))]


def absent_warning(absent: Sequence[str], base_dir: str) -> str:
    """The warning for paths recorded as absent."""
    shown = ", ".join(absent[:PATHS_SHOWN])
    if len(absent) > PATHS_SHOWN:
        shown += f" and {len(absent) - PATHS_SHOWN} more"
    return (
        f"warning: not found in {base_dir}, recorded as absent: {shown} (a restore removes "
        "them if they exist then; if that is not what you meant, check the spelling and "
        "base_dir)"
    )


def _listed(label: str, paths: Sequence[str], total: int) -> list[str]:
    lines = [f"  {label} {path}" for path in paths]
    if total > len(paths):
        lines.append(f"  {label} ... and {total - len(paths)} more")
    return lines


def _label(session: str, name: str, selector: str) -> str:
    return f"{session}/{name}" + ("" if selector == name else f" ({selector})")


def restore_text(document: dict[str, Any], what: str, unchanged: bool) -> str:
    """The words of a restore or undo result."""
    counts = document["counts"]
    dry = document["dry_run"]
    write, remove = ("would write", "would remove") if dry else ("wrote", "removed")
    summary = (
        f"{'dry run: ' if dry else ''}{what} into {document['target']}: {write} "
        f"{counts['written']}, {remove} {counts['removed']}, {counts['unchanged']} unchanged"
    )
    if counts["kept"]:
        summary += f", {counts['kept']} left alone"
    lines = [summary]
    lines += _listed(write, document["written"], counts["written"])
    lines += _listed(remove, document["removed"], counts["removed"])
    lines += _listed("left alone", document["kept"], counts["kept"])
    if unchanged:
        lines += _listed("unchanged", document["unchanged"], counts["unchanged"])
    if document["backup"]:
        lines.append(f"undo backup: {document['backup']} (undo_restore puts it back)")
    return "\n".join(lines)


def diff_text(document: dict[str, Any], old: str, new: str) -> str:
    """The words of a diff result, with its patch."""
    counts = document["counts"]
    if not document["changed"]:
        lines = [f"{new} matches {old}: no change"]
    else:
        lines = [
            f"from {old} to {new}: added {counts['added']}, modified {counts['modified']}, "
            f"removed {counts['removed']}"
        ]
        for key in shapes.DIFF_KEYS:
            lines += _listed(key, document[key], counts[key])
    patch = document.get("patch")
    if patch and patch["text"]:
        lines += ["", patch["text"].rstrip("\n")]
    return "\n".join(lines)


def _decode(data: bytes, at_start: bool) -> tuple[str, int] | None:
    """``data`` as UTF-8 text and how many of its bytes the text covers, allowing a character
    cut at either end of a window: the cut start (not at the start of the file, ``at_start``)
    belongs to the window before, the cut end to the next one. None if it is not UTF-8."""
    start = 0
    if not at_start:
        while start < min(3, len(data)) and 0x80 <= data[start] < 0xC0:
            start += 1
    for end in range(len(data), max(start, len(data) - 4), -1):
        try:
            return data[start:end].decode("utf-8"), end
        except UnicodeDecodeError:
            continue
    return ("", len(data)) if start >= len(data) else None


class CheckpointAgent:
    """The tools on one server's store, confined to ``allowed``."""

    def __init__(self, service: Service, allowed: AllowedDirectories) -> None:
        self.service = service
        self.allowed = allowed

    def _store(self) -> SnapStore:
        return self.service.store()

    def _checkpoint_of(self, session: str, selector: str) -> SnapshotInfo:
        """The header of the file checkpoint ``selector`` resolves to, whose directory must be
        an allowed one."""
        store = self._store()
        info = repository(store).files_header(session, store.resolve(session, selector))
        self.allowed.check(info.base_dir, f"the base directory of checkpoint {info.name!r}")
        return info

    def _check_replaceable(self, session: str, name: str) -> None:
        """Refuse to replace checkpoint ``name`` if it is one of a directory outside the
        allowed ones: the agent may not destroy what it may not read or restore."""
        if self.service.store_exists():
            check_replace(self._store(), self.allowed, session, name)

    def checkpoint(
        self,
        session: str,
        paths: list[str],
        name: str | None,
        base_dir: str | None,
        progress: Progress | None,
        gitignore: bool = True,
    ) -> ToolResult:
        base = self.allowed.check(base_dir or os.getcwd(), "base_dir")
        self.allowed.check_all(paths, "path", base)
        absent = absent_paths(base, paths)
        if name is not None:
            self._check_replaceable(session, name)
        store = self.service.store(create=True)
        info = store.create(
            session, name, paths, base_dir=base, gitignore=gitignore, progress=progress
        )
        document = {**shapes.snapshot_document(info), "absent": absent}
        text = (
            f"{'replaced' if info.replaced else 'saved'} checkpoint {info.session}/{info.name} "
            f"of {info.base_dir}: {info.file_count} files, {info.total_bytes} bytes"
        )
        if absent:
            document["warning"] = absent_warning(absent, base)
            text += "\n" + document["warning"]
        return ToolResult(document, text)

    def list_checkpoints(self, session: str | None) -> ToolResult:
        infos: list[SnapshotInfo] = []
        if self.service.store_exists():
            infos = [
                info
                for info in self._store().list(session)
                if info.kind == "files" and self.allowed.contains(info.base_dir)
            ]
        shown = infos[-LISTED:]
        document = {**shapes.snapshots_document(shown), "count": len(infos)}
        if not infos:
            return ToolResult(
                document, "no checkpoints" + (f" in session {session!r}" if session else "")
            )
        lines = [
            f"{len(infos)} checkpoints"
            + (f" (the newest {len(shown)})" if len(shown) < len(infos) else "")
        ]
        lines += [
            f"  {info.session}/{info.name}  {info.created_at.isoformat(timespec='seconds')}  "
            f"{info.file_count} files  {info.base_dir}"
            for info in shown
        ]
        return ToolResult(document, "\n".join(lines))

    def diff(
        self,
        session: str,
        name: str,
        other: str | None,
        paths: list[str] | None,
        patch: bool,
        max_bytes: int,
    ) -> ToolResult:
        store = self._store()
        info = self._checkpoint_of(session, name)
        if other is not None:
            second = self._checkpoint_of(session, other)
            report = store.diff(session, info.name, second.name)
            document = shapes.snapshots_diff_document(
                session, info.name, second.name, report, limit=PATHS_SHOWN
            )
            old, new = _label(session, info.name, name), _label(session, second.name, other)
        else:
            report = store.diff(session, info.name, target=info.base_dir)
            document = shapes.diff_document(
                session, info.name, info.base_dir, report, limit=PATHS_SHOWN
            )
            old, new = _label(session, info.name, name), info.base_dir
        if patch and report.changed:
            found = store.patch(
                session,
                info.name,
                None if other is None else document["other"],
                paths=paths,
                max_bytes=max_bytes,
            )
            summary = found.to_dict()
            for file in summary["files"]:
                del file["hunks"]
            summary["omitted_count"] = len(found.omitted)
            summary["omitted"] = found.omitted[:PATHS_SHOWN]
            document["patch"] = summary
        return ToolResult(document, diff_text(document, old, new))

    def restore(
        self,
        session: str,
        name: str,
        paths: list[str] | None,
        dry_run: bool,
        unchanged: bool,
        progress: Progress | None,
    ) -> ToolResult:
        info = self._checkpoint_of(session, name)
        report = self._store().restore(
            session, info.name, paths=paths, dry_run=dry_run, progress=progress
        )
        return self._restored(
            session, info.name, report, _label(session, info.name, name), unchanged
        )

    def _restored(
        self, session: str, name: str, report: RestoreReport, label: str, unchanged: bool
    ) -> ToolResult:
        document = shapes.restore_document(
            session, name, report, limit=PATHS_SHOWN, unchanged=unchanged
        )
        return ToolResult(document, restore_text(document, f"restore of {label}", unchanged))

    def undo(
        self, session: str, dry_run: bool, unchanged: bool, progress: Progress | None
    ) -> ToolResult:
        store = self._store()
        backups = store.backups(session)
        backup = backups[-1] if backups else None
        if backup is not None:
            self.allowed.check(backup.base_dir, f"the directory of undo backup {backup.name!r}")
        report = store.undo(
            session,
            backup=None if backup is None else backup.name,
            dry_run=dry_run,
            progress=progress,
        )
        document = shapes.undo_document(session, report, limit=PATHS_SHOWN, unchanged=unchanged)
        text = restore_text(document, f"undo of {session}", unchanged)
        return ToolResult(document, text)

    def read(
        self,
        session: str,
        path: str,
        name: str,
        offset: int,
        length: int,
        as_base64: bool,
    ) -> ToolResult:
        info = self._checkpoint_of(session, name)
        part = self._store().read_slice(session, info.name, path, offset=offset, length=length)
        document, text = _read_result(session, info.name, part, as_base64)
        header = f"{part.path} at {_label(session, info.name, name)}: {text}"
        return ToolResult(document, header)


def _read_result(
    session: str, name: str, part: FileSlice, as_base64: bool
) -> tuple[dict[str, Any], str]:
    """The document of a read and its text."""
    document: dict[str, Any] = {
        "session": session,
        "name": name,
        "path": part.path,
        "size": part.size,
        "offset": part.offset,
        "length": len(part.data),
        "next_offset": None if part.complete else part.end,
        "binary": part.binary,
        "encoding": None,
        "content": None,
    }
    where = f"bytes {part.offset}-{part.end} of {part.size}"
    more = "" if part.complete else f"\n[more: call again with offset={part.end}]"
    decoded = None if part.binary or as_base64 else _decode(part.data, part.offset == 0)
    if decoded is not None:
        text, covered = decoded
        if covered < len(part.data):  # the next window starts at the character cut here
            document["next_offset"] = part.offset + covered
            more = f"\n[more: call again with offset={part.offset + covered}]"
        document["encoding"], document["content"] = "utf-8", text
        return document, f"{where}\n{text}{more}"
    if part.binary and not as_base64:
        document["note"] = (
            f"binary file of {part.size} bytes (a NUL byte in its first 8 KiB): its content is "
            "not shown; pass base64=true to read it as base64"
        )
        return document, document["note"]
    document["encoding"] = "base64"
    document["content"] = base64.b64encode(part.data).decode("ascii")
    return document, f"{where}, as base64\n{document['content']}{more}"
