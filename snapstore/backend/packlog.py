"""The pack log of a local store: how a process learns which packs others published since it
last looked, without listing ``packs/``.

``packs/log`` is a text file: a first line holding a random token (its generation), then one
line per pack published, its id, appended (``O_APPEND``, one ``write`` per line) by the writer
once the pack and its index are in place. It is a hint, never flushed: a reader that finds no
log, or a token other than the one it saw, lists ``packs/`` instead and remembers where the
log ends; gc starts a new log (a new token) before it deletes any pack, so a process whose
view of the packs may name a deleted one always lists them again. A line lost in a power cut
only means a pack is found by the next listing (a reader that misses a blob lists the packs
before giving up).
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass

from snapstore.fs.durable import write_atomic
from snapstore.fs.seam import FileSystem

TOKEN_BYTES = 32
_ID = re.compile(rb"([0-9a-f]{32})\n")
MAX_READ_BYTES = 16 << 20
"""A log read in one go at most this far past a reader's last position (more: list instead)."""


@dataclass(frozen=True)
class LogPosition:
    """Where a reader stopped: the log's token and the offset just after its last whole line."""

    token: bytes
    offset: int


class PackLog:
    """The pack log at ``path`` (see the module docstring)."""

    def __init__(self, path: str, fs: FileSystem, tmp_dir: str) -> None:
        self.path = path
        self.fs = fs
        self.tmp_dir = tmp_dir

    def read(self, since: LogPosition | None) -> tuple[list[str] | None, LogPosition | None]:
        """The ids of the packs published since ``since`` (None: they cannot be told, list
        the packs), and the position to read from next (None: there is no log to follow)."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None, None
        try:
            token = os.pread(fd, TOKEN_BYTES + 1, 0)
            if len(token) != TOKEN_BYTES + 1 or token[-1:] != b"\n":
                return None, None
            token = token[:TOKEN_BYTES]
            size = os.fstat(fd).st_size
            start = TOKEN_BYTES + 1
            if since is None or since.token != token or since.offset > size:
                return None, LogPosition(token, size)
            if size - since.offset > MAX_READ_BYTES:
                return None, LogPosition(token, size)
            data = os.pread(fd, size - since.offset, since.offset) if size > since.offset else b""
        finally:
            os.close(fd)
        end = data.rfind(b"\n") + 1
        ids = [match.decode() for match in _ID.findall(data, 0, end)]
        return ids, LogPosition(token, max(start, since.offset + end))

    def add(self, pack_id: str) -> None:
        """Note that pack ``pack_id`` was published (errors are ignored: only a hint)."""
        with contextlib.suppress(OSError):
            fd = self.fs.open(self.path, os.O_WRONLY | os.O_APPEND)
            try:
                self.fs.write(fd, pack_id.encode() + b"\n")
            finally:
                self.fs.close(fd)

    def restart(self) -> None:
        """Start a new log (gc, before it deletes a pack): every reader lists the packs again.
        Raises if it cannot, since a reader could then keep counting on a deleted pack."""
        token = os.urandom(TOKEN_BYTES // 2).hex().encode() + b"\n"
        write_atomic(self.fs, self.path, token, tmp_dir=self.tmp_dir, durable=False)
