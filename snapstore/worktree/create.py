"""The create pipeline: scan a base directory, store new blobs, commit the manifest last.

Runs with the gc lock already held shared (no blob it counts on can vanish); takes the
session's lock only for the commit, after re-checking that every blob it references is
stored. Checkpoints and undo backups are both made here; they differ in their header.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from operator import itemgetter
from typing import Any, NamedTuple

from snapstore.backend.layout import refuse_in_store
from snapstore.errors import (
    InvalidValueError,
    MissingPathError,
    SourceChangedError,
)
from snapstore.format.manifest import EntryRow
from snapstore.format.names import encode_name, generated_name
from snapstore.format.packfile import KIND_TREE
from snapstore.format.paths import check_relative_path
from snapstore.format.times import expiry_ns
from snapstore.format.tree import FileAttrs
from snapstore.format.treebuild import BuiltTrees
from snapstore.fs.realdirs import real_directory
from snapstore.models import SkippedPath, SnapshotInfo
from snapstore.repo.batch import BlobBatch
from snapstore.repo.commits import IF_EXISTS, Draft
from snapstore.repo.repository import Repository
from snapstore.worktree import treememo
from snapstore.worktree.basepaths import relative_to_base
from snapstore.worktree.excludes import Matcher, check_patterns, initial_patterns
from snapstore.worktree.gitrules import LeadingRules, leading_rules
from snapstore.worktree.ingestscan import ingest_scan
from snapstore.worktree.options import CreateOptions
from snapstore.worktree.scan import GITIGNORE_ADVICE, Scanner
from snapstore.worktree.statcache import StatCache
from snapstore.worktree.waydirs import WayDirs

Progress = Callable[[int, int], None]


class Request(NamedTuple):
    """What to snapshot: ``paths`` relative to ``base``, walked recursively unless listed in
    ``shallow`` (recorded alone). A named tuple: every process that creates builds this
    class at import, and a frozen dataclass takes several times longer to build."""

    session: str
    name: str
    base: str
    paths: list[str]
    meta: dict[str, Any]
    ttl: float | None = None
    shallow: frozenset[str] = frozenset()
    skip_unreadable: bool = False
    rehash: bool = False
    backup_of: str | None = None
    exclude: tuple[str, ...] = ()
    default_excludes: bool = True
    gitignore: bool = True
    if_exists: str = "replace"
    real_base: str | None = None
    """``base`` with every symlink resolved, as the request was checked (None: not yet)."""


def checkpoint_request(
    repo: Repository,
    session: str,
    name: str | None,
    paths: Iterable[str | os.PathLike[str]] | str | os.PathLike[str] | None,
    options: CreateOptions,
) -> Request:
    """The checked request of ``SnapStore.create``: every argument error raised here, before
    any lock is taken or anything read."""
    encode_name(session, "session")
    name = generated_name() if name is None else name
    encode_name(name, "snapshot name")
    repo.check_writable("create a snapshot")
    if paths is None:
        raise InvalidValueError("create needs the paths to snapshot")
    if isinstance(paths, str | os.PathLike):
        paths = [paths]
    if options.if_exists not in IF_EXISTS:
        raise InvalidValueError(
            f"if_exists must be 'replace' or 'error', not {options.if_exists!r}"
        )
    if options.missing not in ("absent", "error"):
        raise InvalidValueError(f"missing must be 'absent' or 'error', not {options.missing!r}")
    given = os.fspath(options.base_dir)
    if not isinstance(given, str):
        raise InvalidValueError(f"base_dir must be a str or a path, not bytes: {given!r}")
    base = os.path.abspath(given)
    real_base, is_directory = real_directory(base)
    if not is_directory:
        raise InvalidValueError(f"base_dir {base} is not a directory")
    refuse_in_store(repo.real_root, real_base, "base_dir")
    relative = [requested_path(base, path) for path in paths]
    if options.missing == "error":
        absent = [p for p in relative if not os.path.lexists(os.path.join(base, p))]
        if absent:
            raise MissingPathError(f"no such path under {base}: {', '.join(absent[:5])}")
    expiry_ns(0, options.ttl)
    return Request(
        session,
        name,
        base,
        relative,
        dict(options.meta or {}),
        ttl=options.ttl,
        skip_unreadable=options.skip_unreadable,
        rehash=options.rehash,
        exclude=tuple(check_patterns(options.exclude)),
        default_excludes=options.default_excludes,
        gitignore=options.gitignore,
        if_exists=options.if_exists,
        real_base=real_base,
    )


def requested_path(base: str, path: str | os.PathLike[str]) -> str:
    """``relative_to_base`` of a path asked for: a relative path that stays inside the base
    once normalized is that normal form (no walk of the base's own path for it, as
    ``relpath`` makes); anything else takes the full way, which refuses what it must."""
    given = os.fspath(path)
    if type(given) is str and given and not os.path.isabs(given):
        plain = os.path.normpath(given)
        if plain == ".":
            return "."
        if plain != ".." and not plain.startswith(".." + os.sep):
            return check_relative_path(plain.replace(os.sep, "/"))
    return relative_to_base(base, path)


def git_rules(request: Request) -> LeadingRules:
    """git's rules a create of ``request`` starts with (none without ``gitignore``);
    InvalidValueError if they ignore the base directory whole (a checkpoint of it would
    record nothing, and its restore would touch nothing)."""
    if not request.gitignore or request.backup_of is not None:
        return LeadingRules()
    rules = leading_rules(request.base, request.paths, real_base=request.real_base)
    if rules.ignored is not None:
        raise InvalidValueError(
            f"cannot snapshot in {request.base}: {rules.ignored}, so git ignores everything "
            f"in it; {GITIGNORE_ADVICE}"
        )
    return rules


def store_trees(trees: BuiltTrees, batch: BlobBatch) -> None:
    """Store each tree object of ``trees`` through ``batch``, unless it already is."""
    for digest, data in trees.objects.items():
        batch.add(digest, data, KIND_TREE)


def _store_trees(
    repo: Repository,
    request: Request,
    rows: list[EntryRow],
    attrs: dict[str, FileAttrs],
    batch: BlobBatch,
    *,
    remember: bool,
) -> BuiltTrees:
    """The snapshot's tree objects (built again only where they differ from this process's
    previous create of the base directory: ``treememo``; ``remember`` these for the next),
    each stored through ``batch`` unless it already is."""
    try:
        trees = treememo.build(repo, request.base, rows, attrs, remember=remember)
    except ValueError as error:
        raise SourceChangedError(f"the tree changed while it was snapshotted: {error}") from None
    store_trees(trees, batch)
    return trees


class Recorded(NamedTuple):
    """What a create recorded, ready to commit: the rows (sorted, each path once) and the
    tree objects recording them, the paths it could not record, the exclude rules it ran
    with, the totals, the rows of the blobs (files, extent maps and their pieces, trees) the
    commit must find stored, the attributes of the file rows that have any, by path, and the
    files that had several links when scanned (a write through a link outside the tree
    changes them without any change inside it)."""

    rows: Sequence[EntryRow]
    trees: BuiltTrees
    skipped: Sequence[SkippedPath]
    excludes: tuple[str, ...]
    file_count: int
    total_bytes: int
    unverified: Sequence[EntryRow]
    attrs: Mapping[str, FileAttrs]
    linked: Sequence[str] = ()
    stored_bytes: int = 0
    """The bytes its create added to the store (``BlobBatch.stored_bytes``)."""


Committed = Callable[[SnapshotInfo, Recorded], None]
"""Called with the header and what was just committed, still under the session's lock (so
the manifest is the one this create wrote)."""


def take_snapshot(
    repo: Repository,
    request: Request,
    *,
    progress: Progress | None = None,
    committed: Committed | None = None,
    remember_trees: bool = True,
    base_fd: int | None = None,
) -> tuple[SnapshotInfo, bool]:
    """Scan, ingest and commit ``request``; returns the committed header and whether it
    replaced an existing snapshot of the same name. The gc lock must be held shared.
    ``remember_trees``: keep the tree objects for the next create of the base directory in
    this process (``treememo``; an incremental create remembers its own). ``base_fd``: a
    descriptor of the base, the caller's, when it must be that very directory whatever its
    path leads to meanwhile (an undo backup of the target a restore planned on): every
    requested path is looked up from it.

    An undo backup (``backup_of`` set) records special files as skipped rather than failing,
    and leaves the stat cache alone (its files are about to be replaced)."""
    repo.require_current_format()
    scan_start_ns = time.time_ns()
    cache = StatCache(repo.backend, request.base, scan_start_ns)
    batch = BlobBatch(repo.blobs)
    backup = request.backup_of is not None
    git = git_rules(request)
    excludes = Matcher(
        ()
        if backup
        else initial_patterns(
            request.base, request.exclude, default_excludes=request.default_excludes
        ),
        gitignore=git.patterns,
    )
    reuse = (
        None
        if request.rehash or cache.empty
        else cache.reuse_hook(batch.claim, batch.claim_extents)
    )
    way = WayDirs(request.base, base_fd=base_fd)  # held from the scan to the read of its files
    scanner = Scanner(
        request.base,
        exclude_dirs=repo.own_roots(),
        skip_unreadable=request.skip_unreadable,
        skip_special=backup,
        excludes=excludes,
        gitignore=request.gitignore and not backup,
        ignore_read=git.read_dirs,
        reuse=reuse,
        restore_temps=backup,
        stat_files=reuse is not None,
        way=way,
    )
    try:
        with way:
            for path in request.paths:
                scanner.add(path, recursive=path not in request.shallow)
            scanned = scanner.result
            rows, attrs = ingest_scan(
                scanned,
                batch,
                cache,
                racy_from_ns=cache.trust_before_ns,
                skip_unreadable=request.skip_unreadable,
                progress=progress,
                way=way,
            )
        trees = _store_trees(
            repo, request, rows, attrs, batch, remember=remember_trees and not backup
        )
        batch.finish()
    except BaseException:
        batch.abort()
        raise
    file_rows = [row for row in rows if row[1] == "file"]
    recorded = Recorded(
        rows,
        trees,
        scanned.skipped,
        tuple(excludes.patterns),
        len(file_rows),
        sum(map(itemgetter(3), file_rows)),
        [*plain_file_rows(file_rows, attrs), *batch.counted, *trees.rows()],
        attrs,
        tuple(scanned.links),
        batch.stored_bytes,
    )
    info, replaced = commit_recorded(repo, request, recorded, committed=committed)
    if not backup:
        cache.save(keep_unseen=request.paths != ["."] or bool(request.shallow))
    return info, replaced


def plain_file_rows(file_rows: list[EntryRow], attrs: Mapping[str, FileAttrs]) -> list[EntryRow]:
    """The file rows whose digests name blobs of their bytes (not extent maps, whose pieces
    and map the batch counted)."""
    if not attrs:
        return file_rows
    return [row for row in file_rows if "extents" not in attrs.get(row[0], ())]


def commit_recorded(
    repo: Repository,
    request: Request,
    recorded: Recorded,
    *,
    committed: Committed | None = None,
) -> tuple[SnapshotInfo, bool]:
    """Commit what a create recorded as (session, name) (``Repository.commit_snapshot``:
    every blob of ``recorded.unverified`` checked, then numbered and written under the
    session's lock); the header, and whether it replaced a snapshot. The gc lock must be
    held shared (since the blobs were claimed)."""
    draft = Draft(
        request.session,
        request.name,
        "files",
        ttl=request.ttl,
        file_count=recorded.file_count,
        total_bytes=recorded.total_bytes,
        meta=request.meta,
        base_dir=request.base,
        skipped=tuple(sorted(recorded.skipped, key=lambda s: s.path)),
        roots=tuple(sorted({p for p in request.paths if p not in request.shallow})),
        backup_of=request.backup_of,
        excludes=recorded.excludes,
        stored_bytes=recorded.stored_bytes,
        tree=recorded.trees.root,
    )
    return repo.commit_snapshot(
        draft,
        if_exists=request.if_exists,
        unverified=recorded.unverified,
        committed=None if committed is None else lambda info: committed(info, recorded),
    )
