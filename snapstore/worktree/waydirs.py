"""The directories on the way to a create's requested paths, each opened once relative to
its parent's descriptor without following a link.

``O_NOFOLLOW`` covers only the last component of a path: a directory checked by path and
then looked through by path again may have been swapped for a symlink to elsewhere in
between. A lookup relative to a descriptor held since the check resolves one name in the
very directory checked, so the scan's checks of each requested path (``Scanner.add``) and
the read of its files (``ingest_scan``) look in the same directories, none of them outside
the base whatever is renamed meanwhile. git's rules (``gitrules.leading_rules``) read the
``.gitignore`` files on the way through one of their own, let go before the scan: a
directory replaced in between is scanned as it is then, never mixed with the one the rules
came from.
"""

from __future__ import annotations

import errno
import os
from collections import OrderedDict
from types import TracebackType

from snapstore.fs.stamps import FileId, file_id

LOOKUP_FLAGS = os.O_DIRECTORY | os.O_CLOEXEC | getattr(os, "O_PATH", os.O_RDONLY)
"""``O_PATH`` where there is one: looking names up in a directory needs no right to list
it, and no descriptor here is ever listed or read. Elsewhere a directory on the way must
also be readable."""

LISTING_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
"""How a directory whose names are listed, or files read from, is opened."""

MAX_HELD = 64
"""Descriptors held at once: a small create needs a handful; a request of many paths in
many directories closes the least recently used, and opens it again (through its parent,
checked to be the same directory) if it needs it again."""

NOT_A_DIRECTORY = frozenset(
    number
    for number in (errno.ENOTDIR, errno.ELOOP, errno.EMLINK, getattr(errno, "EFTYPE", None))
    if number is not None
)
"""The errors of opening a name with ``O_DIRECTORY | O_NOFOLLOW`` that is not a directory
itself (a file, or a symlink, to a directory or not): Linux and macOS say ELOOP for a
symlink, FreeBSD EMLINK, NetBSD EFTYPE."""


class WayError(Exception):
    """``WayDirs.open``: a directory on the way (``directory``) cannot be looked through."""

    def __init__(self, directory: str) -> None:
        super().__init__(directory)
        self.directory = directory


class NotADirectory(WayError):
    """The directory named is not a directory itself (a symlink is never followed)."""


class Replaced(WayError):
    """The directory named, opened again after its descriptor was let go, is another
    directory than the one opened first under that name."""


class WayDirs:
    """Descriptors of directories below ``base`` (``"a/b"``), opened on demand: one in the
    base by the base's path and its name (the base may be a symlink: the caller checked
    it), or relative to ``base_fd`` if given, every other relative to its parent's
    descriptor, all with ``O_NOFOLLOW``. A context manager: leaving it closes every
    descriptor it opened (never ``base_fd``, the caller's)."""

    def __init__(self, base: str, *, base_fd: int | None = None, max_held: int = MAX_HELD) -> None:
        self.base = base
        self.base_fd = base_fd
        """A descriptor of the base, when the create must read one directory whatever its
        path leads to meanwhile (an undo backup of the target a restore planned on)."""
        self.max_held = max(2, max_held)
        self._held: OrderedDict[str, int] = OrderedDict()
        self._ids: dict[str, FileId] = {}
        """The identity of each directory fstat'ed so far, kept when its descriptor is
        closed: one opened again must be the same directory."""

    def __enter__(self) -> WayDirs:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def open(self, directory: str) -> int:
        """A descriptor of ``directory``, not the base (valid until the next ``open``, which
        may close the least recently used). NotADirectory if it, or a directory on the way,
        is not a directory itself; Replaced if one opened before was replaced since; an
        OSError (FileNotFoundError if one is missing) naming the directory it could not
        open, relative to the base."""
        held = self._held.get(directory)
        if held is not None:
            self._held.move_to_end(directory)
            return held
        names = directory.split("/")
        depth = len(names) - 1
        while depth and "/".join(names[:depth]) not in self._held:
            depth -= 1
        current = "/".join(names[:depth])
        fd = self.base_fd
        if current:
            fd = self._held[current]
            self._held.move_to_end(current)
        for name in names[depth:]:
            current = f"{current}/{name}" if current else name
            try:
                child = os.open(
                    name if fd is not None else os.path.join(self.base, name),
                    LOOKUP_FLAGS | os.O_NOFOLLOW,
                    dir_fd=fd,
                )
            except OSError as error:
                if error.errno in NOT_A_DIRECTORY:
                    raise NotADirectory(current) from None
                raise OSError(error.errno, error.strerror, current) from None
            fd = self._opened(current, child)
        assert fd is not None
        return fd

    def place(self, directory: str) -> tuple[int | None, str]:
        """Where the names of ``directory`` (``""``: the base) are looked up: a descriptor
        to look them up in (``open``) and ``""``, or, for the base without ``base_fd``, None
        and the base's path with a separator: the base is looked up by its path, as the
        caller named it, which nothing inside it can redirect."""
        if not directory:
            if self.base_fd is not None:
                return self.base_fd, ""
            return None, os.path.join(self.base, "")
        return self.open(directory), ""

    def _opened(self, directory: str, fd: int) -> int:
        """Hold ``fd``, just opened as ``directory``, once checked to be the directory opened
        under that name before, if one was; close the least recently used beyond
        ``max_held`` (noting its identity first, to check it if it is opened again)."""
        expected = self._ids.get(directory)
        if expected is not None:
            try:
                found = file_id(os.fstat(fd))
            except BaseException:
                os.close(fd)
                raise
            if found != expected:
                os.close(fd)
                raise Replaced(directory)
        self._held[directory] = fd
        while len(self._held) > self.max_held:
            oldest, oldest_fd = self._held.popitem(last=False)
            try:
                if oldest not in self._ids:
                    self._ids[oldest] = file_id(os.fstat(oldest_fd))
            finally:
                os.close(oldest_fd)
        return fd

    def identity(self, directory: str) -> FileId:
        """The (device, inode) of ``directory`` (the base only with ``base_fd``), as its
        descriptor shows it."""
        known = self._ids.get(directory)
        if known is None:
            fd = self.base_fd if not directory and self.base_fd is not None else None
            known = file_id(os.fstat(self.open(directory) if fd is None else fd))
            self._ids[directory] = known
        return known

    def held(self, directory: str) -> int | None:
        """The descriptor of ``directory`` if one is open now; None if none is: nothing is
        opened."""
        return self._held.get(directory)

    def nearest(self, directory: str) -> tuple[int, str] | None:
        """The descriptor open now of ``directory`` or of the nearest directory above it
        (never the base), and the path of ``directory`` from there (``"."``: itself); None
        if none is open. Nothing is opened."""
        rest: list[str] = []
        current = directory
        while current:
            fd = self._held.get(current)
            if fd is not None:
                return fd, "/".join(reversed(rest)) or "."
            current, _, name = current.rpartition("/")
            rest.append(name)
        return None

    def close(self) -> None:
        """Close every descriptor held (the object may be used again: it opens anew)."""
        while self._held:
            os.close(self._held.popitem()[1])
