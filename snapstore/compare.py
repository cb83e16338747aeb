"""Compare: what changed between two snapshots, between a snapshot and a directory (from a
restore's plan), and a path's history across a session; and the contents of the changed files,
for a patch (``snapstore.patch``).

Both comparisons read the same way, as ``git diff`` does: from the first snapshot to the
second, and from the snapshot to the directory (``added``: in the directory, not in the
snapshot). Only manifests are read to decide what changed (no blob): two entries are the same
when kind, mode, size, digest, link target and file attributes (holes, hard link) agree.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable, Iterator, Sequence

from snapstore.errors import SnapshotNotFound
from snapstore.format.paths import check_relative_path
from snapstore.fs.reading import open_regular, read_all
from snapstore.models import DiffReport, FileEntry, PathVersion, SnapshotInfo
from snapstore.patch import Patch, PatchBuilder, file_patch
from snapstore.repo.contents import read_content
from snapstore.repo.loose import BlobSource
from snapstore.repo.repository import Repository
from snapstore.restore.actions import Plan


def _state(entry: FileEntry | None) -> tuple[object, ...] | None:
    """What identifies an entry's content; None for a path absent or not recorded."""
    if entry is None or entry.kind == "absent":
        return None
    return (
        entry.kind,
        entry.mode,
        entry.size,
        entry.digest,
        entry.target,
        entry.extents,
        entry.link,
    )


def diff_entries(old: Iterable[FileEntry], new: Iterable[FileEntry]) -> DiffReport:
    """Paths added, modified and removed going from ``old`` to ``new``, each listed on its own
    (a directory that appears or goes is listed with everything in it)."""
    before = {entry.path: _state(entry) for entry in old}
    after = {entry.path: _state(entry) for entry in new}
    report = DiffReport()
    for path in sorted(set(before) | set(after)):
        was, now = before.get(path), after.get(path)
        if was == now:
            continue
        if was is None:
            report.added.append(path)
        elif now is None:
            report.removed.append(path)
        else:
            report.modified.append(path)
    return report


def diff_plan(plan: Plan) -> DiffReport:
    """What changed from the snapshot to the target of a restore planned as ``plan``:
    ``added``, what the target holds that the snapshot does not (the restore would remove
    it; a directory is listed with everything in it); ``removed``, what the snapshot holds
    and the target lacks (the restore would create it); ``modified``, the rest."""
    report = DiffReport()
    for action in plan.changes:
        path = action.entry.path
        if action.operation == "remove":
            report.added.append(path)
            if action.current == "dir":
                report.added.extend(subtree(os.path.join(plan.target, path), path))
        elif action.operation == "create":
            report.removed.append(path)
        else:
            report.modified.append(path)
    report.added.sort()
    return report


def subtree(directory: str, relative: str) -> Iterator[str]:
    """Every path below the directory ``directory`` (whose path in the diff is ``relative``),
    in path order, never following symlinks."""
    pending = [(directory, relative)]
    found: list[str] = []
    while pending:
        absolute, prefix = pending.pop()
        try:
            with os.scandir(absolute) as listing:
                children = list(listing)
        except OSError:
            continue
        for child in children:
            path = f"{prefix}/{child.name}"
            found.append(path)
            if child.is_dir(follow_symlinks=False):
                pending.append((child.path, path))
    yield from sorted(found)


def history(
    versions: Iterable[tuple[SnapshotInfo, FileEntry | None]],
) -> list[PathVersion]:
    """From a path's entry in each snapshot (oldest first), the snapshots where it changed:
    where it first appears, and each whose entry differs from the one before (an entry of
    None: it is gone from that snapshot on)."""
    changes = []
    previous: tuple[object, ...] | None = None
    for info, entry in versions:
        state = _state(entry)
        if state != previous:
            changes.append(PathVersion(info, entry if state is not None else None))
        previous = state
    return changes


def path_history(repo: Repository, session: str, path: str) -> list[PathVersion]:
    """The checkpoints of ``session`` in which ``path`` changed (see ``history``)."""
    wanted = check_relative_path(path)
    versions = []
    with repo.blobs_in_use():
        for info in repo.checkpoints(session):
            try:
                manifest = repo.catalog.read(session, info.name)
            except SnapshotNotFound:
                continue  # deleted since the listing
            versions.append((manifest.info, repo.trees.find(manifest, wanted)))
    return history(versions)


# ----------------------------------------------------------------- patches

Content = bytes | int | None
"""One version of a file for a patch: its bytes; its size alone (an int) when it is larger
than the patch reads; None where there is no such file."""


def _within(path: str, paths: Sequence[str] | None) -> bool:
    """Whether ``path`` is one of ``paths`` or lies below one (None: every path)."""
    if paths is None:
        return True
    return any(path == wanted or path.startswith(wanted + "/") for wanted in paths)


def entry_content(blobs: BlobSource, entry: FileEntry | None, max_file_bytes: int) -> Content:
    """A recorded entry's content for a patch: a file's verified bytes (its size alone when
    over ``max_file_bytes``), a symlink's target text; None for anything else."""
    if entry is None or entry.kind not in ("file", "symlink"):
        return None
    if entry.kind == "symlink":
        return (entry.target or "").encode("utf-8", "surrogateescape")
    if entry.size > max_file_bytes:
        return entry.size
    return read_content(blobs, entry)


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def target_content(target: str, path: str, max_file_bytes: int) -> Content:
    """The content of ``path`` in the directory ``target`` for a patch, read through real
    directories only (never following a symlink on the way, so nothing outside the target is
    read): a regular file's bytes (its size alone when over ``max_file_bytes``), a symlink's
    target text; None for anything else or nothing."""
    *parents, name = path.split("/")
    try:
        fd = os.open(target, _DIR_FLAGS)
    except OSError:
        return None
    try:
        for parent in parents:
            child = os.open(parent, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = child
        info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        if stat.S_ISLNK(info.st_mode):
            return os.fsencode(os.readlink(name, dir_fd=fd))
        if not stat.S_ISREG(info.st_mode):
            return None
        if info.st_size > max_file_bytes:
            return info.st_size
        file_fd = open_regular(name, dir_fd=fd, follow=False)
        try:
            return read_all(file_fd, max_file_bytes + 1)
        finally:
            os.close(file_fd)
    except OSError:
        return None
    finally:
        os.close(fd)


LOOK_ONLY = -1
"""A ``max_file_bytes`` under which every file is too large: a content reader given it says
whether there is a file (its size) without reading it."""

Reader = Callable[[str, int], Content]
"""One side of a patch: the content of a path, read up to a number of bytes."""


def build_patch(
    report: DiffReport,
    old: Reader,
    new: Reader,
    *,
    paths: Sequence[str] | None,
    context: int,
    max_bytes: int | None,
    max_file_bytes: int,
) -> Patch:
    """The patch of each changed path of ``report`` (in path order, only those within
    ``paths``; directories have none) from its ``old`` to its ``new`` content, within
    ``max_bytes`` of text (``patch.PatchBuilder``). Once the bound is reached the later files
    are only named as omitted: looked at, never read."""
    builder = PatchBuilder(max_bytes)
    for path in sorted({*report.added, *report.modified, *report.removed}):
        if not _within(path, paths):
            continue
        if builder.full:
            if old(path, LOOK_ONLY) is not None or new(path, LOOK_ONLY) is not None:
                builder.patch.omitted.append(path)
            continue
        before, after = old(path, max_file_bytes), new(path, max_file_bytes)
        if before is None and after is None:
            continue
        builder.add(
            file_patch(
                path,
                before if isinstance(before, bytes) else None,
                after if isinstance(after, bytes) else None,
                context=context,
                old_size=before if isinstance(before, int) else None,
                new_size=after if isinstance(after, int) else None,
            )
        )
    return builder.patch


def snapshot_patch(
    repo: Repository,
    dry_plan: Callable[[str, str, str], Plan],
    session: str,
    name: str,
    other: str | None,
    *,
    target: str | None,
    paths: Sequence[str] | None,
    context: int,
    max_bytes: int | None,
    max_file_bytes: int,
) -> Patch:
    """The patch ``SnapStore.patch`` returns: from snapshot ``name`` to ``other``, or to the
    directory ``target`` (default: the snapshot's base dir), whose changes ``dry_plan``
    (a restore's plan, writing nothing) decides. Blobs are read under the shared gc lock."""
    target_dir = ""
    report = DiffReport()
    if other is None:
        info = repo.files_header(session, name)
        target_dir = os.path.abspath(info.base_dir if target is None else target)
        report = diff_plan(dry_plan(session, name, target_dir))
    with repo.blobs_in_use():
        old = {e.path: e for e in repo.trees.entries(repo.files_manifest(session, name))}
        new: dict[str, FileEntry] = {}
        if other is not None:
            new = {e.path: e for e in repo.trees.entries(repo.files_manifest(session, other))}
            report = diff_entries(old.values(), new.values())

        def before(path: str, limit: int) -> Content:
            return entry_content(repo.blobs, old.get(path), limit)

        def after(path: str, limit: int) -> Content:
            if other is not None:
                return entry_content(repo.blobs, new.get(path), limit)
            return target_content(target_dir, path, limit)

        return build_patch(
            report,
            before,
            after,
            paths=paths,
            context=context,
            max_bytes=max_bytes,
            max_file_bytes=max_file_bytes,
        )
