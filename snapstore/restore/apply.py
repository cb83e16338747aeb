"""Apply a restore plan to the target, never through a symlink planted in it.

The target is walked through directory descriptors opened one component at a time with
``O_NOFOLLOW``; each file is written to a temp file beside its destination, verified against
its digest while copied, and renamed into place (see ``writes``). Removals run deepest first,
then creations in path order, then the modes of directories (last, so that a read-only
directory can still be filled). A directory the user owns but cannot write is made writable
for the restore and given its mode back afterwards.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Set

from snapstore.errors import UnsafePathError
from snapstore.fs.durable import discard
from snapstore.fs.seam import FileSystem
from snapstore.fs.tempnames import RestoreTemps
from snapstore.repo.loose import BlobSource
from snapstore.repo.prefetch import ReadAhead, read_ahead
from snapstore.restore.actions import Action, Plan, wanted_mode
from snapstore.restore.dirhandles import DirHandles, MadeTarget
from snapstore.restore.flushes import RestoreFlushes
from snapstore.restore.removal import remove_tree
from snapstore.restore.writes import StagedFiles

Progress = Callable[[int, int], None]


def split(path: str) -> tuple[str, str]:
    """A relative path's parent ("" at the top) and last component."""
    parent, _, name = path.rpartition("/")
    return parent, name


def _write_symlink(
    fs: FileSystem, parent_fd: int, name: str, target: str, temps: RestoreTemps
) -> None:
    temp = temps.new()
    fs.symlink(target, temp, dir_fd=parent_fd)
    try:
        fs.replace(temp, name, src_dir_fd=parent_fd, dst_dir_fd=parent_fd)
    except BaseException:
        discard(fs, temp, dir_fd=parent_fd)
        raise


def _set_mode(fs: FileSystem, parent_fd: int, name: str, mode: int, flush: bool) -> None:
    """chmod (and flush) the file or directory ``name``, opened without following links."""
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=parent_fd)
    try:
        fs.fchmod(fd, mode)
        if flush:
            fs.fsync(fd)
    finally:
        os.close(fd)


def plan_reads(plan: Plan, blobs: BlobSource) -> BlobSource:
    """The source ``apply_plan`` reads the plan's blobs from, reading them ahead from now
    (``snapstore.repo.prefetch``): started before the restore's journal is flushed, the
    first blocks are decompressed while that flush waits. Give it to ``apply_plan``, or
    ``stop_reading`` it."""
    return read_ahead(blobs, files_in_order(plan.changes, plan.linked))


def apply_plan(
    plan: Plan,
    blobs: BlobSource,
    fs: FileSystem,
    *,
    durable: bool,
    temps: RestoreTemps,
    keep_special_bits: bool = False,
    progress: Progress | None = None,
    source: BlobSource | None = None,
    made: MadeTarget | None = None,
) -> None:
    """Carry out a plan: removals deepest first, then creations in path order, then the
    modes of directories (last, so a read-only directory can still be filled). Files and
    links are written under ``temps``' names (the restore's journal lists their
    directories, so a recovery can remove them). Blobs are read from ``source`` (from
    ``plan_reads``; stopped once done, whatever happens), else read ahead from ``blobs``.

    The target is the directory at the plan's real path reached without following links
    (``DirHandles``): the one the plan looked at, or, for a plan made where nothing was,
    the one the restore ``made`` (else made now with ``make_target``)."""
    changes = plan.changes
    if source is None:
        source = plan_reads(plan, blobs)
    try:
        flushes = RestoreFlushes(fs, durable=durable)
        handles = _target_of(plan, fs, flushes, made)
    except BaseException:
        stop_reading(source)
        raise
    staged = StagedFiles(fs, source, handles, temps, flushes, linked=plan.linked)
    try:
        for action in sorted(changes, key=lambda a: a.entry.path, reverse=True):
            if action.clears_existing:
                parent, name = split(action.entry.path)
                parent_fd = handles.writable(parent)
                if action.current == "dir":
                    handles.forget(action.entry.path)
                    remove_tree(fs, parent_fd, name)
                else:
                    fs.unlink(name, dir_fd=parent_fd)
                handles.touched.add(parent)
        dir_modes: list[tuple[str, int]] = []
        for done, action in enumerate(changes, 1):
            entry = action.entry
            parent, name = split(entry.path)
            mode = wanted_mode(entry, keep_special_bits)
            if action.operation == "chmod" and entry.kind == "dir":
                dir_modes.append((entry.path, mode))
            elif action.operation == "chmod":
                by_filesystem = flushes.by_filesystem(handles, parent)
                _set_mode(fs, handles.get(parent), name, mode, durable and not by_filesystem)
                if by_filesystem:  # flushed with its filesystem at the end
                    handles.touched.add(parent)
            elif action.operation != "remove":
                parent_fd = handles.writable(parent, create=True)
                if entry.kind == "dir":
                    fs.mkdir(name, 0o700, dir_fd=parent_fd)
                    dir_modes.append((entry.path, mode))
                elif entry.kind == "symlink":
                    assert entry.target is not None
                    _write_symlink(fs, parent_fd, name, entry.target, temps)
                else:
                    staged.add(parent, name, entry, mode)
                handles.touched.add(parent)
            if progress is not None:
                progress(done, len(changes))
        staged.publish()
        _set_dir_modes(fs, handles, dir_modes, flushes)
    except BaseException:
        staged.discard()
        raise
    finally:
        handles.close()
        stop_reading(source)


def _target_of(
    plan: Plan, fs: FileSystem, flushes: RestoreFlushes, made: MadeTarget | None
) -> DirHandles:
    """The handles of the plan's target (see ``apply_plan``); a target made now has its new
    entries flushed at once unless the restore's last flush covers them."""
    if plan.real_target is None:
        raise ValueError("a plan made only to compare is never applied")
    if plan.target_id is None and not plan.new_target:
        raise UnsafePathError(
            f"the restore target {plan.target} was no directory when the restore planned; "
            "nothing was written"
        )
    return DirHandles(
        fs,
        plan.target,
        real_target=plan.real_target,
        durable=flushes.durable and not flushes.new_entries_flushed_later(plan.target),
        expected=plan.target_id,
        made=made,
        new=plan.new_target,
    )


def stop_reading(source: BlobSource) -> None:
    """Stop a read-ahead (its thread ends); nothing to do for a plain source."""
    if isinstance(source, ReadAhead):
        source.close()


def files_in_order(changes: list[Action], linked: Set[str]) -> list[tuple[bytes, int]]:
    """The blobs a plan's changes read, in the order ``apply_plan`` reads them: of a link
    group it writes (``linked``), only its first member's (the others become links)."""
    wanted: list[tuple[bytes, int]] = []
    groups_read: set[str] = set()
    for action in changes:
        entry = action.entry
        if action.operation in ("remove", "chmod") or entry.kind != "file" or not entry.digest:
            continue
        group = entry.link or entry.path
        if group in linked:
            if group in groups_read:
                continue
            groups_read.add(group)
        wanted.append((entry.digest, entry.size))
    return wanted


def _set_dir_modes(
    fs: FileSystem, handles: DirHandles, dir_modes: list[tuple[str, int]], flushes: RestoreFlushes
) -> None:
    """Give directories their final modes, deepest first, then flush those directories and
    every directory whose entries the restore changed (``RestoreFlushes.directories``: one
    ``syncfs`` per filesystem where that flushes as ``fsync`` does, an ``fsync`` each
    elsewhere)."""
    deepest_first = sorted(dir_modes, reverse=True)
    for path, mode in deepest_first:
        handles.settle_mode(path)
        fs.fchmod(handles.get(path), mode)
    flushes.directories(handles, [*sorted(handles.touched), *(path for path, _ in deepest_first)])
