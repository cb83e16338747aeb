"""Hard-link groups in a restore plan: a group is left alone only if all of it already is
what the snapshot records, one file under every name; otherwise all of it is written again,
its first name as a new file and the others as links of it.

Writing a group whole keeps the result right whatever the target held: a member changed, a
member that is a separate copy with the same bytes, or an inode the target shares with files
outside the group. Only files the restore itself has just written are ever linked, so a
restore never links a path of the target to anything else.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from snapstore.format.linkgroups import link_groups
from snapstore.fs.stamps import FileId, file_id
from snapstore.models import FileEntry

if TYPE_CHECKING:
    from snapstore.restore.actions import Action

_IN_PLACE = ("unchanged", "chmod")


def _split_shared(actions: list[Action], stats: Mapping[str, os.stat_result | None]) -> None:
    """Write again the files left in place that share an inode in the target with a file of
    another group (or with one the snapshot records on its own): editing one must not change
    the other, as it did not when the snapshot was taken. A file whose mode must change and
    whose inode has links the plan does not hold (outside the target, or paths it does not
    restore) is written again too: a chmod of the shared inode would change them as well."""
    by_inode: dict[FileId, list[int]] = {}
    for i, action in enumerate(actions):
        info = stats.get(action.entry.path)
        if (
            info is not None
            and info.st_nlink > 1
            and action.entry.kind == "file"
            and action.operation in _IN_PLACE
        ):
            by_inode.setdefault(file_id(info), []).append(i)
    for found in by_inode.values():
        keys = [_group_of(actions[i].entry) for i in found]
        first = stats[actions[found[0]].entry.path]
        links_elsewhere = first is not None and first.st_nlink > len(found)
        for i, key in zip(found, keys, strict=True):
            if key != keys[0] or (links_elsewhere and actions[i].operation == "chmod"):
                actions[i] = actions[i]._replace(operation="replace")


def _group_of(entry: FileEntry) -> str:
    """The group an entry belongs to: the first path of its links, else its own."""
    return entry.link or entry.path


def settle_links(actions: list[Action], stats: Mapping[str, os.stat_result | None]) -> set[str]:
    """Make every link group among the files of ``actions`` either wholly in place or wholly
    written (see the module docstring), in place, after splitting files that share an inode
    the snapshot does not; returns the groups it writes, by the ``link`` their members name.
    ``stats``: the target's lstat of each path looked at."""
    _split_shared(actions, stats)
    groups = link_groups(action.entry for action in actions)
    written: set[str] = set()
    if not groups:
        return written
    where = {action.entry.path: i for i, action in enumerate(actions)}
    for key, members in groups.items():
        found = [where[member.path] for member in members if member.path in where]
        if len(found) < 2:
            continue
        group = [actions[i] for i in found]
        infos = [stats.get(action.entry.path) for action in group]
        if all(action.operation in _IN_PLACE for action in group) and (
            None not in infos and len({file_id(info) for info in infos if info}) == 1
        ):
            continue
        for i, action in zip(found, group, strict=True):
            if action.operation in _IN_PLACE:
                actions[i] = action._replace(operation="replace")
        written.add(key)
    return written
