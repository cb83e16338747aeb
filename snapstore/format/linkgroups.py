"""The rules of hard-link groups in a snapshot's entries (pure code, no I/O).

A file entry with ``link`` set was, when the snapshot was taken, a hard link of the file entry
at that path: the first path of its group in path order, which has no ``link`` itself and
records the same content, size and mode. ``check_links`` holds a whole snapshot to these
rules; ``link_groups`` groups any selection of entries (a restore of some paths may hold a
member without its group's first path: the first selected member then stands for it).
"""

from __future__ import annotations

from collections.abc import Iterable

from snapstore.errors import CorruptManifestError
from snapstore.models import FileEntry


class CorruptLinkError(CorruptManifestError):
    """A snapshot's hard-link attributes break the rules (the snapshot is corrupt)."""


def _content(entry: FileEntry) -> tuple[object, ...]:
    """What every member of a group must share."""
    return (entry.digest, entry.size, entry.extents, entry.mode)


def _check_member(entry: FileEntry, first: FileEntry | None) -> None:
    """CorruptLinkError unless ``entry`` (with ``link`` set) fits the group's first file."""
    link = entry.link
    if entry.kind != "file" or link is None or not link < entry.path:
        raise CorruptLinkError(
            f"{entry.path!r} is recorded as a link of {link!r}, which does not come before it"
        )
    if first is not None and (
        first.kind != "file" or first.link is not None or _content(first) != _content(entry)
    ):
        raise CorruptLinkError(
            f"{entry.path!r} is recorded as a link of {link!r}, which does not record the same file"
        )


def check_links(entries: Iterable[FileEntry]) -> None:
    """CorruptLinkError unless every link of a whole snapshot's entries names an earlier file
    entry of the same content, size and mode that is not itself a link."""
    entries = list(entries)
    linked = [entry for entry in entries if entry.link is not None]
    if not linked:
        return
    by_path = {entry.path: entry for entry in entries}
    for entry in linked:
        assert entry.link is not None
        first = by_path.get(entry.link)
        if first is None:
            raise CorruptLinkError(
                f"{entry.path!r} is recorded as a link of {entry.link!r}, which the snapshot "
                "does not record"
            )
        _check_member(entry, first)


def link_groups(entries: Iterable[FileEntry]) -> dict[str, list[FileEntry]]:
    """The groups of two or more of ``entries`` (in path order) that are links of one file,
    keyed by the path of the group's first file (whether or not it is among ``entries``);
    CorruptLinkError for members that do not fit their group."""
    entries = list(entries)
    linked = [entry for entry in entries if entry.link is not None]
    if not linked:
        return {}
    groups: dict[str, list[FileEntry]] = {}
    for entry in linked:
        _check_member(entry, None)
        assert entry.link is not None
        members = groups.setdefault(entry.link, [])
        if members and _content(members[0]) != _content(entry):
            raise CorruptLinkError(
                f"{entry.path!r} and {members[0].path!r} are recorded as links of one file "
                "with different contents"
            )
        members.append(entry)
    firsts = {entry.path: entry for entry in entries if entry.path in groups}
    found = {}
    for key, members in groups.items():
        first = firsts.get(key)
        if first is not None:
            _check_member(members[0], first)
            members.insert(0, first)
        if len(members) > 1:
            found[key] = sorted(members, key=lambda entry: entry.path)
    return found
