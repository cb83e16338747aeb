"""Read a whole file of the store (a manifest, an index, a cache) without trusting it.

A damaged or hostile store may hold a FIFO where a file belongs (a plain ``open`` would block
forever), or a sparse file of many GiB (reading it whole would exhaust memory). Every file the
store reads whole goes through :func:`read_regular`, which refuses both before allocating.
"""

from __future__ import annotations

import errno
import os
import stat

_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC


class UnfitFileError(OSError):
    """The file is not a regular file, or larger than its kind may be."""


def open_regular(path: str, *, dir_fd: int | None = None, follow: bool = True) -> int:
    """A read-only descriptor of the regular file at ``path``; never blocks on a FIFO or a
    device. UnfitFileError if it is something else (without ``follow``: a symlink too)."""
    return open_regular_stat(path, dir_fd=dir_fd, follow=follow)[0]


def open_regular_stat(
    path: str, *, dir_fd: int | None = None, follow: bool = True
) -> tuple[int, os.stat_result]:
    """``open_regular``, with the ``fstat`` of the file it opened (which it checks anyway:
    a caller that needs the size makes no second one)."""
    flags = _FLAGS if follow else _FLAGS | os.O_NOFOLLOW
    try:
        fd = os.open(path, flags, dir_fd=dir_fd)
    except OSError as error:
        if error.errno == errno.ELOOP and not follow:
            raise UnfitFileError(errno.ELOOP, f"{path} is a symbolic link") from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnfitFileError(errno.EINVAL, f"{path} is not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return fd, info


def read_all(fd: int, size: int) -> bytes:
    """Up to ``size`` bytes from the current offset; fewer only if the file ends sooner."""
    parts = []
    remaining = size
    while remaining > 0 and (chunk := os.read(fd, min(remaining, 1 << 24))):
        parts.append(chunk)
        remaining -= len(chunk)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def read_regular(path: str, *, max_bytes: int, follow: bool = True) -> tuple[bytes, os.stat_result]:
    """The bytes of the regular file at ``path`` and its stat; UnfitFileError (an OSError)
    for anything else (without ``follow``: a symlink too) or for a file over ``max_bytes``,
    checked before reading."""
    fd, info = open_regular_stat(path, follow=follow)
    try:
        if info.st_size > max_bytes:
            raise UnfitFileError(
                errno.EFBIG, f"{path} is {info.st_size} bytes, over the {max_bytes} allowed"
            )
        return read_all(fd, info.st_size), info
    finally:
        os.close(fd)
