"""Collect the file set a snapshot records: walk requested paths without following symlinks.

The scan turns what needs no reading (directories, symlinks, absent paths, and files the
caller's ``reuse`` hook vouches for) straight into manifest rows, and lists only the files
whose bytes must be read. One pass, one tuple per path: on a large tree the per-file Python
work, not the disk, is what an unchanged snapshot costs.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from stat import S_ISREG

from snapstore.backend.layout import MARKER_FILE, is_store_root
from snapstore.errors import (
    InvalidValueError,
    UnreadablePathError,
    UnsafePathError,
)
from snapstore.format.manifest import EntryRow
from snapstore.format.paths import (
    check_relative_path,
    child_path,
    plain_names,
    printable,
    recordable_link_target,
)
from snapstore.fs.durable import TEMP_PREFIX
from snapstore.fs.stamps import FileId, file_id
from snapstore.fs.tempnames import is_restore_temp
from snapstore.models import SkippedPath
from snapstore.worktree import scanlookup
from snapstore.worktree.excludes import GITIGNORE, Matcher, read_patterns, rebase
from snapstore.worktree.scanlookup import Pending
from snapstore.worktree.scanned import Reuse, ScanResult
from snapstore.worktree.waydirs import LISTING_FLAGS, LOOKUP_FLAGS, WayDirs

GITIGNORE_ADVICE = "pass gitignore=False (--no-gitignore) to record what .gitignore files ignore"

__all__ = ["UnreadablePathError"]


def _read_everything(path: str, info: os.stat_result) -> EntryRow | None:
    return None


class Scanner:
    """Walks paths under a base directory. Never records a storage root (the store's own,
    listed in ``exclude_dirs`` by device and inode, or any directory holding a snapstore
    FORMAT marker) nor what ``excludes`` matches; with ``gitignore``, the ``.gitignore``
    files met on the way add their rules to it (but those of the directories in
    ``ignore_read``, already among its rules). ``skip_special``: FIFOs, sockets and devices,
    which hold no data to keep, are noted as skipped instead of failing the scan.

    Names of the exact shape of a restore's temp files (``snapstore.fs.tempnames``) are left
    out too: a create of a directory that holds a restore's target does not wait for that
    restore, whose temp files come and go. With ``restore_temps`` (an undo backup, taken under
    its target's lock, where no restore is running) they are recorded like any name: the
    restore about to run may remove them. Any other name starting with ``.snapstore-tmp-`` is
    an ordinary name. ``stat_files``: see the attribute. ``add`` and ``add_below`` look each
    path asked for up through descriptors of the directories on the way (``way``, opened one
    name at a time without following a link), each checked once through the descriptor
    later lookups use, never by path: a directory swapped for a symlink after a check by
    path would lead out of the base, since ``O_NOFOLLOW`` covers only the last component."""

    def __init__(
        self,
        base_dir: str,
        *,
        exclude_dirs: Iterable[FileId] = (),
        skip_unreadable: bool = False,
        skip_special: bool = False,
        excludes: Matcher | None = None,
        gitignore: bool = False,
        ignore_read: Iterable[str] = (),
        reuse: Reuse | None = None,
        restore_temps: bool = False,
        stat_files: bool = True,
        way: WayDirs | None = None,
    ) -> None:
        self.base_dir = base_dir
        self.way = way
        """The directories on the way to the requested paths, held for the whole create
        (shared with git's rules and the read of requested files); None: ``add`` opens its
        own for each path and closes them when it returns."""
        self._checked_parents: dict[str, FileId] = {}
        """The directories on the way found, as they were, neither excluded nor a storage
        root: looked at once per create, through the very descriptor later lookups use."""
        self.restore_temps = restore_temps
        self.exclude_dirs = set(exclude_dirs)
        self.excludes = excludes if excludes is not None else Matcher()
        self.gitignore = gitignore
        self.ignore_read = set(ignore_read)
        self.skip_unreadable = skip_unreadable
        self.skip_special = skip_special
        self.reuse = reuse or _read_everything
        self.stat_files = stat_files or reuse is not None
        """Whether a regular file found in a listing is lstat'ed there. Only a ``reuse`` hook,
        and a caller that looks at ``links`` before the files are read, need that stat: with
        ``stat_files=False`` (and no hook), a file the listing shows to be regular is listed
        to be read without it (``to_read`` holds None), and the fstat it is opened with
        stands for it: one system call per file less. Its hard links are then found when it
        is read (``ingest_scan`` fills ``links``)."""
        self.result = ScanResult()
        self._added = False

    def _problem(self, path: str, message: str, *, special: bool = False) -> None:
        shown = printable(path)
        if not (self.skip_unreadable or (special and self.skip_special)):
            raise UnreadablePathError(f"cannot snapshot {shown!r}: {message}")
        self.result.skipped.append(SkippedPath(shown, printable(message)))

    def add(self, relative: str, *, recursive: bool = True) -> None:
        """Record ``relative`` (``"."`` for the whole base) and, for directories, what is below.
        UnsafePathError if it lies in a storage root or beneath something not a directory."""
        self.result.overlapping = self._added
        self._added = True
        if relative == ".":
            if is_store_root(self.base_dir):
                raise UnsafePathError(f"{self.base_dir} is a snapstore root; it is never recorded")
            pinned = None if self.way is None or self.way.base_fd is None else self.way.identity("")
            self._walk([(".", self.base_dir, ("", "dir", 0, 0, 0, None, None), pinned)], root=True)
            return
        if self.way is not None:
            self._add_through(relative, self.way, recursive)
            return
        with WayDirs(self.base_dir) as way:
            self._add_through(relative, way, recursive)

    def _add_through(self, relative: str, way: WayDirs, recursive: bool) -> None:
        """``add`` of a path other than ``"."``, looked up through ``way``."""
        absolute = os.path.join(self.base_dir, relative)
        name = relative.rpartition("/")[2]
        try:
            place = scanlookup.parent_place(self, relative, way)
            if place is None:
                raise FileNotFoundError
            info = os.stat(place[1] + name, dir_fd=place[0], follow_symlinks=False)
        except FileNotFoundError:
            self.result.rows.append((relative, "absent", 0, 0, 0, None, None))
            return
        except scanlookup.Blocked as error:
            self._problem(relative, str(error))
            return
        except OSError as error:
            self._problem(relative, error.strerror or str(error))
            return
        try:
            check_relative_path(relative)
        except UnsafePathError as error:
            self._problem(relative, str(error))
            return
        rule = self.excludes.rule_leaving_out(relative, stat.S_ISDIR(info.st_mode))
        if rule is not None:
            advice = f"; {GITIGNORE_ADVICE}" if self.gitignore else ""
            raise InvalidValueError(
                f"cannot snapshot {relative!r}: the exclude rules leave it out (rule "
                f"{rule!r}{advice})"
            )
        if stat.S_ISDIR(info.st_mode):
            self._add_directory(relative, absolute, place, info, recursive)
        else:
            self._add_found(relative, absolute, info, None, dir_fd=place[0])

    def _add_directory(
        self,
        relative: str,
        absolute: str,
        place: tuple[int | None, str],
        info: os.stat_result,
        recursive: bool,
    ) -> None:
        """A requested directory (lstat'ed as ``info`` at ``place``): opened there
        without following a link, refused if it is a storage root, then recorded alone or
        walked from that very descriptor."""
        if file_id(info) in self.exclude_dirs:
            raise UnsafePathError(f"cannot snapshot {relative!r}: it is a snapstore root")
        name = relative.rpartition("/")[2]
        flags = LISTING_FLAGS if recursive else LOOKUP_FLAGS  # a shallow one is not listed
        try:
            fd = os.open(place[1] + name, flags | os.O_NOFOLLOW, dir_fd=place[0])
        except OSError as error:
            self._problem(relative, error.strerror or str(error))
            return
        pending: Pending = []
        try:
            found = file_id(os.fstat(fd))
            if found != file_id(info):
                self._problem(relative, "replaced while the tree was snapshotted")
                return
            if is_store_root(dir_fd=fd):
                raise UnsafePathError(f"cannot snapshot {relative!r}: it is a snapstore root")
            if self._leaves_out(name):
                return
            mode, mtime_ns = info.st_mode & 0o7777, info.st_mtime_ns
            row: EntryRow = (relative, "dir", mode, 0, mtime_ns, None, None)
            if not recursive:
                self.result.rows.append(row)
                return
            self.result.dirs[relative] = found
            self._add_children(relative, absolute, fd, row, pending)
        finally:
            os.close(fd)
        self._walk(pending)

    def add_below(self, relative: str, root: str) -> bool:
        """Record ``relative``, a path strictly below the requested directory ``root``, and
        what is below it, exactly as a walk of ``root`` would: nothing if it is gone, or it or
        a directory on the way is excluded, a storage root or a restore temp file. False,
        recording nothing, if ``root`` or a directory on the way is no longer a directory or
        has become a storage root: a walk would not reach ``relative`` at all, or ``add``
        would refuse ``root``, and the caller's picture of the tree is out of date."""
        self.result.overlapping = True
        self._added = True
        if self.way is not None:
            return scanlookup.add_below(self, relative, root, self.way)
        with WayDirs(self.base_dir) as way:
            return scanlookup.add_below(self, relative, root, way)

    def _add_found(
        self,
        relative: str,
        absolute: str,
        info: os.stat_result,
        pending: Pending | None,
        *,
        dir_fd: int | None = None,
    ) -> None:
        """Record a path already checked to be a safe relative path; a directory joins
        ``pending`` to be walked (or, with None, is recorded alone: a shallow path).
        ``dir_fd``: a descriptor of its directory, where a symlink's target is read."""
        if self._leaves_out(relative.rsplit("/", 1)[-1]):
            return
        mode = info.st_mode
        if stat.S_ISLNK(mode):
            try:
                if dir_fd is None:
                    target = os.readlink(absolute)  # a name in the base, looked up by its path
                else:
                    target = os.readlink(os.path.basename(absolute), dir_fd=dir_fd)
            except OSError as error:
                self._problem(relative, error.strerror or str(error))
                return
            if not recordable_link_target(target):
                self._problem(relative, f"its link target is not UTF-8: {printable(target)}")
                return
            self.result.rows.append(
                (relative, "symlink", mode & 0o7777, 0, info.st_mtime_ns, None, target)
            )
        elif stat.S_ISDIR(mode):
            if file_id(info) in self.exclude_dirs:
                return
            row: EntryRow = (relative, "dir", mode & 0o7777, 0, info.st_mtime_ns, None, None)
            if pending is not None:
                pending.append((relative, absolute, row, file_id(info)))
            elif not is_store_root(absolute):
                self.result.rows.append(row)
        elif S_ISREG(mode):
            self._add_file(relative, absolute, info)
        else:
            self._problem(relative, "not a regular file, directory or symlink", special=True)

    def _leaves_out(self, name: str) -> bool:
        """True for a name a restore in progress may have made its temp file."""
        return not self.restore_temps and is_restore_temp(name)

    def _add_file(self, relative: str, absolute: str, info: os.stat_result) -> None:
        if info.st_nlink > 1:
            self.result.links[relative] = (info.st_dev, info.st_ino)
        row = self.reuse(relative, info)
        if row is None:
            self.result.to_read.append((relative, absolute, info))
        else:
            self.result.rows.append(row)

    def _walk(self, pending: Pending, *, root: bool = False) -> None:
        """Walk the pending directories depth first, without recursion (a tree may be
        thousands of levels deep), holding one descriptor at a time. Each is listed through a
        descriptor, so each child's lstat is relative to it (no lookup from the root per
        file) and a directory swapped for a symlink mid-scan is refused, never followed."""
        while pending:
            relative, absolute, row, listed = pending.pop()
            flags = LISTING_FLAGS if root else LISTING_FLAGS | os.O_NOFOLLOW
            root = False
            try:
                fd = os.open(absolute, flags)
            except OSError as error:
                self._problem(relative, error.strerror or str(error))
                continue
            try:
                found = file_id(os.fstat(fd))
                if listed is not None and found != listed:  # a directory on the way swapped
                    self._problem(relative, "replaced while the tree was snapshotted")
                    continue
                self.result.dirs[relative] = found
                self._add_children(relative, absolute, fd, row, pending)
            finally:
                os.close(fd)

    def _add_children(
        self, relative: str, absolute: str, fd: int, row: EntryRow, pending: Pending
    ) -> None:
        """Record the directory open as ``fd`` and its children (subdirectories join
        ``pending``); a symlink's target is read through ``fd`` (by path, a directory above
        swapped for a symlink just then would have it read outside the tree)."""
        for child_relative, child_absolute, info in self._record_children(
            relative, absolute, fd, row
        ):
            self._add_found(child_relative, child_absolute, info, pending, dir_fd=fd)

    def _record_children(
        self, relative: str, absolute: str, fd: int, row: EntryRow
    ) -> list[tuple[str, str, os.stat_result]]:
        """Record the directory open as ``fd`` (its ``row``, unless it is a storage root) and
        the regular files it holds; return the other children (subdirectories, symlinks,
        specials) for ``_add_found``."""
        try:
            with os.scandir(fd) as listing:
                children = list(listing)
        except OSError as error:
            self._problem(relative, error.strerror or str(error))
            return []
        names = [child.name for child in children]
        if MARKER_FILE in names and is_store_root(dir_fd=fd):
            return []
        if row[0]:
            self.result.rows.append(row)
        if self.gitignore and GITIGNORE in names:
            within = "" if relative == "." else relative
            if within not in self.ignore_read:
                self.ignore_read.add(within)
                found = read_patterns(os.path.join(absolute, GITIGNORE), in_dir=fd)
                self.excludes.extend_gitignore(rebase(pattern, within) for pattern in found)
        if self.excludes:
            children = self._not_excluded(relative, children)
        return self._record_files(relative, absolute, children, plain_names(relative, names))

    def _record_files(
        self, relative: str, absolute: str, children: list[os.DirEntry[str]], checked: bool
    ) -> list[tuple[str, str, os.stat_result]]:
        """``_record_children``'s loop: the regular files among ``children`` (of ``relative``,
        found at ``absolute``) recorded or listed to be read, the other children returned.
        ``checked``: every child's name is known to be a plain name."""
        others: list[tuple[str, str, os.stat_result]] = []
        rows, to_read, reuse = self.result.rows, self.result.to_read, self.reuse
        links, stat_files = self.result.links, self.stat_files
        prefix = relative + "/"
        directory = absolute + os.sep
        for child in children:
            name = child.name
            if checked:
                child_relative = prefix + name
            else:
                try:
                    child_relative = child_path(relative, name)
                except UnsafePathError as error:
                    self._problem(name if relative == "." else prefix + name, str(error))
                    continue
            if (
                not stat_files
                and child.is_file(follow_symlinks=False)
                and not name.startswith(TEMP_PREFIX)
            ):
                to_read.append((child_relative, directory + name, None))
                continue
            try:
                info = child.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            except OSError as error:
                self._problem(child_relative, error.strerror or str(error))
                continue
            if S_ISREG(info.st_mode) and not name.startswith(TEMP_PREFIX):
                if info.st_nlink > 1:
                    links[child_relative] = (info.st_dev, info.st_ino)
                reused = reuse(child_relative, info)  # _add_file, inlined for the common case
                if reused is None:
                    to_read.append((child_relative, directory + name, info))
                else:
                    rows.append(reused)
            else:
                others.append((child_relative, directory + name, info))
        return others

    def _not_excluded(
        self, relative: str, children: list[os.DirEntry[str]]
    ) -> list[os.DirEntry[str]]:
        """The children of ``relative`` that no exclude rule leaves out."""
        names = self.excludes.simple_names
        if names:
            return [child for child in children if child.name not in names]
        prefix = "" if relative == "." else relative + "/"
        excluded = self.excludes
        return [
            child
            for child in children
            if not excluded(prefix + child.name, child.is_dir(follow_symlinks=False))
        ]
