"""Put a store's manifests in the layout of formats 1-3, as an older snapstore left them: each
manifest ``sessions/<session-dir>/<name-dir>/manifest``, in a directory of its own, instead of
format 4's file ``sessions/<session-dir>/<name-dir>.manifest``. Written from the layout in
docs/format.md, independently of the library's writers."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from snapstore.format.names import dir_name

NEW_SUFFIX = ".manifest"


def manifest_files(root: Path) -> list[Path]:
    """Every manifest file of the store at ``root``, in either layout."""
    sessions = root / "sessions"
    return sorted([*sessions.glob(f"*/*{NEW_SUFFIX}"), *sessions.glob("*/*/manifest")])


def old_layout_path(root: Path, session: str, name: str) -> Path:
    """Where formats 1-3 keep the manifest of (session, name)."""
    session_dir = dir_name(session, "session")
    return root / "sessions" / session_dir / dir_name(name, "snapshot name") / "manifest"


def new_layout_path(root: Path, session: str, name: str) -> Path:
    """Where format 4 keeps the manifest of (session, name)."""
    session_dir = dir_name(session, "session")
    return root / "sessions" / session_dir / (dir_name(name, "snapshot name") + NEW_SUFFIX)


def to_old_layout(
    root: Path, snapshots: Iterable[tuple[str, str]] | None = None, *, keep_new: bool = False
) -> list[Path]:
    """Move the manifests of ``snapshots`` (every one, if None) to the old layout, as a
    format 3 writer would have committed them; with ``keep_new``, leave the new file too
    (what a format 4 writer killed between its commit and the removal of the old manifest
    leaves, if the new file is then written back over it). Returns the old paths."""
    if snapshots is None:
        files = list((root / "sessions").glob(f"*/*{NEW_SUFFIX}"))
    else:
        files = [new_layout_path(root, session, name) for session, name in snapshots]
    moved = []
    for path in files:
        name_dir = path.with_name(path.name[: -len(NEW_SUFFIX)])
        name_dir.mkdir()
        old = name_dir / "manifest"
        if keep_new:
            old.write_bytes(path.read_bytes())
            old.chmod(0o444)
        else:
            os.rename(path, old)
        moved.append(old)
    return moved


def mark_format(root: Path, major: int) -> None:
    """Write the store's FORMAT marker as an older version did."""
    (root / "FORMAT").write_text(f"snapstore format {major}\n")
