"""The storage root's layout: create a new one, or check the format marker of an existing one."""

from __future__ import annotations

import contextlib
import errno
import os

from snapstore.errors import FormatError, ReadOnlyStoreError, UnsafePathError
from snapstore.fs.durable import ensure_dir, write_atomic
from snapstore.fs.reading import open_regular
from snapstore.fs.seam import FileSystem
from snapstore.logs import get_logger

FORMAT_MAJOR = 4
READABLE_MAJORS = (1, 2, 3, 4)
"""Format 1 stores are read, and converted as they are written (see ``marker_major``)."""
FORMAT_TEXT = f"snapstore format {FORMAT_MAJOR}\n"
PACK_LOG_MAJOR = 3
"""The first format whose gc starts a new pack log before it deletes a pack."""
LAYOUT_DIRS = ("locks", "blobs", "packs", "sessions", "tmp")
MARKER_FILE = "FORMAT"
MARKER_PREFIX = b"snapstore format "
MARKER_MAX_BYTES = 256
READ_ONLY_ERRNOS = frozenset({errno.EACCES, errno.EPERM, errno.EROFS})
"""What creating a file or directory fails with where this process may only read."""
_EFFECTIVE_IDS = os.access in os.supports_effective_ids

logger = get_logger(__name__)


def read_marker(root: str, *, dir_fd: int | None = None) -> bytes | None:
    """The first bytes of ``root``'s FORMAT file (``root`` relative to ``dir_fd`` if given),
    or None if there is no such regular file."""
    try:
        fd = open_regular(os.path.join(root, MARKER_FILE), dir_fd=dir_fd, follow=False)
    except OSError:
        return None
    try:
        return os.read(fd, MARKER_MAX_BYTES)
    finally:
        os.close(fd)


def is_store_root(directory: str = "", *, dir_fd: int | None = None) -> bool:
    """True if the directory holds a snapstore FORMAT marker: a storage root, which no
    snapshot records and no restore writes into or removes (whichever store it belongs to)."""
    marker = read_marker(directory, dir_fd=dir_fd)
    return marker is not None and marker.startswith(MARKER_PREFIX)


def refuse_store_directory(store_root: str | None, real_dir: str, what: str) -> None:
    """UnsafePathError if ``real_dir`` is, or lies in, a storage root (this store's, if it
    is on this machine, or any other directory holding a snapstore FORMAT marker): what a
    create's base directory and a restore's target must never be."""
    own = None if store_root is None else os.path.realpath(store_root)
    refuse_in_store(own, real_dir, what)


def refuse_in_store(own: str | None, real_dir: str, what: str) -> None:
    """``refuse_store_directory`` with this store's root already resolved (``own``, None if
    the store is not on this machine). The walk up from ``real_dir`` looking for a FORMAT
    marker in every directory is what finds a store wherever its path now leads: a caller
    may resolve ``own`` once per open store (``Repository.real_root``) only because of it."""
    if own is not None and (real_dir == own or real_dir.startswith(own + os.sep)):
        raise UnsafePathError(f"{what} {real_dir} lies in the snapstore root {own}")
    directory = real_dir
    while True:
        if is_store_root(directory):
            raise UnsafePathError(f"{what} {real_dir} lies in the snapstore root {directory}")
        parent = os.path.dirname(directory)
        if parent == directory:
            return
        directory = parent


def open_layout(root: str, fs: FileSystem, *, durable: bool) -> bool:
    """Create the layout of a new root, or check an existing root's format marker; refuse a
    directory that holds other things and no marker (it is not a store).

    Returns whether this process may write to the store. An existing store it cannot write
    is opened read-only: nothing is created in it (ReadOnlyStoreError comes later, from an
    operation that would write). A new store that cannot be created raises ReadOnlyStoreError.
    """
    marker = os.path.join(root, MARKER_FILE)
    if os.path.lexists(marker):
        return _open_existing(root, fs, durable=durable)
    try:
        ensure_dir(fs, root, stop_at=os.sep, durable=durable)
    except OSError as error:
        if error.errno not in READ_ONLY_ERRNOS:
            raise
        raise ReadOnlyStoreError(
            f"cannot create a store at {root}: {error.strerror or error}"
        ) from error
    strangers = set(os.listdir(root)) - set(LAYOUT_DIRS) - {MARKER_FILE}
    if strangers and os.path.lexists(marker):  # another process made the store meanwhile
        return _open_existing(root, fs, durable=durable)
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
    make_layout_dirs(root, fs, durable=durable)
    write_atomic(
        fs, marker, FORMAT_TEXT.encode(), tmp_dir=os.path.join(root, "tmp"), durable=durable
    )
    logger.info("created a new store at %s", root)
    return True


def _open_existing(root: str, fs: FileSystem, *, durable: bool) -> bool:
    """Open a root that has a FORMAT marker: check it, and make what is missing of the
    layout if this process may write (see ``open_layout``)."""
    found = read_marker(root)
    if found is None:
        raise FormatError(f"{os.path.join(root, MARKER_FILE)} is not a readable regular file")
    check_format(root, found.decode("utf-8", "replace"))
    if not layout_writable(root):
        logger.debug("opened the store at %s read-only: this process cannot write it", root)
        return False
    make_layout_dirs(root, fs, durable=durable)
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


def make_layout_dirs(root: str, fs: FileSystem, *, durable: bool) -> None:
    """Create whichever layout directories are missing (all of them, for a new root), and
    flush the root's entries for them: what is later written in one must not lose its
    directory in a power cut (a copy of a store by a tool that drops empty directories lacks
    some)."""
    made = False
    for name in LAYOUT_DIRS:
        path = os.path.join(root, name)
        if not os.path.isdir(path):
            with contextlib.suppress(FileExistsError):
                fs.mkdir(path, 0o755)
                made = True
    if made and durable:
        fs.fsync_dir(root)


def check_format(root: str, text: str) -> None:
    """Refuse a root whose FORMAT marker names a major format this version cannot read."""
    words = text.split()
    if len(words) < 3 or words[:2] != ["snapstore", "format"]:
        raise FormatError(f"{root}/FORMAT is not a snapstore format marker")
    major = words[2].split(".")[0].removesuffix("-encrypted")
    if major not in {str(known) for known in READABLE_MAJORS}:
        raise FormatError(
            f"{root} has snapstore format {words[2]}; this version reads formats "
            f"{', '.join(map(str, READABLE_MAJORS))} only"
        )


def marker_major(text: bytes) -> int:
    """The major format a (checked) FORMAT marker names. An encrypted store's marker is
    read only through the encrypting layer (which shows the plain one): here it is a
    FormatError, so that a backend opened without it never writes into the store."""
    word = text.split()[2].split(b".")[0]
    if word.endswith(b"-encrypted"):
        raise FormatError("the store is encrypted: open it with its password")
    return int(word)
