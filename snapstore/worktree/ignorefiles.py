"""The patterns of ignore files read before, kept by each file's stat signature.

Every create reads the same few ignore files (``.git/info/exclude``, the ``.gitignore``
files above the base and on the way to the requested paths, ``.snapstoreignore``), almost
always unchanged since the last one. A file whose device, inode, size, modification and
change times are those of a copy read before is not read again: an ``lstat`` stands for the
open, the reads and the parse. Its patterns are kept only if the file had settled when it
was read (both its times older than ``SETTLED_NS`` before the read began), git's rule for
racy files and the stat cache's (``statcache``): a write within the same tick of a coarse
clock as the copy kept would leave its times as they were, but any write after a read
gives the file a time later than one that old, so a kept copy is never believed after a
change. A change of the metadata alone (``chmod``) moves the change time too, and the file
is read again.

Kept per process, by path and parser, for at most ``MAX_KEPT`` files of at most
``MAX_KEPT_FILE_BYTES`` each and ``MAX_KEPT_BYTES`` in all (a larger file is read every
time; the oldest kept goes first), so a long-running process such as ``snapstore serve``
holds a few megabytes at most whatever the trees it is asked to scan. A forked child keeps
what its parent read (each entry still checked against the file's stat), with a lock of its
own.

What it assumes, as the stat cache does: the file's times come from a clock that does not
run behind this host's, and an ``lstat`` shows a change made anywhere (on a network file
system the client's attribute cache may show an older stat for a while, as it does to the
stat cache). A hit needs no read permission on the file: a process that gave up the
permission since its read (``seteuid``) still gets the patterns it read.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from stat import S_ISREG

from snapstore.fs.reading import open_regular_stat, read_all

SETTLED_NS = 2_000_000_000
"""How long before a read a file must have last changed for its patterns to be kept (the
stat cache's ``RACY_NS``)."""

MAX_KEPT = 1024
"""Ignore files whose patterns one process keeps at most (the oldest kept goes first)."""

MAX_KEPT_FILE_BYTES = 64 * 1024
"""The largest ignore file whose patterns are kept."""

MAX_KEPT_BYTES = 256 * 1024
"""The bytes of all ignore files whose patterns one process keeps at most (parsed patterns
take up to about twenty times their file's bytes)."""

Signature = tuple[int, int, int, int, int]

Parser = Callable[[bytes], list[str]]

_kept: dict[tuple[str, Parser], tuple[Signature, tuple[str, ...]]] = {}
_kept_bytes = 0
_kept_lock = threading.Lock()


def _new_lock_in_child() -> None:
    """A forked child starts with a free lock (another thread may have held it mid-fork)."""
    global _kept_lock
    _kept_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_lock_in_child)


def _signature(info: os.stat_result) -> Signature:
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def read_ignore_file(path: str, parse: Parser, max_bytes: int) -> list[str]:
    """``parse`` of the bytes of the regular file at ``path`` (a symlink is not followed);
    none if it is missing, unreadable, over ``max_bytes`` or not a regular file. The
    patterns of a copy read before are returned if the file's stat signature is still that
    copy's (see the module docstring)."""
    try:
        info = os.lstat(path)
    except OSError:
        return []
    if not S_ISREG(info.st_mode) or info.st_size > max_bytes:
        return []
    key = (path, parse)
    kept = _kept.get(key)
    if kept is not None and kept[0] == _signature(info):
        return list(kept[1])
    settled_before = time.time_ns() - SETTLED_NS
    try:
        fd, before = open_regular_stat(path, follow=False)
    except OSError:
        return []
    try:
        if before.st_size > max_bytes:
            return []
        data = read_all(fd, before.st_size)
        after = os.fstat(fd)
    except OSError:
        return []
    finally:
        os.close(fd)
    patterns = parse(data)
    signature = _signature(after)
    settled = max(after.st_mtime_ns, after.st_ctime_ns) < settled_before
    with _kept_lock:
        _drop(key)
        if (
            settled
            and signature == _signature(before)
            and len(data) == after.st_size <= MAX_KEPT_FILE_BYTES
        ):
            global _kept_bytes
            while _kept and (len(_kept) >= MAX_KEPT or _kept_bytes + len(data) > MAX_KEPT_BYTES):
                _drop(next(iter(_kept)))
            _kept[key] = (signature, tuple(patterns))
            _kept_bytes += len(data)
    return patterns


def _drop(key: tuple[str, Parser]) -> None:
    """Forget the copy kept under ``key``, if any (the caller holds the lock)."""
    global _kept_bytes
    kept = _kept.pop(key, None)
    if kept is not None:
        _kept_bytes -= kept[0][2]


def forget_all() -> None:
    """Drop every kept copy (tests, and a caller that wants every file read again)."""
    global _kept_bytes
    with _kept_lock:
        _kept.clear()
        _kept_bytes = 0
