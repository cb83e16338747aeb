"""gitignore patterns compiled as git matches them, and the rule that decides a path.

git decides whether a path is ignored by the last pattern that matches the path itself; the
directories on the way are decided first, and a path in an ignored directory is ignored
whatever later patterns say (``Matcher`` in ``excludes`` checks them; a walk never enters an
ignored directory). ``pathspec``'s ``GitIgnoreSpec`` lets a match of a directory on the way
outrank a later pattern matching the path itself: with ``P/``, ``A/``, ``!A/`` it keeps
``A/P`` although git ignores it. Here each pattern becomes one regular expression over the
whole path ("/"-separated, relative to the rules' base), git's wildmatch rules for each
segment (``*`` and ``?`` never match ``/``; ``[...]`` classes, ``!`` or ``^`` negating them,
ranges and POSIX classes; a backslash quotes the next character; ``**`` alone in a segment
matches any number of directories), and the patterns are searched together: one lookup of the
name for plain names, one expression for the other patterns that match a name at any depth,
one for those anchored to a path, each finding the last pattern that matches.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import NamedTuple

_POSIX_CLASSES = {
    "alnum": "a-zA-Z0-9",
    "alpha": "a-zA-Z",
    "blank": " \\t",
    "cntrl": "\\x00-\\x1f\\x7f",
    "digit": "0-9",
    "graph": "!-~",
    "lower": "a-z",
    "print": " -~",
    "punct": "!-/:-@\\[-`{-~",
    "space": " \\t\\n\\r\\f\\v",
    "upper": "A-Z",
    "xdigit": "0-9a-fA-F",
}
_GLOB_CHARS = frozenset("*?[\\")


class InvalidPattern(ValueError):
    """A pattern git cannot match (it discards such a line of an ignore file)."""


def _class_char(char: str) -> str:
    return "\\" + char if char in "\\]^-[" else char


def _bracket(segment: str, start: int) -> tuple[str, int] | None:
    """The regular expression of the bracket expression at ``segment[start]`` (a ``[``) and
    the index of its closing ``]``; None if it is not closed."""
    index = start + 1
    negated = index < len(segment) and segment[index] in "!^"
    index += negated
    items: list[str] = []
    first = True
    while index < len(segment):
        char = segment[index]
        if char == "]" and not first:
            body = "".join(items)
            return (f"[^/{body}]" if negated else f"[{body}]"), index
        first = False
        if char == "[" and segment.startswith("[:", index):
            end = segment.find(":]", index + 2)
            if end < 0:
                raise InvalidPattern(f"unclosed character class in {segment!r}")
            name = segment[index + 2 : end]
            if name not in _POSIX_CLASSES:
                raise InvalidPattern(f"unknown character class [:{name}:]")
            items.append(_POSIX_CLASSES[name])
            index = end + 2
            continue
        if char == "\\":
            index += 1
            if index >= len(segment):
                return None
            char = segment[index]
        low = char
        if segment.startswith("-", index + 1) and index + 2 < len(segment):
            high = segment[index + 2]
            if high != "]":
                if high == "\\":
                    if index + 3 >= len(segment):
                        return None
                    high = segment[index + 3]
                    index += 1
                # git matches a range's first character even when the range is reversed
                # (``[z-a]`` is ``[z]``); a reversed range adds nothing more.
                items.append(
                    f"{_class_char(low)}-{_class_char(high)}" if low <= high else _class_char(low)
                )
                index += 3
                continue
        items.append(_class_char(low))
        index += 1
    return None


def segment_expression(segment: str) -> str:
    """The regular expression of one segment of a pattern (not ``**``)."""
    out: list[str] = []
    index = 0
    while index < len(segment):
        char = segment[index]
        if char == "\\":
            index += 1
            if index >= len(segment):
                raise InvalidPattern("a pattern cannot end with a backslash")
            out.append(re.escape(segment[index]))
        elif char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            found = _bracket(segment, index)
            if found is None:
                raise InvalidPattern(f"unclosed [ in {segment!r} (git matches nothing with it)")
            expression, index = found
            out.append(expression)
        else:
            out.append(re.escape(char))
        index += 1
    return "".join(out)


class Rule(NamedTuple):
    """One compiled pattern: whether it re-includes (``!``), matches directories only (a
    trailing ``/``), and matches a name at any depth (no other ``/``): then ``expression``
    matches the name alone, and ``literal`` is the name when it holds no glob character."""

    negated: bool
    directory_only: bool
    name_only: bool
    expression: str
    literal: str | None


def globstar(segment: str) -> str:
    """A segment of two or more stars alone is git's ``**`` (``***`` too); others as they are."""
    return "**" if len(segment) >= 2 and segment.strip("*") == "" else segment


@functools.lru_cache(maxsize=8192)
def compile_rule(pattern: str) -> Rule | None:
    """``pattern`` (a line of an ignore file, trailing blanks already handled) compiled; None
    for one that matches nothing (``/``); InvalidPattern for one git cannot match."""
    negated = pattern.startswith("!")
    body = pattern[1:] if negated else pattern
    directory_only = body.endswith("/")
    body = body[:-1] if directory_only else body
    if not body:
        if negated or not directory_only:
            raise InvalidPattern(f"{pattern!r} names nothing")
        return None
    if "/" not in body:
        literal = None if _GLOB_CHARS & set(body) else body
        return Rule(negated, directory_only, True, segment_expression(body), literal)
    segments = [globstar(segment) for segment in body.removeprefix("/").split("/")]
    if len(segments) == 2 and segments[0] == "**" and "/" not in segments[1]:
        return compile_rule(
            ("!" if negated else "") + segments[1] + ("/" if directory_only else "")
        )
    last = len(segments) - 1
    parts = []
    for index, segment in enumerate(segments):
        if segment == "**":
            parts.append(".+" if index == last else "(?:.*/)?")
        else:
            parts.append(segment_expression(segment) + ("" if index == last else "/"))
    expression = "".join(parts)
    re.compile(expression)
    return Rule(negated, directory_only, False, expression, None)


def is_valid(pattern: str) -> bool:
    """Whether git can match ``pattern``."""
    try:
        compile_rule(pattern)
    except (InvalidPattern, re.error):
        return False
    return True


def _alternation(indexed: list[tuple[int, str]]) -> tuple[re.Pattern[str] | None, list[int]]:
    """One expression matching what any of ``indexed`` matches, the last rule first (its
    group tells which matched), and the rule index of each group."""
    if not indexed:
        return None, []
    ordered = sorted(indexed, reverse=True)
    expression = "|".join(f"({text})" for _, text in ordered)
    return re.compile(expression, re.DOTALL), [index for index, _ in ordered]


class _Kind:
    """The rules that can match one kind of path (files, or directories), searched together."""

    def __init__(self, rules: Sequence[tuple[int, Rule]]) -> None:
        self.literals: dict[str, int] = {}
        names: list[tuple[int, str]] = []
        paths: list[tuple[int, str]] = []
        for index, rule in rules:
            if rule.literal is not None:
                self.literals[rule.literal] = index
            elif rule.name_only:
                names.append((index, rule.expression))
            else:
                paths.append((index, rule.expression))
        self.names, self.name_groups = _alternation(names)
        self.paths, self.path_groups = _alternation(paths)

    def last_match(self, path: str) -> int:
        """The index of the last rule matching ``path`` itself, or -1."""
        name = path.rpartition("/")[2]
        best = self.literals.get(name, -1)
        if self.names is not None:
            found = self.names.fullmatch(name)
            if found is not None and found.lastindex is not None:
                best = max(best, self.name_groups[found.lastindex - 1])
        if self.paths is not None:
            found = self.paths.fullmatch(path)
            if found is not None and found.lastindex is not None:
                best = max(best, self.path_groups[found.lastindex - 1])
        return best


class RuleSet:
    """An ordered list of patterns, compiled; ``deciding`` finds the one that decides a path
    (the directories on the way being decided already)."""

    def __init__(self, patterns: Sequence[str]) -> None:
        compiled: list[tuple[int, Rule]] = []
        for index, pattern in enumerate(patterns):
            try:
                rule = compile_rule(pattern)
            except (InvalidPattern, re.error) as error:
                raise InvalidPattern(f"{pattern!r}: {error}") from None
            if rule is not None:
                compiled.append((index, rule))
        self.negated = {index: rule.negated for index, rule in compiled}
        self._files = _Kind([(i, rule) for i, rule in compiled if not rule.directory_only])
        self._dirs = _Kind(compiled)

    def deciding(self, path: str, is_dir: bool) -> int:
        """The index of the last pattern matching ``path`` itself, or -1."""
        return (self._dirs if is_dir else self._files).last_match(path)

    def excludes(self, path: str, is_dir: bool) -> bool:
        """True if the last pattern matching ``path`` itself excludes it."""
        index = self.deciding(path, is_dir)
        return index >= 0 and not self.negated[index]
