"""What a scan found: the rows it made, the files whose bytes must be read, the paths it
could not record, and the hook that spares reading a file the stat cache vouches for. The
walk that fills it is ``scan``; reading the listed files, ``ingest``."""

from __future__ import annotations

import os
from collections.abc import Callable
from operator import itemgetter

from snapstore.format.manifest import EntryRow
from snapstore.fs.stamps import FileId
from snapstore.models import SkippedPath

Reuse = Callable[[str, os.stat_result], EntryRow | None]
"""Given a regular file's path and lstat, its finished row if its bytes need no reading."""


FileToRead = tuple[str, str, os.stat_result | None]
"""A regular file whose bytes the snapshot must read: (path, absolute path, the lstat it was
found with, or None if the scan listed it without one: see ``Scanner.stat_files``). A plain
tuple: a scan may make one per file."""


class ScanResult:
    """Everything a scan found, plus the paths it could not record. ``rows`` and
    ``to_read`` are in no particular order and may name a path twice (when requested paths
    overlap: ``overlapping`` says so). A plain class, not a dataclass: every create builds
    this module, and a dataclass is built at import.

    ``links``: regular files with more than one link, their (device, inode) by path (a
    snapshot records the ones it holds of each inode as a hard-link group). ``dirs``: the
    directories walked, by path, each as the very directory listed: a file read later by
    path must be read from the same directory, not through one swapped for a symlink."""

    def __init__(
        self,
        *,
        to_read: list[FileToRead] | None = None,
        links: dict[str, tuple[int, int]] | None = None,
        dirs: dict[str, FileId] | None = None,
    ) -> None:
        self.rows: list[EntryRow] = []
        self.to_read: list[FileToRead] = [] if to_read is None else to_read
        self.skipped: list[SkippedPath] = []
        self.overlapping = False
        self.links: dict[str, tuple[int, int]] = {} if links is None else links
        self.dirs: dict[str, FileId] = {} if dirs is None else dirs


def sorted_rows(rows: list[EntryRow], *, overlapping: bool) -> list[EntryRow]:
    """``rows`` sorted by path in place, each path once (as first found when overlapping)."""
    rows.sort(key=itemgetter(0))
    if overlapping:
        return [row for i, row in enumerate(rows) if i == 0 or rows[i - 1][0] != row[0]]
    return rows
