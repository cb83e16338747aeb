"""The change set an incremental create builds on: what something that follows a tree (the
watch of a long-lived server) promises about the paths that changed, and the path relations
both sides reason with. Kept apart from the create so a watcher can speak it without loading
the create pipeline."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class ChangedPaths:
    """Every change to a base directory since ``since_ns`` (``time.monotonic_ns()`` of this
    process), as paths relative to it (``/``-separated, ``"."`` the base itself):

    every path whose entry (kind, mode, size, mtime, digest, link target) may differ, or that
    may have appeared or disappeared, lies at or below a path of ``rescan``, or is a directory
    of ``refresh`` (only its own entry may differ: a chmod, a name added or removed in it).
    """

    rescan: frozenset[str] = frozenset()
    refresh: frozenset[str] = frozenset()
    since_ns: int = 0


ChangeSource = Callable[[], ChangedPaths | None]
"""Called once, with the base directory locked and before anything is scanned: the changes
since the previous checkpoint, or None when they are not known (a full scan follows)."""


def under(path: str, root: str) -> bool:
    """True if ``path`` is ``root`` or lies below it (``"."`` holds everything)."""
    return root == "." or path == root or path.startswith(root + "/")


def outermost(paths: Iterable[str]) -> list[str]:
    """``paths`` without those lying below another of them, shallowest first."""
    kept: list[str] = []
    for path in sorted(paths, key=lambda p: (p.count("/"), p)):
        if not any(under(path, other) for other in kept):
            kept.append(path)
    return kept
