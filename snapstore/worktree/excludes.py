"""Exclude rules: which paths under a base directory a snapshot leaves out, in gitignore syntax.

The rules of a snapshot are one ordered list of patterns relative to its base directory (later
patterns override earlier ones, ``!`` re-includes): with ``gitignore``, git's rules first (those
of the repository above the base, ``gitrules``, then every ``.gitignore`` met while walking,
rewritten relative to the base), then the fixed rules, which win over them as git's command-line
patterns win over ignore files: the built-in VCS metadata directories, the caller's patterns and
the base directory's ``.snapstoreignore``. The list is recorded in the manifest, so that a
restore of the snapshot leaves exactly the same paths alone. Matching is git's (``wildmatch``):
the last rule matching a path itself decides, a path in an excluded directory is excluded; the
common case (the built-in rules alone) is a name lookup. Storage roots are never recorded
whatever the rules say (see ``scan``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence

from snapstore.errors import InvalidValueError
from snapstore.format.paths import parents
from snapstore.worktree import wildmatch
from snapstore.worktree.ignorefiles import read_ignore_file

VCS_DIRS = (".git", ".hg", ".svn", ".jj")
BUILT_IN = tuple(VCS_DIRS)
IGNORE_FILE = ".snapstoreignore"
GITIGNORE = ".gitignore"
MAX_IGNORE_FILE_BYTES = 1 << 20


def read_patterns(path: str, *, in_dir: int | None = None) -> list[str]:
    """The pattern lines of an ignore file (comments and blank lines dropped); none if the
    file is missing, unreadable, over 1 MiB, or not a regular file: a symlink is not followed,
    as git does not follow a symlinked ``.gitignore``. A line that is not UTF-8 is left out:
    it could only match a name that is not UTF-8, which no snapshot records. ``in_dir``: a
    descriptor of the directory holding it, opened by the caller without following links. A
    file holding the bytes this process last read there is not parsed again
    (``ignorefiles``)."""
    return read_ignore_file(path, parse_patterns, MAX_IGNORE_FILE_BYTES, in_dir=in_dir)


def parse_patterns(data: bytes) -> list[str]:
    """The pattern lines of an ignore file's bytes, as ``read_patterns`` keeps them."""
    data = data.removeprefix(b"\xef\xbb\xbf")  # git skips a UTF-8 byte order mark
    patterns = []
    for raw in data.split(b"\n"):
        try:
            line = _strip(raw.decode("utf-8"))
        except UnicodeDecodeError:
            continue
        if not line or line.startswith("#"):
            continue
        if line[0] in " \t":
            line = "\\" + line  # a leading space is part of the name in git
        if is_valid_pattern(line):
            patterns.append(line)
    return patterns


def is_valid_pattern(pattern: str) -> bool:
    """Whether ``pattern`` is a gitignore pattern that can be matched (``!`` alone, a
    trailing backslash or an unclosed ``[`` cannot; a reversed range ``[z-a]`` matches its
    first character, as in git). An ignore file's invalid lines
    are left out, as git leaves them out: they match nothing."""
    return wildmatch.is_valid(pattern)


def _strip(line: str) -> str:
    """A gitignore line without its trailing spaces (unless escaped with a backslash)."""
    stripped = line.rstrip(" \t\r")
    if stripped.endswith("\\") and len(stripped) < len(line.rstrip("\r")):
        return stripped + " "
    return stripped


_GLOB_SPECIAL = re.compile(r"[\\*?\[\]]")


def escape(directory: str) -> str:
    """``directory`` (relative, "/"-separated) as the start of a pattern (followed by ``/``)
    matching exactly that path: every character a gitignore pattern reads specially is
    escaped with a backslash (glob characters anywhere; ``!``, ``#`` and a blank where they
    would start the pattern). The same directory is always escaped the same way, so the rules
    rebased below it start with its escaped form."""
    escaped = _GLOB_SPECIAL.sub(lambda found: "\\" + found[0], directory)
    if escaped[:1] in ("!", "#", " ", "\t"):
        escaped = "\\" + escaped
    return escaped


def rebase(pattern: str, directory: str) -> str:
    """A pattern of the ignore file in ``directory`` (relative to the base, "" for the base
    itself) as a pattern relative to the base, with the same meaning: the directory's name is
    escaped, so that ``x*``, ``[ab]``, ``!keep`` or ``#tmp`` stand for themselves."""
    if not directory:
        return pattern
    negated = pattern.startswith("!")
    body = pattern[1:] if negated else pattern
    anchored = "/" in body.rstrip("/")
    prefix = escape(directory)
    rebased = f"{prefix}/{body.lstrip('/')}" if anchored else f"{prefix}/**/{body}"
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
    """Decides whether a path (relative to the base) is excluded by an ordered pattern list:
    git's rules (``gitignore``, which ``.gitignore`` files met while walking extend), then the
    fixed ones (``patterns``), which win over them. The lists only grow."""

    def __init__(self, patterns: Iterable[str] = (), *, gitignore: Iterable[str] = ()) -> None:
        self.fixed: list[str] = list(patterns)
        self.gitignore: list[str] = list(gitignore)
        self.patterns: list[str] = []
        self._names: frozenset[str] = frozenset()
        self._rules: wildmatch.RuleSet | None = None
        self._compile()

    def extend(self, patterns: Iterable[str]) -> None:
        """Add patterns after the current ones (they win over every earlier one)."""
        added = list(patterns)
        if added:
            self.fixed += added
            self._compile()

    def extend_gitignore(self, patterns: Iterable[str]) -> None:
        """Add git's rules after the git rules already there (the fixed rules still win)."""
        added = list(patterns)
        if added:
            self.gitignore += added
            self._compile()

    def _compile(self) -> None:
        self.patterns = self.gitignore + self.fixed
        if all(p in BUILT_IN for p in self.patterns):
            self._names = frozenset(self.patterns)
            self._rules = None
        else:
            self._names = frozenset()
            try:
                self._rules = wildmatch.RuleSet(self.patterns)
            except wildmatch.InvalidPattern as error:  # only a damaged or forged snapshot's
                raise InvalidValueError(f"an exclude pattern cannot be matched: {error}") from None

    @property
    def simple_names(self) -> frozenset[str]:
        """Names excluded wherever they appear, when those are the only rules (else empty)."""
        return self._names

    def __bool__(self) -> bool:
        return bool(self.patterns)

    def __call__(self, path: str, is_dir: bool) -> bool:
        """True if ``path`` (relative to the base, "/"-separated) is excluded, the directories
        on the way being known not to be (as when walking down to it)."""
        if self._rules is None:
            return path.rpartition("/")[2] in self._names
        return self._rules.excludes(path, is_dir)

    def rule_leaving_out(self, path: str, is_dir: bool) -> str | None:
        """The rule that excludes ``path`` or a directory on the way to it, or None: a path in
        an excluded directory is excluded whatever later rules say, as in git."""
        for directory in parents(path):
            rule = self._deciding_rule(directory, True)
            if rule is not None:
                return rule
        return self._deciding_rule(path, is_dir)

    def _deciding_rule(self, path: str, is_dir: bool) -> str | None:
        if self._rules is None:
            name = path.rpartition("/")[2]
            return name if name in self._names else None
        index = self._rules.deciding(path, is_dir)
        if index < 0 or self._rules.negated[index]:
            return None
        return self.patterns[index]
