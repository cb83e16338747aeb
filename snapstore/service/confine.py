"""Where a server may work: the allowed directories of ``snapstore mcp`` (and of
``snapstore serve --allow``), and the check that a path given by a client names something
that can exist on disk.

Modelled on the reference MCP filesystem server's allowed directories: every directory a call
reads or writes (a ``base_dir``, a path under it, a restore target, the base directory of a
snapshot read or compared) must lie inside one of them once ``..`` and symlinks are resolved
(``os.path.realpath``). Paths are compared by their components, never as strings, so
``/work/project-old`` is not inside ``/work/project``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

from snapstore.errors import UnsafePathError


class PathNotAllowedError(UnsafePathError):
    """A path lies outside the directories this server may work in."""


def os_path_text(value: str | os.PathLike[str], what: str) -> str:
    """``value`` as a path the operating system can be given; UnsafePathError for one holding a
    NUL byte or a character no file name can hold (a lone surrogate), which every ``os`` call
    would otherwise refuse with a ValueError."""
    text = os.fspath(value)
    if "\x00" in text:
        raise UnsafePathError(f"{what} {text!r} contains a NUL byte")
    try:
        os.fsencode(text)
    except UnicodeEncodeError:
        raise UnsafePathError(f"{what} {text!r} is not a valid file name") from None
    return text


def _is_within(path: str, directory: str) -> bool:
    """Whether the real path ``path`` is ``directory`` or lies below it, by components."""
    return os.path.commonpath([path, directory]) == directory


class AllowedDirectories:
    """The directories a server may work in, each resolved once when the server starts."""

    def __init__(self, directories: Iterable[str | os.PathLike[str]]) -> None:
        resolved: list[str] = []
        for directory in directories:
            real = os.path.realpath(os_path_text(directory, "allowed directory"))
            if not os.path.isdir(real):
                raise UnsafePathError(f"allowed directory {os.fspath(directory)!r} is no directory")
            if real not in resolved:
                resolved.append(real)
        if not resolved:
            raise UnsafePathError("a confined server needs at least one allowed directory")
        self.directories: tuple[str, ...] = tuple(resolved)

    def __repr__(self) -> str:
        return f"AllowedDirectories({list(self.directories)!r})"

    def describe(self) -> str:
        """The allowed directories, for messages."""
        return ", ".join(self.directories)

    def check(self, path: str | os.PathLike[str], what: str, base: str | None = None) -> str:
        """The absolute form of ``path`` (relative to ``base``, else to the working
        directory), after checking that its real path lies in an allowed directory;
        PathNotAllowedError naming them otherwise."""
        text = os_path_text(path, what)
        absolute = os.path.abspath(os.path.join(base, text) if base is not None else text)
        real = os.path.realpath(absolute)
        if not any(_is_within(real, directory) for directory in self.directories):
            shown = f"{text!r}" if real == absolute else f"{text!r} (really {real})"
            raise PathNotAllowedError(
                f"{what} {shown} is outside the directories this server may work in: "
                f"{self.describe()}"
            )
        return absolute

    def check_all(self, paths: Sequence[str | os.PathLike[str]], what: str, base: str) -> None:
        """``check`` each of ``paths``, relative to ``base``, after the library's own check
        (UnsafePathError for a path that leaves the base by its name, such as ``../x``)."""
        from snapstore.worktree.basepaths import relative_to_base

        for path in paths:
            relative_to_base(base, os_path_text(path, what))
            self.check(path, what, base)

    def contains(self, path: str) -> bool:
        """Whether the real path of ``path`` lies in an allowed directory (no error)."""
        try:
            self.check(path, "path")
        except UnsafePathError:
            return False
        return True
