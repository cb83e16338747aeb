"""Which file a stat describes, and which version of it: one definition for every check that
must notice a file replaced (another inode) or modified in place (size, mtime or ctime)."""

from __future__ import annotations

import operator
import os
from collections.abc import Callable

FileId = tuple[int, int]
"""``(device, inode)``: the same file, whatever its name."""

Version = tuple[int, int, int, int, int]
"""``(inode, size, mtime_ns, ctime_ns, device)``: the same bytes, as far as stat can tell
(the order is the one the header cache records, docs/format.md)."""


file_id: Callable[[os.stat_result], FileId] = operator.attrgetter("st_dev", "st_ino")
"""The file a stat describes (a C getter, as ``version``)."""

version: Callable[[os.stat_result], Version]
version = operator.attrgetter("st_ino", "st_size", "st_mtime_ns", "st_ctime_ns", "st_dev")
"""The version of the file a stat describes; any write or replacement changes it (a C
getter: a create asks it twice for every file it reads)."""
