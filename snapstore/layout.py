"""The storage root's layout: create a new one, or check the format marker of an existing one."""

from __future__ import annotations

import contextlib
import logging
import os

from snapstore.durable import write_atomic
from snapstore.errors import FormatError
from snapstore.fsio import FileSystem

FORMAT_MAJOR = 1
FORMAT_TEXT = f"snapstore format {FORMAT_MAJOR}\n"
LAYOUT_DIRS = ("locks", "blobs", "packs", "sessions", "tmp")

logger = logging.getLogger(__name__)


def open_layout(root: str, fs: FileSystem, *, durable: bool) -> None:
    """Create the layout of a new root, or check an existing root's format marker; refuse a
    directory that holds other things and no marker (it is not a store)."""
    marker = os.path.join(root, "FORMAT")
    try:
        with open(marker, encoding="utf-8") as file:
            text = file.read()
    except FileNotFoundError:
        text = None
    if text is not None:
        check_format(root, text)
        make_layout_dirs(root, fs)
        return
    os.makedirs(root, exist_ok=True)
    strangers = set(os.listdir(root)) - set(LAYOUT_DIRS) - {"FORMAT"}
    if strangers:
        raise FormatError(
            f"{root} is not a snapstore root (no FORMAT marker, and it holds "
            f"{sorted(strangers)[:3]}); refusing to use it"
        )
    make_layout_dirs(root, fs)
    write_atomic(
        fs, marker, FORMAT_TEXT.encode(), tmp_dir=os.path.join(root, "tmp"), durable=durable
    )
    logger.info("created a new store at %s", root)


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
