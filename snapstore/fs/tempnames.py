"""The names of the temp files a restore writes beside its destinations.

A restore writes each file and link under a temp name in its destination's directory and
renames it into place. Its temp names carry the restore's own token, kept in its journal:
``.snapstore-tmp-<token>-<random>``, each part 16 lowercase hex digits. Whoever recovers a
killed restore removes only the names of that shape with that token: a user's file that
merely starts with ``.snapstore-tmp-`` is never taken for one. Restores of versions before
the token named their temp files ``.snapstore-tmp-<16 hex>``; their journals hold no token,
and recovering one removes names of that older shape.

A restore into a directory it makes leaves one more name there while its journal is
pending: the target marker ``.snapstore-tmp-<token>-target``, an empty file that tells its
recovery the directory is the one that restore made (not another that got the same inode
number). No create records it, no restore or undo backup treats it as the user's, and it is
never removed as a temp file: it goes with the journal.
"""

from __future__ import annotations

import os
import re
from typing import NamedTuple

from snapstore.fs.durable import TEMP_PREFIX

TOKEN_PATTERN = re.compile(r"[0-9a-f]{16}")
_RESTORE_TEMP = re.compile(re.escape(TEMP_PREFIX) + r"([0-9a-f]{16})-[0-9a-f]{16}")
_TOKENLESS_TEMP = re.compile(re.escape(TEMP_PREFIX) + r"[0-9a-f]{16}")
_TARGET_MARKER = re.compile(re.escape(TEMP_PREFIX) + r"[0-9a-f]{16}-target")


def new_token() -> str:
    """A fresh restore token (16 hex digits)."""
    return os.urandom(8).hex()


def is_restore_temp(name: str) -> bool:
    """True if ``name`` has the exact shape of a restore's temp file or target marker (of
    any restore)."""
    return name.startswith(TEMP_PREFIX) and (
        _RESTORE_TEMP.fullmatch(name) is not None or _TARGET_MARKER.fullmatch(name) is not None
    )


def is_target_marker(name: str) -> bool:
    """True if ``name`` has the exact shape of a restore's target marker (of any restore)."""
    return name.startswith(TEMP_PREFIX) and _TARGET_MARKER.fullmatch(name) is not None


class RestoreTemps(NamedTuple):
    """The temp names of one restore: those carrying ``token``; with None (a journal of a
    version before tokens), the names of the older shape."""

    token: str | None

    def new(self) -> str:
        """A fresh temp name of this restore."""
        if self.token is None:
            raise ValueError("a restore without a token makes no temp files")
        return f"{TEMP_PREFIX}{self.token}-{os.urandom(8).hex()}"

    @property
    def marker(self) -> str:
        """The name of this restore's target marker (in a directory it made)."""
        if self.token is None:
            raise ValueError("a restore without a token makes no target marker")
        return f"{TEMP_PREFIX}{self.token}-target"

    def made(self, name: str) -> bool:
        """True if ``name`` is one of this restore's temp names."""
        if self.token is None:
            return _TOKENLESS_TEMP.fullmatch(name) is not None
        found = _RESTORE_TEMP.fullmatch(name)
        return found is not None and found.group(1) == self.token
