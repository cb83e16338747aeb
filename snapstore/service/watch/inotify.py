"""The kernel's inotify(7) as the watch uses it: the event bits, the mask every directory is
watched with, opening an instance (``inotify_simple``, the ``watch`` extra), and whether this
platform can watch at all."""

from __future__ import annotations

import sys
from typing import Any, Protocol

IN_MODIFY = 0x2
IN_ATTRIB = 0x4
IN_CLOSE_WRITE = 0x8
IN_MOVED_FROM = 0x40
IN_MOVED_TO = 0x80
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_UNMOUNT = 0x2000
IN_Q_OVERFLOW = 0x4000
IN_IGNORED = 0x8000
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
IN_EXCL_UNLINK = 0x04000000
IN_ISDIR = 0x40000000
"""The bits of inotify(7), the same on every Linux architecture."""

WATCH_MASK = (
    IN_MODIFY
    | IN_ATTRIB
    | IN_CLOSE_WRITE
    | IN_MOVED_FROM
    | IN_MOVED_TO
    | IN_CREATE
    | IN_DELETE
    | IN_DELETE_SELF
    | IN_MOVE_SELF
    | IN_ONLYDIR
    | IN_DONT_FOLLOW
    | IN_EXCL_UNLINK
)
"""What every watched directory reports: any change to a name in it or to its own entry."""

NAME_CHANGES = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO
"""Events that add or remove a name in a directory (and so change the directory's mtime)."""


def watch_support() -> dict[str, Any]:
    """Whether this server can watch directories: ``available``, and the ``reason`` if not."""
    if not sys.platform.startswith("linux"):
        return {"available": False, "reason": "inotify is Linux only: watched creates scan"}
    try:
        import inotify_simple  # noqa: F401
    except ImportError:
        return {
            "available": False,
            "reason": "the watch extra is not installed (pip install 'snapstore[watch]')",
        }
    return {"available": True, "reason": None}


class Inotify(Protocol):
    """The part of ``inotify_simple.INotify`` the watch uses."""

    def add_watch(self, path: str, mask: int) -> int: ...
    def rm_watch(self, wd: int) -> None: ...
    def read(self, timeout: int | None = None) -> list[Any]: ...
    def fileno(self) -> int: ...
    def close(self) -> None: ...


def new_inotify() -> Inotify:
    """A non-blocking inotify instance (tests replace this to fake the kernel's limits)."""
    from inotify_simple import INotify

    instance: Inotify = INotify(nonblocking=True)
    return instance
