"""A directory's real path, found without ``os.path.realpath``'s Python walk in the common case.

``realpath`` looks at every component of a path in Python (a join, an ``lstat`` and a few
string operations each); a create resolves its base directory at every call. Most bases
hold no symlink on the way: an ``lstat`` of each component shows it, and the path is then
its own real path. Any symlink, missing component or error takes ``realpath`` itself, and so
does a path whose spelling is not already its real one whatever lies on the way: one that
starts with ``//`` (kept by ``abspath``, as POSIX allows, but not by ``realpath``), or one
with an empty, ``.`` or ``..`` component.
"""

from __future__ import annotations

import os
from stat import S_ISDIR, S_ISLNK


def _resolved(path: str) -> tuple[str, bool]:
    """``realpath`` and ``isdir`` themselves. A path that no system call takes (an embedded
    NUL byte), or whose symlinks cannot be read (``realpath`` raising, as it does for the
    ``/proc/<pid>/root`` of another user's process), is returned as it is, no directory."""
    try:
        return os.path.realpath(path), os.path.isdir(path)
    except (OSError, ValueError):
        return path, False


def _plain(path: str) -> bool:
    """Whether ``path`` is absolute, starts with a single ``/`` and has no empty, ``.`` or
    ``..`` component: its own real path if no component is a symlink."""
    return (
        os.sep == "/"
        and path.startswith("/")
        and not path.startswith("//")
        and path != "/"
        and path == os.path.normpath(path)
    )


def real_directory(path: str) -> tuple[str, bool]:
    """``os.path.realpath(path)`` and whether it is a directory (``os.path.isdir(path)``).
    With no symlink on the way a plain absolute path is its own real path, and the
    ``lstat`` of its last component says whether it is a directory."""
    if not _plain(path):
        return _resolved(path)
    current = ""
    try:
        for part in path[1:].split("/"):
            current += "/" + part
            mode = os.lstat(current).st_mode
            if S_ISLNK(mode):
                return _resolved(path)
    except (OSError, ValueError):
        return _resolved(path)
    return path, S_ISDIR(mode)
