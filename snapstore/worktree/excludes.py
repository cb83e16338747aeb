"""Exclude rules: which paths under a base directory a snapshot leaves out, in gitignore syntax.

The rules of a snapshot are one ordered list of patterns relative to its base directory (later
patterns override earlier ones, ``!`` re-includes): the built-in VCS metadata directories, the
caller's patterns, the base directory's ``.snapstoreignore``, and, when asked for, every
``.gitignore`` met while walking, rewritten relative to the base. The list is recorded in the
manifest, so that a restore of the snapshot leaves exactly the same paths alone. Matching is
``pathspec``'s git-compatible matcher; the common case (the built-in rules alone) is a name
lookup. Storage roots are never recorded whatever the rules say (see ``scan``).
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from snapstore.errors import InvalidValueError
from snapstore.fs.reading import read_regular

if TYPE_CHECKING:
    import pathspec

VCS_DIRS = (".git", ".hg", ".svn", ".jj")
BUILT_IN = tuple(VCS_DIRS)
IGNORE_FILE = ".snapstoreignore"
GITIGNORE = ".gitignore"
MAX_IGNORE_FILE_BYTES = 1 << 20


def read_patterns(path: str) -> list[str]:
    """The pattern lines of an ignore file (comments and blank lines dropped); none if the
    file is missing, unreadable, not a regular file or over 1 MiB."""
    try:
        data, _ = read_regular(path, max_bytes=MAX_IGNORE_FILE_BYTES)
    except OSError:
        return []
    lines = data.decode("utf-8", "replace").splitlines()
    found = (line for line in (_strip(line) for line in lines) if line and not line.startswith("#"))
    return [line for line in found if is_valid_pattern(line)]


@functools.lru_cache(maxsize=4096)
def is_valid_pattern(pattern: str) -> bool:
    """Whether ``pattern`` is a gitignore pattern that can be matched (``!`` alone, a
    trailing backslash or a reversed range ``[z-a]`` cannot). An ignore file's invalid lines
    are left out, as git leaves them out: they match nothing."""
    if not any(special in pattern for special in "[\\!"):
        return True  # what fails to compile needs one of these: no need to load pathspec
    import pathspec

    try:
        pathspec.GitIgnoreSpec.from_lines([pattern])
    except (ValueError, re.error):
        return False
    return True


def _strip(line: str) -> str:
    """A gitignore line without its trailing spaces (unless escaped with a backslash)."""
    stripped = line.rstrip(" \t\r")
    if stripped.endswith("\\") and len(stripped) < len(line.rstrip("\r")):
        return stripped + " "
    return stripped


def rebase(pattern: str, directory: str) -> str:
    """A pattern of the ignore file in ``directory`` (relative to the base, "" for the base
    itself) as a pattern relative to the base, with the same meaning."""
    if not directory:
        return pattern
    negated = pattern.startswith("!")
    body = pattern[1:] if negated else pattern
    anchored = "/" in body.rstrip("/")
    rebased = f"{directory}/{body.lstrip('/')}" if anchored else f"{directory}/**/{body}"
    return ("!" if negated else "") + rebased


def check_patterns(patterns: Iterable[object]) -> list[str]:
    """The caller's patterns as a list of strings; InvalidValueError for anything else."""
    if isinstance(patterns, str):
        raise InvalidValueError("exclude must be a list of patterns, not one string")
    checked = []
    for pattern in patterns:
        if not isinstance(pattern, str) or not pattern or "\x00" in pattern:
            raise InvalidValueError(f"exclude pattern {pattern!r} is not a non-empty string")
        if not is_valid_pattern(pattern):
            raise InvalidValueError(f"exclude pattern {pattern!r} is not a valid gitignore pattern")
        checked.append(pattern)
    return checked


def initial_patterns(base_dir: str, exclude: Sequence[str], *, default_excludes: bool) -> list[str]:
    """The rules a snapshot of ``base_dir`` starts with: built-in, given, ``.snapstoreignore``."""
    patterns = list(BUILT_IN) if default_excludes else []
    patterns += check_patterns(exclude)
    patterns += read_patterns(os.path.join(base_dir, IGNORE_FILE))
    return patterns


class Matcher:
    """Decides whether a path (relative to the base) is excluded by an ordered pattern list.
    Patterns may be added while walking (``.gitignore`` files); the list only grows."""

    def __init__(self, patterns: Iterable[str] = ()) -> None:
        self.patterns: list[str] = []
        self._names: frozenset[str] = frozenset()
        self._spec: pathspec.GitIgnoreSpec | None = None
        self.extend(patterns)

    def extend(self, patterns: Iterable[str]) -> None:
        """Add patterns after the current ones (they win over earlier ones)."""
        added = list(patterns)
        if not added:
            return
        self.patterns += added
        if all(p in BUILT_IN for p in self.patterns):
            self._names = frozenset(self.patterns)
            self._spec = None
        else:
            import pathspec  # deferred: only snapshots with rules of their own pay for it

            self._names = frozenset()
            try:
                self._spec = pathspec.GitIgnoreSpec.from_lines(self.patterns)
            except (ValueError, re.error) as error:  # only a damaged or forged snapshot's
                raise InvalidValueError(f"an exclude pattern cannot be matched: {error}") from None

    @property
    def simple_names(self) -> frozenset[str]:
        """Names excluded wherever they appear, when those are the only rules (else empty)."""
        return self._names

    def __bool__(self) -> bool:
        return bool(self.patterns)

    def __call__(self, path: str, is_dir: bool) -> bool:
        """True if ``path`` (relative to the base, "/"-separated) is excluded."""
        if self._spec is None:
            return path.rpartition("/")[2] in self._names
        return self._spec.match_file(path + "/" if is_dir else path)
