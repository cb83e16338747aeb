"""The storage root's layout: create a new one, or check the format marker of an existing one
(and whether this process may write to it)."""

from __future__ import annotations

import contextlib
import errno
import logging
import os

from snapstore.durable import write_atomic
from snapstore.errors import FormatError, ReadOnlyStoreError
from snapstore.fsio import FileSystem

FORMAT_MAJOR = 1
FORMAT_TEXT = f"snapstore format {FORMAT_MAJOR}\n"
LAYOUT_DIRS = ("locks", "blobs", "packs", "sessions", "tmp")

READ_ONLY_ERRNOS = frozenset({errno.EACCES, errno.EPERM, errno.EROFS})
"""What creating a file or directory fails with where this process may only read."""
_EFFECTIVE_IDS = os.access in os.supports_effective_ids

logger = logging.getLogger(__name__)


def open_layout(root: str, fs: FileSystem, *, durable: bool) -> bool:
    """Create the layout of a new root, or check an existing root's format marker; refuse a
    directory that holds other things and no marker (it is not a store).

    Returns whether this process may write to the store. An existing store it cannot write
    is opened read-only: nothing is created in it (ReadOnlyStoreError comes later, from an
    operation that would write). A new store that cannot be created raises ReadOnlyStoreError.
    """
    marker = os.path.join(root, "FORMAT")
    try:
        with open(marker, encoding="utf-8") as file:
            text = file.read()
    except FileNotFoundError:
        text = None
    if text is not None:
        check_format(root, text)
        if not layout_writable(root):
            logger.debug("opened the store at %s read-only: this process cannot write it", root)
            return False
        make_layout_dirs(root, fs)
        return True
    try:
        os.makedirs(root, exist_ok=True)
    except OSError as error:
        if error.errno not in READ_ONLY_ERRNOS:
            raise
        raise ReadOnlyStoreError(
            f"cannot create a store at {root}: {error.strerror or error}"
        ) from error
    strangers = set(os.listdir(root)) - set(LAYOUT_DIRS) - {"FORMAT"}
    if strangers:
        raise FormatError(
            f"{root} is not a snapstore root (no FORMAT marker, and it holds "
            f"{sorted(strangers)[:3]}); refusing to use it"
        )
    if not layout_writable(root):
        raise ReadOnlyStoreError(
            f"{root} holds no store yet, and this process cannot create one there "
            "(it is not writable)"
        )
    make_layout_dirs(root, fs)
    write_atomic(
        fs, marker, FORMAT_TEXT.encode(), tmp_dir=os.path.join(root, "tmp"), durable=durable
    )
    logger.info("created a new store at %s", root)
    return True


def layout_writable(root: str) -> bool:
    """Whether this process may create and remove entries in the root and in each of its
    layout directories that exists (a read-only mount counts as not writable)."""
    places = [root, *(os.path.join(root, name) for name in LAYOUT_DIRS)]
    return all(
        os.access(place, os.W_OK | os.X_OK, effective_ids=_EFFECTIVE_IDS)
        for place in places
        if os.path.isdir(place)
    )


def make_layout_dirs(root: str, fs: FileSystem) -> None:
    """Create whichever layout directories are missing (all of them, for a new root)."""
    for name in LAYOUT_DIRS:
        path = os.path.join(root, name)
        if not os.path.isdir(path):
            with contextlib.suppress(FileExistsError):
                fs.mkdir(path, 0o755)


def check_format(root: str, text: str) -> None:
    """Refuse a root whose FORMAT marker names a major format this version cannot read."""
    words = text.split()
    if len(words) < 3 or words[:2] != ["snapstore", "format"]:
        raise FormatError(f"{root}/FORMAT is not a snapstore format marker")
    major = words[2].split(".")[0]
    if major != str(FORMAT_MAJOR):
        raise FormatError(
            f"{root} has snapstore format {words[2]}; this version reads format {FORMAT_MAJOR} only"
        )
