"""git's ignore rules that apply before a checkpoint's walk begins: those of the repository the
base directory lies in, and those of the directories on the way to each requested path.

git decides whether a path is ignored from ``$GIT_DIR/info/exclude`` and the ``.gitignore``
of every directory from the top of the work tree down to the path, each relative to its own
directory, a deeper file winning over a higher one; a path inside an ignored directory is
ignored whatever later rules say. A checkpoint walks from its requested paths down, meeting
the ``.gitignore`` files below them (``scan``); this module reads the others, once per create,
before the walk:

- **Above the base directory**: the top of the work tree is the nearest directory, from the
  base up, holding a ``.git`` directory (with a ``HEAD``) or a ``.git`` file naming one
  (``gitdir:``, as in linked worktrees and submodules), on the base directory's filesystem,
  as git stops at a filesystem boundary. Its ``info/exclude`` (of the common directory, for a
  linked worktree) and the ``.gitignore`` files of the directories from the top down to the
  base's parent are rewritten relative to the base (``reroot``). A rule that ignores the base
  directory or a directory above it ignores everything the checkpoint could record: the
  create is refused rather than recording nothing (``ignored``).
- **Inside the base directory**: the ``.gitignore`` of each directory on the way to a
  requested path (the base's own, for any path but ``.``), rewritten as the walk rewrites
  those it meets (``excludes.rebase``).

Nothing is followed that git would not follow: a symlinked ``.gitignore`` or ``info/exclude``
is not read, a ``.git`` that is a symlink does not make a work tree, and the user's global
``core.excludesFile`` is not read (a checkpoint's rules come from the tree and its repository
alone, whoever takes it).
"""

from __future__ import annotations

import functools
import os
import re
import stat
from collections.abc import Sequence
from typing import NamedTuple

from snapstore.format.paths import parents
from snapstore.fs.reading import open_regular_stat, read_all
from snapstore.worktree.excludes import GITIGNORE, read_patterns, rebase
from snapstore.worktree.waydirs import WayDirs, WayError
from snapstore.worktree.wildmatch import InvalidPattern, globstar, segment_expression

GIT = ".git"
MAX_GITDIR_FILE_BYTES = 4096


class Repository(NamedTuple):
    """A work tree found above a directory: its top and the file of its ``info/exclude``."""

    top: str
    exclude_file: str


class LeadingRules(NamedTuple):
    """git's rules that apply before the walk: the patterns (relative to the base, in order),
    the directories inside the base whose ``.gitignore`` they include (the walk does not read
    those again), and why everything is ignored, or None."""

    patterns: tuple[str, ...] = ()
    read_dirs: frozenset[str] = frozenset()
    ignored: str | None = None


def _read_small(path: str) -> bytes | None:
    """The bytes of a small regular file at ``path`` (not a symlink), or None."""
    try:
        fd, info = open_regular_stat(path, follow=False)
    except OSError:
        return None
    try:
        size = info.st_size
        return read_all(fd, size) if size <= MAX_GITDIR_FILE_BYTES else None
    except OSError:
        return None
    finally:
        os.close(fd)


def _git_dir(directory: str) -> str | None:
    """The git directory that makes ``directory`` the top of a work tree, or None: its
    ``.git`` directory if that holds a ``HEAD``, or the directory a ``.git`` file names."""
    dot_git = os.path.join(directory, GIT)
    try:
        info = os.lstat(dot_git)
    except OSError:
        return None
    if stat.S_ISDIR(info.st_mode):
        return dot_git if os.path.lexists(os.path.join(dot_git, "HEAD")) else None
    if not stat.S_ISREG(info.st_mode):
        return None
    data = _read_small(dot_git)
    if data is None or not data.startswith(b"gitdir:"):
        return None
    try:
        named = data[len(b"gitdir:") :].decode("utf-8").strip()
    except UnicodeDecodeError:
        return None
    if not named or "\x00" in named:
        return None
    git_dir = os.path.normpath(os.path.join(directory, named))
    return git_dir if os.path.isdir(git_dir) else None


def _common_dir(git_dir: str) -> str:
    """The directory holding ``info/exclude`` for ``git_dir``: the common directory its
    ``commondir`` file names (a linked worktree's), else itself."""
    data = _read_small(os.path.join(git_dir, "commondir"))
    if data is None:
        return git_dir
    try:
        named = data.decode("utf-8").strip()
    except UnicodeDecodeError:
        return git_dir
    if not named or "\x00" in named:
        return git_dir
    return os.path.normpath(os.path.join(git_dir, named))


def find_repository(directory: str) -> Repository | None:
    """The work tree ``directory`` (a real path: no symlink on the way) lies in, or None:
    looked for from ``directory`` up, without leaving its filesystem."""
    try:
        device = os.lstat(directory).st_dev
    except OSError:
        return None
    current = directory
    while True:
        git_dir = _git_dir(current)
        if git_dir is not None:
            return Repository(current, os.path.join(_common_dir(git_dir), "info", "exclude"))
        parent = os.path.dirname(current)
        if parent == current:
            return None
        try:
            if os.lstat(parent).st_dev != device:
                return None
        except OSError:
            return None
        current = parent


def _split(pattern: str) -> tuple[bool, list[str], bool]:
    """A gitignore pattern as (negated, its segments from the directory it applies to,
    directory only); a pattern without a slash but a trailing one matches at any depth, so it
    gets a leading ``**``."""
    negated = pattern.startswith("!")
    body = pattern[1:] if negated else pattern
    directory_only = body.endswith("/")
    core = body.rstrip("/")
    if "/" in core:
        return negated, [globstar(s) for s in core.lstrip("/").split("/")], directory_only
    return negated, ["**", core], directory_only


@functools.lru_cache(maxsize=4096)
def _segment_matcher(segment: str) -> re.Pattern[str] | None:
    try:
        return re.compile(segment_expression(segment), re.DOTALL)
    except (InvalidPattern, re.error):
        return None


def _segment_matches(segment: str, name: str) -> bool:
    """Whether one segment of a pattern (no ``**``) matches the directory name ``name``."""
    matcher = _segment_matcher(segment)
    return matcher is not None and matcher.fullmatch(name) is not None


def reroot(pattern: str, components: Sequence[str]) -> tuple[list[str], list[int]]:
    """A pattern of the ignore rules of a directory D, for a base directory D/``components``:
    the patterns relative to the base that match what it matches below the base, and the
    depths (1 for D's child on the way, ``len(components)`` for the base itself) of the
    directories on the way that it matches itself."""
    negated, segments, directory_only = _split(pattern)
    last = len(segments) - 1
    states = {0}
    matched: list[int] = []
    for depth, name in enumerate(components, start=1):
        reachable = set(states)
        for index in sorted(states):
            while index < last and segments[index] == "**":
                index += 1
                reachable.add(index)
        states = set()
        for index in reachable:
            if index > last:
                continue
            segment = segments[index]
            if segment == "**":
                states.add(index)
                if index == last:
                    matched.append(depth)
            elif _segment_matches(segment, name):
                states.add(index + 1)
                if index == last:
                    matched.append(depth)
        if not states:
            break
    bang = "!" if negated else ""
    if segments[0] == "**" and len(segments) == 2 and 0 in states:
        return [pattern], sorted(set(matched))
    rerooted = sorted(
        bang + "/" + "/".join(segments[index:]) + ("/" if directory_only else "")
        for index in states
        if index <= last
    )
    return rerooted, sorted(set(matched))


def _above_base(real_base: str) -> tuple[list[str], str | None]:
    """The rules of the repository above ``real_base`` rewritten relative to it, and why
    they ignore it whole, or None."""
    repository = find_repository(real_base)
    if repository is None:
        return [], None
    relative = os.path.relpath(real_base, repository.top)
    components = [] if relative == "." else relative.split(os.sep)
    if components[:1] == [GIT]:
        return [], None  # inside the git directory: not a work tree
    sources = [(repository.exclude_file, 0)]
    sources += [
        (os.path.join(repository.top, *components[:depth], GITIGNORE), depth)
        for depth in range(len(components))
    ]
    rules: list[str] = []
    deciding: dict[int, tuple[bool, str, str]] = {}
    for path, depth in sources:
        for pattern in read_patterns(path):
            rerooted, matched = reroot(pattern, components[depth:])
            rules += rerooted
            for level in matched:
                deciding[depth + level] = (pattern.startswith("!"), pattern, path)
    for level in sorted(deciding):
        negated, pattern, path = deciding[level]
        if not negated:
            ignored = os.path.join(repository.top, *components[:level])
            return rules, f"{ignored} is ignored by the rule {pattern!r} of {path}"
    return rules, None


def leading_rules(
    base: str, requested: Sequence[str], *, real_base: str | None = None
) -> LeadingRules:
    """git's rules for a checkpoint of the ``requested`` paths of ``base`` that the walk of
    those paths does not meet: the repository's above the base, then the ``.gitignore`` of
    each directory inside the base on the way to a requested path, outermost first, each
    read through a descriptor of its directory opened one name at a time without following
    a link (``WayDirs``): a directory swapped for a symlink meanwhile never brings in rules
    from outside the base. The descriptors are closed on return: the scan looks its paths
    up again, so a directory replaced in between is scanned as it is then, never mixed
    with the one the rules came from. ``real_base``: ``base`` with its symlinks resolved,
    if the caller just did that."""
    rules, ignored = _above_base(os.path.realpath(base) if real_base is None else real_base)
    on_the_way = {
        directory for path in requested if path != "." for directory in ["", *parents(path)]
    }
    if not on_the_way:
        return LeadingRules(tuple(rules), frozenset(on_the_way), ignored)
    with WayDirs(base) as way:
        not_directories: set[str] = set()
        for directory in sorted(on_the_way, key=lambda d: (d.count("/") if d else -1, d)):
            if directory.rpartition("/")[0] in not_directories and directory:
                not_directories.add(directory)
                continue
            try:
                fd, _ = way.place(directory)
            except (OSError, WayError):
                not_directories.add(directory)  # the scan refuses a path beneath it
                continue
            found = read_patterns(os.path.join(base, directory, GITIGNORE), in_dir=fd)
            rules += (rebase(pattern, directory) for pattern in found)
    return LeadingRules(tuple(rules), frozenset(on_the_way), ignored)
