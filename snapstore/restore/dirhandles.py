"""Directories of a restore's target, opened one component at a time without following links.

Every write and removal of a restore, its rollback and its recovery goes through a
descriptor of its parent directory from :class:`DirHandles`, so a symlink planted in the
target (before or during the restore) is never followed;
:func:`snapstore.restore.removal.remove_tree` removes a directory the same way.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from snapstore.backend.layout import is_store_root
from snapstore.errors import UnsafePathError
from snapstore.fs.seam import FileSystem
from snapstore.fs.stamps import FileId, file_id

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
WALK_FLAGS = (
    getattr(os, "O_PATH", getattr(os, "O_SEARCH", os.O_RDONLY))
    | os.O_DIRECTORY
    | os.O_NOFOLLOW
    | os.O_CLOEXEC
)
"""Flags to pass through the target's ancestors: like a lookup by path, they need only
search permission (``O_PATH`` on Linux), so a restore below a directory of mode 0711 works.
Such a descriptor serves only as ``dir_fd`` (``mkdir``, ``stat``, ``open``, ``rmdir``
relative to it), never for ``fsync``, ``fchmod`` or listing. ``O_DIRECTORY`` keeps a
symlink from being opened as itself."""
MAX_OPEN_DIRS = 128
"""Directory descriptors kept open at once (a restore may touch thousands of directories)."""
_NOT_A_DIRECTORY = (errno.ENOTDIR, errno.ELOOP)
"""What opening a path as a directory without following links gives for a file, a symlink
or a special file."""


class NotADirectoryPathError(UnsafePathError):
    """A path the restore must go through as a directory is something else in the target
    (a file, a symlink, a special file) now."""


@dataclass(frozen=True)
class MadeTarget:
    """A restore's target that the restore made itself (nothing was there when it planned):
    its parent's descriptor (``WALK_FLAGS``), reached without following links, its name
    there, its own descriptor (``DIR_FLAGS``, held until ``close``: that keeps its inode
    allocated, so no directory made at that name meanwhile can get its number) and its
    identity: only a directory of that identity at that name is the restore's."""

    parent_fd: int
    name: str
    fd: int
    identity: FileId

    def close(self) -> None:
        os.close(self.fd)
        os.close(self.parent_fd)

    def open(self) -> int:
        """A descriptor (``DIR_FLAGS``) of the directory now at the made one's name, if it
        is the made one (else UnsafePathError; FileNotFoundError if none is there)."""
        fd = _open_directory(self.name, DIR_FLAGS, self.parent_fd, repr(self.name), None)
        if file_id(os.fstat(fd)) != self.identity:
            os.close(fd)
            raise UnsafePathError(f"the directory the restore made at {self.name!r} was replaced")
        return fd

    def mark(self, fs: FileSystem, marker: str, *, durable: bool) -> None:
        """Put the restore's target marker (an empty file named ``marker``) in the made
        directory, through its descriptor; ``durable`` flushes its entry, so that a journal
        written next never outlives it in a power cut (a recovery finding the journal
        without the marker would drop the restore, leaving what it had written)."""
        fs.close(fs.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=self.fd))
        if durable:
            fs.fsync_dir(".", dir_fd=self.fd)

    def unmark(self, fs: FileSystem, marker: str) -> None:
        """Remove the restore's target marker from the made directory, through its
        descriptor (once its journal is gone, or as the directory is discarded)."""
        with contextlib.suppress(FileNotFoundError):
            fs.unlink(marker, dir_fd=self.fd)

    def discard(self, fs: FileSystem, marker: str) -> None:
        """Remove the directory, before anything but its ``marker`` was written in it, if it
        is still the one made (else it is left: it is not, or no longer only, the restore's).
        The ``rmdir`` goes by name (there is no removal through a descriptor), once the name
        is seen to lead to the held directory; it can only ever remove an empty one."""
        with contextlib.suppress(OSError, UnsafePathError):
            self.unmark(fs, marker)
            os.close(self.open())
            fs.rmdir(self.name, dir_fd=self.parent_fd)


def make_target(fs: FileSystem, real_target: str, *, durable: bool) -> MadeTarget:
    """Make the directory ``real_target`` (the restore's locked real path: no symlink in
    it when the restore planned), and its missing parents, through descriptors opened one
    component at a time without following links: a symlink planted on the way since is
    refused (NotADirectoryPathError), and a target that appeared since is not written into
    (UnsafePathError). ``durable`` flushes each new entry's parent as it is made."""
    parent, name = os.path.split(real_target)
    fd = _walk(parent, fs, durable=durable)
    try:
        try:
            fs.mkdir(name, 0o755, dir_fd=fd)
        except FileExistsError:
            raise UnsafePathError(
                f"the restore target {real_target} appeared after the restore planned on "
                "there being none; nothing was written"
            ) from None
        try:
            if durable:
                fs.fsync_dir(".", dir_fd=fd)
            made = _open_directory(name, DIR_FLAGS, fd, real_target, None)
        except BaseException:  # nothing is written in it yet: it goes (empty) with the error
            with contextlib.suppress(OSError):
                fs.rmdir(name, dir_fd=fd)
            raise
        return MadeTarget(fd, name, made, file_id(os.fstat(made)))
    except BaseException:
        os.close(fd)
        raise


def open_made(real_target: str) -> MadeTarget:
    """The directory at ``real_target`` (one a killed restore made), reached as by
    ``open_target``, held as a MadeTarget (same errors)."""
    parent, name = os.path.split(real_target)
    parent_fd = _walk(parent)
    try:
        fd = _open_directory(name, DIR_FLAGS, parent_fd, real_target, None)
    except BaseException:
        os.close(parent_fd)
        raise
    return MadeTarget(parent_fd, name, fd, file_id(os.fstat(fd)))


def open_target(real_target: str, *, made: MadeTarget | None = None) -> int:
    """A descriptor (``DIR_FLAGS``) of the restore target at ``real_target`` (its locked real
    path), reached one component at a time without following links, or through the parent
    ``made`` was made in. FileNotFoundError if it is not there; NotADirectoryPathError if a
    file or symlink is found on the way or in its place."""
    shown = f"the restore target {real_target}"
    if made is not None:
        return _open_directory(made.name, DIR_FLAGS, made.parent_fd, shown, None)
    parent, name = os.path.split(real_target)
    parent_fd = _walk(parent)
    try:
        if not name:  # the root directory itself
            return os.open(".", DIR_FLAGS, dir_fd=parent_fd)
        return _open_directory(name, DIR_FLAGS, parent_fd, shown, None)
    finally:
        os.close(parent_fd)


def _walk(directory: str, fs: FileSystem | None = None, *, durable: bool = False) -> int:
    """A ``WALK_FLAGS`` descriptor of the absolute ``directory``, reached from the root one
    component at a time without following links; with ``fs``, the missing ones are made on
    the way through it (``_open_or_make``), else FileNotFoundError."""
    fd = os.open(os.sep, WALK_FLAGS)
    path = os.sep
    try:
        for part in [part for part in directory.split(os.sep) if part]:
            if fs is not None:
                child = _open_or_make(fs, fd, part, path, durable=durable)
            else:
                shown = repr(os.path.join(path, part))
                child = _open_directory(part, WALK_FLAGS, fd, shown, None)
            os.close(fd)
            fd, path = child, os.path.join(path, part)
        return fd
    except BaseException:
        os.close(fd)
        raise


def _open_or_make(fs: FileSystem, parent_fd: int, name: str, parent: str, *, durable: bool) -> int:
    """The directory ``name`` in ``parent`` (at ``parent_fd``), made if missing, opened
    with ``WALK_FLAGS``; a parent made here (or by another writer meanwhile) has its entry
    flushed with ``durable``, as ``ensure_dir`` does."""

    def make() -> None:
        with contextlib.suppress(FileExistsError):
            fs.mkdir(name, 0o755, dir_fd=parent_fd)
        if durable:
            fs.fsync_dir(".", dir_fd=parent_fd)

    return _open_directory(name, WALK_FLAGS, parent_fd, repr(os.path.join(parent, name)), make)


def _open_directory(
    name: str, flags: int, parent_fd: int, shown: str, make: Callable[[], None] | None
) -> int:
    """The directory ``name`` at ``parent_fd`` opened with ``flags`` (``O_NOFOLLOW`` and
    ``O_DIRECTORY`` among them); if it is missing, ``make`` (None: FileNotFoundError) and
    open it again. Anything but a plain directory there (a file, a symlink planted since) is
    NotADirectoryPathError, naming it as ``shown``."""
    try:
        try:
            return os.open(name, flags, dir_fd=parent_fd)
        except FileNotFoundError:
            if make is None:
                raise
            make()
            return os.open(name, flags, dir_fd=parent_fd)
    except OSError as error:
        if error.errno not in _NOT_A_DIRECTORY:
            raise
        raise NotADirectoryPathError(f"{shown} is no longer a plain directory ({error})") from None


class DirHandles:
    """Descriptors of directories under the target, opened component by component without
    following symlinks, and kept in a bounded cache (reopened the same way when needed)."""

    def __init__(
        self,
        fs: FileSystem,
        target: str,
        *,
        real_target: str,
        durable: bool,
        expected: FileId | None = None,
        made: MadeTarget | None = None,
        new: bool = False,
    ) -> None:
        """Open the target ``target`` at its locked real path ``real_target``, without
        following links (``open_target``): through the parent of the directory the restore
        ``made``, or made now (``make_target``) for a ``new`` target that was not there when
        planned, whose missing parents ``durable`` flushes as they are made (not needed
        where the restore's last flush covers them: see ``snapstore.restore.flushes``).
        UnsafePathError if the directory found is not the one ``expected`` (or made), or is
        a snapstore root."""
        self.fs = fs
        self.target = target
        owned = make_target(fs, real_target, durable=durable) if made is None and new else None
        try:
            self.root_fd = open_planned(real_target, made or owned, target, expected=expected)
        finally:
            if owned is not None:
                owned.close()
        if is_store_root(dir_fd=self.root_fd):
            os.close(self.root_fd)
            raise _replaced(target)
        info = os.fstat(self.root_fd)
        self._fds: OrderedDict[str, int] = OrderedDict()
        self._devices: dict[str, int] = {"": info.st_dev}
        self._flush_fds: dict[int, int] = {info.st_dev: os.dup(self.root_fd)}
        """One descriptor per filesystem, opened before anything is written there: a
        ``syncfs`` reports the writeback errors recorded since its descriptor was opened."""
        self.touched: set[str] = set()
        self._modes: dict[str, int] = {}
        self._checked: set[str] = set()
        """Directories ``make_writable`` looked at (once each)."""
        self._user = os.geteuid()

    def get(self, relative_dir: str, *, create: bool = False) -> int:
        """A descriptor for ``relative_dir`` ("" is the target), valid until the next call;
        with ``create``, missing directories on the way are made."""
        if not relative_dir:
            return self.root_fd
        fd = self._fds.get(relative_dir)
        if fd is not None:
            self._fds.move_to_end(relative_dir)
            return fd
        parts = relative_dir.split("/")
        known = len(parts) - 1
        while known and "/".join(parts[:known]) not in self._fds:
            known -= 1
        path = "/".join(parts[:known])
        fd = self._fds[path] if known else self.root_fd
        for name in parts[known:]:
            parent, parent_fd, path = path, fd, f"{path}/{name}" if path else name
            fd = self._open_child(parent, parent_fd, name, path, create)
            self._remember(path, fd)
        return fd

    def _open_child(self, parent: str, parent_fd: int, name: str, path: str, create: bool) -> int:
        def make() -> None:
            self.make_writable(parent, parent_fd)
            self.fs.mkdir(name, 0o777, dir_fd=parent_fd)
            self.touched.add(parent)

        shown = f"{path!r} in the target"
        return _open_directory(name, DIR_FLAGS, parent_fd, shown, make if create else None)

    def _remember(self, path: str, fd: int) -> None:
        self._fds[path] = fd
        while len(self._fds) > MAX_OPEN_DIRS:
            _, oldest = self._fds.popitem(last=False)
            os.close(oldest)

    def make_writable(self, relative_dir: str, fd: int) -> None:
        """Let the restore write into a directory its owner made read-only (the mode comes
        back in ``close``). Nothing to do for root, who writes anyway."""
        if self._user == 0 or relative_dir in self._modes or relative_dir in self._checked:
            return
        info = os.fstat(fd)
        self._checked.add(relative_dir)
        if info.st_uid == self._user and not info.st_mode & stat.S_IWUSR:
            self._modes[relative_dir] = stat.S_IMODE(info.st_mode)
            self.fs.fchmod(fd, stat.S_IMODE(info.st_mode) | stat.S_IWUSR)

    def writable(self, relative_dir: str, *, create: bool = False) -> int:
        """``get``, for a directory about to be written into."""
        fd = self.get(relative_dir, create=create)
        self.make_writable(relative_dir, fd)
        return fd

    def settle_mode(self, relative_dir: str) -> None:
        """A restore sets this directory's final mode itself: do not put the old one back."""
        self._modes.pop(relative_dir, None)

    def device(self, relative_dir: str) -> int:
        """The device (filesystem) of a directory of the target, looked at once; the first
        directory seen on a filesystem gives the descriptor its flushes go through (so ask
        before writing there)."""
        device = self._devices.get(relative_dir)
        if device is None:
            fd = self.get(relative_dir)
            device = os.fstat(fd).st_dev
            self._devices[relative_dir] = device
            if device not in self._flush_fds:
                self._flush_fds[device] = os.dup(fd)
        return device

    def sync_filesystems_of(self, relative_dirs: Iterable[str]) -> None:
        """Flush the filesystems holding these directories of the target, each through its
        descriptor opened before anything was written there (only for a seam that
        ``flushes_whole_filesystems``): what was written in them, their entries and modes
        included, is durable once this returns. A directory that is not there any more
        holds nothing to flush."""
        devices: set[int] = set()
        for relative_dir in relative_dirs:
            try:
                devices.add(self.device(relative_dir))
            except FileNotFoundError:
                continue
        self.fs.sync_filesystems([self._flush_fds[device] for device in sorted(devices)])

    def forget(self, relative_dir: str) -> None:
        """Drop cached descriptors at or below a directory that is being removed."""
        for key in [k for k in self._fds if k == relative_dir or k.startswith(relative_dir + "/")]:
            os.close(self._fds.pop(key))
        inside = relative_dir + "/"
        for known in (self._devices, self._modes):
            for key in [k for k in known if k == relative_dir or k.startswith(inside)]:
                del known[key]
        self._checked = {k for k in self._checked if k != relative_dir and not k.startswith(inside)}

    def close(self) -> None:
        """Put back the modes of directories made writable, then close every descriptor."""
        for relative_dir, mode in sorted(self._modes.items(), reverse=True):
            with contextlib.suppress(OSError):
                self.fs.fchmod(self.get(relative_dir), mode)
        self._modes.clear()
        for fd in [*self._fds.values(), *self._flush_fds.values()]:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._fds.clear()
        self._flush_fds.clear()
        with contextlib.suppress(OSError):
            os.close(self.root_fd)


def open_planned(
    real_target: str, made: MadeTarget | None, target: str, *, expected: FileId | None
) -> int:
    """``open_target``, refusing (UnsafePathError) a directory that is not the one the
    restore planned on: another identity than ``expected`` (or than ``made``'s), or none
    where one was expected. For a ``made`` target, a duplicate of its held descriptor."""
    if made is not None:
        expected = made.identity
    try:
        fd = open_target(real_target, made=made)
    except FileNotFoundError:
        if expected is None:
            raise
        raise _replaced(target) from None
    if expected is not None and file_id(os.fstat(fd)) != expected:
        os.close(fd)
        raise _replaced(target)
    if made is None:
        return fd
    os.close(fd)  # the name still leads to the made directory: write through the held one
    return os.dup(made.fd)


def _replaced(target: str) -> UnsafePathError:
    return UnsafePathError(
        f"the restore target {target} is no longer the directory the restore was planned on "
        "(it was replaced, or now leads to a snapstore root); nothing was written"
    )
