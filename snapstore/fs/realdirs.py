"""A directory's real path, found without ``os.path.realpath``'s Python walk in the common case.

``realpath`` looks at every component of a path in Python (a join, an ``lstat`` and a few
string operations each); a create resolves its base directory at every call. Most bases
hold no symlink on the way: an ``lstat`` of each component shows it, and the path is then
its own real path. Any symlink, missing component or error takes ``realpath`` itself.
"""

from __future__ import annotations

import os
from stat import S_ISDIR, S_ISLNK


def real_directory(path: str) -> tuple[str, bool]:
    """``os.path.realpath(path)`` and whether it is a directory (``os.path.isdir(path)``):
    ``path`` must be absolute and normal (``os.path.abspath``'s). With no symlink on the
    way it is its own real path, and the ``lstat`` of its last component says whether it is
    a directory."""
    if os.sep != "/" or not path.startswith("/") or path == "/":
        return os.path.realpath(path), os.path.isdir(path)
    current = ""
    try:
        for part in path[1:].split("/"):
            current += "/" + part
            mode = os.lstat(current).st_mode
            if S_ISLNK(mode):
                return os.path.realpath(path), os.path.isdir(path)
    except OSError:
        return os.path.realpath(path), os.path.isdir(path)
    return path, S_ISDIR(mode)
