"""The patterns of ignore files read before, kept by each file's bytes.

Every create reads the same few ignore files (``.git/info/exclude``, the ``.gitignore``
files above the base and on the way to the requested paths, ``.snapstoreignore``), almost
always unchanged since the last one. Each is read every time (an open, an ``fstat``, a read:
a few system calls), and parsed again only if its bytes differ from those of the copy read
before. The bytes, not the file's stat, decide: a change that moves no time (a write through
a shared memory mapping of a page already dirty, a file system whose change time is not one)
is seen by the next create, as if nothing were kept.

Kept per process, by path and parser, for at most ``MAX_KEPT`` files of at most
``MAX_KEPT_FILE_BYTES`` each and ``MAX_KEPT_BYTES`` in all (a larger file is parsed every
time; the oldest kept goes first), so a long-running process such as ``snapstore serve``
holds a few megabytes at most whatever the trees it is asked to scan. A forked child keeps
what its parent read, with a lock of its own.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

from snapstore.fs.reading import open_regular_stat, read_all

MAX_KEPT = 1024
"""Ignore files whose patterns one process keeps at most (the oldest kept goes first)."""

MAX_KEPT_FILE_BYTES = 64 * 1024
"""The largest ignore file whose patterns are kept."""

MAX_KEPT_BYTES = 256 * 1024
"""The bytes of all ignore files whose patterns one process keeps at most (parsed patterns
take up to about twenty times their file's bytes)."""

Parser = Callable[[bytes], list[str]]

_kept: dict[tuple[str, Parser], tuple[bytes, tuple[str, ...]]] = {}
_kept_bytes = 0
_kept_lock = threading.Lock()


def _renew_in_child() -> None:
    """A forked child starts with a free lock (another thread may have held it mid-fork)
    and a byte count taken from what it kept (a fork between a change of the copies and of
    the count would leave them apart)."""
    global _kept_lock, _kept_bytes
    _kept_lock = threading.Lock()
    _kept_bytes = sum(len(data) for data, _ in _kept.values())


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_renew_in_child)


def read_ignore_file(
    path: str, parse: Parser, max_bytes: int, *, in_dir: int | None = None
) -> list[str]:
    """``parse`` of the bytes of the regular file at ``path`` (a symlink is not followed);
    none if it is missing, unreadable, over ``max_bytes`` or not a regular file. ``in_dir``:
    a descriptor of the directory holding it, through which it is opened by its name (so a
    directory on the way swapped for a symlink since it was opened leads nowhere else). The
    patterns of a copy read before are returned if the file holds the same bytes."""
    name = path if in_dir is None else os.path.basename(path)
    try:
        fd, info = open_regular_stat(name, dir_fd=in_dir, follow=False)
    except OSError:
        return []
    try:
        if info.st_size > max_bytes:
            return []
        data = read_all(fd, info.st_size)
    except OSError:
        return []
    finally:
        os.close(fd)
    key = (path, parse)
    kept = _kept.get(key)
    if kept is not None and kept[0] == data:
        return list(kept[1])
    patterns = parse(data)
    with _kept_lock:
        _drop(key)
        if len(data) <= MAX_KEPT_FILE_BYTES:
            global _kept_bytes
            while _kept and (len(_kept) >= MAX_KEPT or _kept_bytes + len(data) > MAX_KEPT_BYTES):
                _drop(next(iter(_kept)))
            _kept[key] = (data, tuple(patterns))
            _kept_bytes += len(data)
    return patterns


def _drop(key: tuple[str, Parser]) -> None:
    """Forget the copy kept under ``key``, if any (the caller holds the lock)."""
    global _kept_bytes
    kept = _kept.pop(key, None)
    if kept is not None:
        _kept_bytes -= len(kept[0])


def forget_all() -> None:
    """Drop every kept copy (tests, and a caller that wants every file read again)."""
    global _kept_bytes
    with _kept_lock:
        _kept.clear()
        _kept_bytes = 0
