"""What a scan found: the rows it made, the files whose bytes must be read, the paths it
could not record, and the hook that spares reading a file the stat cache vouches for. The
walk that fills it is ``scan``; reading the listed files, ``ingest``."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
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


@dataclass
class ScanResult:
    """Everything a scan found, plus the paths it could not record. ``rows`` and
    ``to_read`` are in no particular order and may name a path twice (when requested paths
    overlap: ``overlapping`` says so)."""

    rows: list[EntryRow] = field(default_factory=list)
    to_read: list[FileToRead] = field(default_factory=list)
    skipped: list[SkippedPath] = field(default_factory=list)
    overlapping: bool = False
    links: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Regular files with more than one link: their (device, inode), by path (a snapshot
    records the ones it holds of each inode as a hard-link group)."""
    dirs: dict[str, FileId] = field(default_factory=dict)
    """The directories walked, by path, each as the very directory listed: a file read later
    by path must be read from the same directory, not through one swapped for a symlink."""


def sorted_rows(rows: list[EntryRow], *, overlapping: bool) -> list[EntryRow]:
    """``rows`` sorted by path in place, each path once (as first found when overlapping)."""
    rows.sort(key=itemgetter(0))
    if overlapping:
        return [row for i, row in enumerate(rows) if i == 0 or rows[i - 1][0] != row[0]]
    return rows
