"""Where a session's lock file lives, for tests that hold it from outside the library."""

from __future__ import annotations

from pathlib import Path

from snapstore.format.names import dir_name


def session_lock_path(root: Path, session: str) -> Path:
    """The lock file of ``session`` in the local store at ``root`` (its directory made)."""
    path = root / "locks" / "sessions" / dir_name(session, "session")
    path.parent.mkdir(parents=True, exist_ok=True)
    return path
