"""Removing a directory of a restore's target and everything in it, through descriptors.

A removal never follows a symlink (each directory is opened relative to its parent's
descriptor with ``O_NOFOLLOW``), never recurses (an explicit stack), and never removes a
storage root found inside.
"""

from __future__ import annotations

import contextlib
import os

from snapstore.backend.layout import MARKER_FILE, is_store_root
from snapstore.errors import UnsafePathError
from snapstore.fs.seam import FileSystem
from snapstore.fs.stamps import FileId, file_id
from snapstore.restore.dirhandles import DIR_FLAGS


def remove_tree(
    fs: FileSystem,
    parent_fd: int,
    name: str,
    *,
    expected: FileId | None = None,
    last: str | None = None,
) -> bool:
    """Remove a directory and everything in it, through descriptors, never following links
    and without recursion. Refuses (UnsafePathError) to remove a storage root found inside.
    With ``expected``, only a directory of that identity, checked through the descriptor it
    is emptied with, is removed: False (nothing removed) for another. ``last``: a file in
    the directory that is unlinked only once everything else in it is gone (a removal that
    fails or is killed before leaves it there)."""
    top = os.open(name, DIR_FLAGS, dir_fd=parent_fd)
    if expected is not None and file_id(os.fstat(top)) != expected:
        os.close(top)
        return False
    stack = [(top, parent_fd, name, True)]
    try:
        while stack:
            fd, holder_fd, dir_name, fresh = stack[-1]
            if fresh:
                stack[-1] = (fd, holder_fd, dir_name, False)
                children = list(os.scandir(fd))
                if any(c.name == MARKER_FILE for c in children) and is_store_root(dir_fd=fd):
                    raise UnsafePathError(f"{dir_name!r} is a snapstore root; it is never removed")
                subdirs = []
                for child in children:
                    if child.is_dir(follow_symlinks=False):
                        subdirs.append(child.name)
                    elif not (fd == top and child.name == last):
                        fs.unlink(child.name, dir_fd=fd)
                for sub in subdirs:
                    stack.append((os.open(sub, DIR_FLAGS, dir_fd=fd), fd, sub, True))
                continue
            if fd == top and last is not None:
                with contextlib.suppress(FileNotFoundError):
                    fs.unlink(last, dir_fd=fd)
            stack.pop()
            os.close(fd)
            fs.rmdir(dir_name, dir_fd=holder_fd)
    finally:
        for fd, _, _, _ in stack:
            with contextlib.suppress(OSError):
                os.close(fd)
    return True
