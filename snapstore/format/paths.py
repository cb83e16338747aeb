"""Rules for the relative paths a snapshot records and a restore writes."""

from __future__ import annotations

import os
import posixpath
import re
import unicodedata
from collections.abc import Container, Iterable, Sequence
from operator import attrgetter

from snapstore.errors import PathNotInSnapshotError, UnsafePathError
from snapstore.models import FileEntry

MAX_PATH_BYTES = 4096
MAX_COMPONENT_BYTES = 255
_DRIVE = re.compile(r"^[A-Za-z]:")


def check_relative_path(path: object) -> str:
    """Return ``path`` if it is a normalized relative POSIX path that stays inside its base.

    Refused: non-strings, empty, NUL, backslashes, absolute, drive or UNC paths, and empty,
    ``.`` or ``..`` components.
    """
    if type(path) is str and is_plain_path(path):
        return path
    return check_relative_path_fully(path)


def check_relative_path_fully(path: object) -> str:
    """check_relative_path without its fast path for plain paths (the full rules)."""
    if not isinstance(path, str) or not path:
        raise UnsafePathError(f"path must be a non-empty string, got {path!r}")
    if "\x00" in path:
        raise UnsafePathError(f"path {path!r} contains a NUL byte")
    if "\\" in path:
        raise UnsafePathError(f"path {path!r} contains a backslash")
    if path.startswith("/") or _DRIVE.match(path):
        raise UnsafePathError(f"path {path!r} is absolute")
    try:
        encoded = path.encode("utf-8")
    except UnicodeEncodeError:
        raise UnsafePathError(f"path {path!r} is not valid UTF-8") from None
    if len(encoded) > MAX_PATH_BYTES:
        raise UnsafePathError(f"path {path[:60]!r}... is longer than {MAX_PATH_BYTES} bytes")
    for part in path.split("/"):
        if part in ("", ".", ".."):
            raise UnsafePathError(f"path {path!r} is not normalized or escapes its base")
        if len(part.encode("utf-8")) > MAX_COMPONENT_BYTES:
            raise UnsafePathError(f"path {path!r} has a component over {MAX_COMPONENT_BYTES} bytes")
    return path


def is_plain_path(path: str) -> bool:
    """A cheap sufficient test for the common case: a short ASCII path with no backslash,
    NUL or drive, and no empty, ``.`` or ``..`` component (large manifests hold thousands)."""
    if not (0 < len(path) <= MAX_COMPONENT_BYTES and path.isascii()):
        return False
    if path[0] == "/" or path[1:2] == ":" or "\\" in path or "\x00" in path:
        return False
    wrapped = f"/{path}/"
    return "//" not in wrapped and "/./" not in wrapped and "/../" not in wrapped


def all_plain_paths(paths: Sequence[str]) -> bool:
    """True only if every one of ``paths`` (strings) passes is_plain_path, checked in bulk:
    a few C-level scans of one joined string instead of a Python call per path."""
    if not paths:
        return True
    lengths = list(map(len, paths))
    if min(lengths) == 0 or max(lengths) > MAX_COMPONENT_BYTES:
        return False
    wrapped = "/" + "/\x00/".join(paths) + "/"
    return (
        wrapped.isascii()
        and wrapped.count("\x00") == len(paths) - 1
        and ":" not in wrapped
        and "\\" not in wrapped
        and "//" not in wrapped
        and "/./" not in wrapped
        and "/../" not in wrapped
    )


def child_path(parent: str, name: str) -> str:
    """``parent/name`` (``name`` alone under ``"."``), checked like check_relative_path.

    ``parent`` must already be checked and ``name`` come from a directory listing (never
    empty, ``.`` or ``..``, never holding ``/``); short plain names then need no full check.
    """
    path = name if parent == "." else f"{parent}/{name}"
    if (
        len(path) * 4 <= MAX_PATH_BYTES
        and len(name) <= MAX_COMPONENT_BYTES
        and name.isascii()
        and "/" not in name
        and "\\" not in name
        and "\x00" not in name
        and name not in (".", "..")
        and not (parent == "." and _DRIVE.match(name))
    ):
        return path
    return check_relative_path(path)


def plain_names(parent: str, names: list[str]) -> bool:
    """True if ``parent/name`` passes child_path's fast test for every one of ``names``,
    checked in bulk (one directory's listing at a time). Never true at the top level, where a
    name could look like a drive."""
    if parent == "." or not names:
        return False
    joined = "".join(names)
    longest = max(map(len, names))
    return (
        joined.isascii()
        and "/" not in joined
        and "\\" not in joined
        and "\x00" not in joined
        and "." not in names
        and ".." not in names
        and "" not in names
        and longest <= MAX_COMPONENT_BYTES
        and (len(parent) + 1 + longest) * 4 <= MAX_PATH_BYTES
    )


def recordable_link_target(target: str) -> bool:
    """Whether a snapshot can record a symlink with the target text ``target`` (as read by
    ``os.readlink``: bytes that are not UTF-8 come back as lone surrogates, which it cannot)."""
    try:
        target.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return bool(target) and "\x00" not in target


def printable(path: str) -> str:
    """``path`` as valid Unicode text: bytes a file name holds that are not UTF-8 (kept by
    Python as lone surrogates) become ``\\xNN`` escapes. How unrecordable names are reported."""
    try:
        raw = path.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raw = path.encode("utf-8", "surrogatepass")
    return raw.decode("utf-8", "backslashreplace")


def nearest_listed_ancestor(path: str, listed: Container[str]) -> str | None:
    """The closest proper ancestor of ``path`` that ``listed`` holds, if any (no list built:
    validators call this once per entry of large manifests)."""
    cut = path.rfind("/")
    while cut > 0:
        parent = path[:cut]
        if parent in listed:
            return parent
        cut = path.rfind("/", 0, cut)
    return None


def parents(path: str) -> list[str]:
    """The proper ancestors of a relative path, outermost first: ``a/b/c`` -> ``a``, ``a/b``."""
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


def fold(path: str) -> str:
    """A path as a case-insensitive, normalizing filesystem would compare it (normalized
    again after folding: folding some composed letters, such as U+0390, decomposes them)."""
    if path.isascii():
        return path.lower()
    return unicodedata.normalize("NFC", unicodedata.normalize("NFC", path).casefold())


def find_collisions(paths: Iterable[str]) -> list[tuple[str, str]]:
    """Pairs of distinct paths (or parents) that would name the same file on a case-folding or
    Unicode-normalizing filesystem (Windows, macOS)."""
    every = set(paths)
    added = every
    while added:  # parents not listed themselves, a level at a time (none, for whole trees)
        added = {path.rpartition("/")[0] for path in added} - every - {""}
        every |= added
    if all(map(str.isascii, every)) and len({path.lower() for path in every}) == len(every):
        return []
    seen: dict[str, str] = {}
    collisions: list[tuple[str, str]] = []
    for path in sorted(every):
        key = fold(path)
        other = seen.setdefault(key, path)
        if other != path:
            collisions.append((other, path))
    return collisions


def select_entries(entries: Iterable[FileEntry], paths: Iterable[str] | None) -> list[FileEntry]:
    """The entries a restore of ``paths`` (None: all) touches; each path must be recorded."""
    all_entries = sorted(entries, key=attrgetter("path"))
    if paths is None:
        return all_entries
    wanted = []
    for raw in paths:
        normalized = posixpath.normpath(str(raw).replace(os.sep, "/"))
        wanted.append(check_relative_path(normalized))
    selected = [
        e for e in all_entries if any(e.path == w or e.path.startswith(w + "/") for w in wanted)
    ]
    recorded = {e.path for e in selected}
    for path in wanted:
        if not any(p == path or p.startswith(path + "/") for p in recorded):
            raise PathNotInSnapshotError(f"path {path!r} is not in the snapshot")
    return selected
