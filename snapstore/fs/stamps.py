"""Which file a stat describes, and which version of it: one definition for every check that
must notice a file replaced (another inode) or modified in place (size, mtime or ctime)."""

from __future__ import annotations

import os

FileId = tuple[int, int]
"""``(device, inode)``: the same file, whatever its name."""

Version = tuple[int, int, int, int, int]
"""``(inode, size, mtime_ns, ctime_ns, device)``: the same bytes, as far as stat can tell
(the order is the one the header cache records, docs/format.md)."""


def file_id(info: os.stat_result) -> FileId:
    """The file ``info`` describes."""
    return (info.st_dev, info.st_ino)


def version(info: os.stat_result) -> Version:
    """The version of the file ``info`` describes; any write or replacement changes it."""
    return (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_dev)
