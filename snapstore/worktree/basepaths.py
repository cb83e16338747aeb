"""Paths given relative to a base directory (or absolute inside it), as a snapshot records
them."""

from __future__ import annotations

import os

from snapstore.errors import UnsafePathError
from snapstore.format.paths import check_relative_path


def relative_to_base(base_dir: str, path: str | os.PathLike[str]) -> str:
    """``path`` (relative to ``base_dir``, or absolute inside it) as a normalized relative path;
    ``"."`` for the base itself. UnsafePathError for an empty path, one outside the base, or
    one a snapshot cannot record (a backslash, a drive, a name that is not UTF-8...): it is
    refused before anything is read, never recorded."""
    given = os.fspath(path)
    if not given:
        raise UnsafePathError("an empty path names nothing: pass '.' for the whole base dir")
    joined = os.path.normpath(os.path.join(base_dir, given))
    relative = os.path.relpath(joined, base_dir)
    if relative == ".":
        return "."
    if relative == ".." or relative.startswith("../") or os.path.isabs(relative):
        raise UnsafePathError(f"path {given!r} lies outside the base dir {base_dir!r}")
    return check_relative_path(relative.replace(os.sep, "/"))
