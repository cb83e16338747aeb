"""Hard-link groups of a snapshot: the files it records that were one inode when scanned.

A group is recorded as its first path (in path order) plus, on every other member's row, a
``link`` attribute naming that first path, as tar records a hard link. Each member keeps its
own digest and size, so reading or comparing one path never needs the group; only a restore
uses it, to make the members one file again. A member whose row no longer matches the first
one (the file changed between the reads) is recorded on its own.
"""

from __future__ import annotations

from collections.abc import Mapping

from snapstore.format.manifest import EntryRow
from snapstore.format.tree import FileAttrs
from snapstore.fs.stamps import FileId


def _same_file(row: EntryRow, first: EntryRow, extents: bool, first_extents: bool) -> bool:
    """Whether two file rows record the same content and mode (as links of one inode do)."""
    return (
        row[2] == first[2]
        and row[3] == first[3]
        and row[5] == first[5]
        and extents == first_extents
    )


def record_links(
    rows: list[EntryRow], links: Mapping[str, FileId], attrs: dict[str, FileAttrs]
) -> None:
    """Add the ``link`` attribute to every member but the first of each group of file rows
    that ``links`` (path -> device and inode, for files with several links) puts on one inode."""
    groups: dict[FileId, list[str]] = {}
    for path, key in links.items():
        groups.setdefault(key, []).append(path)
    wanted = {path for paths in groups.values() if len(paths) > 1 for path in paths}
    if not wanted:
        return
    found = {row[0]: row for row in rows if row[1] == "file" and row[0] in wanted}
    for paths in groups.values():
        present = sorted(path for path in paths if path in found)
        if len(present) < 2:
            continue
        first = found[present[0]]
        first_extents = "extents" in attrs.get(first[0], {})
        for path in present[1:]:
            row = found[path]
            if _same_file(row, first, "extents" in attrs.get(path, {}), first_extents):
                attrs[path] = {**attrs.get(path, {}), "link": first[0]}
