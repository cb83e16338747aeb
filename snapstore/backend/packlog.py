"""The pack log of a local store: how a process learns which packs others published, and
which gc or a fold deleted, since it last looked, without listing ``packs/``.

``packs/log`` is a text file: a first line holding a random token (its generation), then one
line per change, appended (``O_APPEND``, one ``write`` per change) by the process making it:
``<id>`` once a pack and its index are in place, ``<id> <end hex>`` once a segment of an
appendable pack is appended and flushed (it ends at ``end``), ``-<id>`` when a pack is
deleted: by gc before it unlinks the index (an appendable pack: the pack itself; the gc lock
held exclusively), by a fold just after (the gc lock held shared: a process listing meanwhile
took its position before its listing, so the line lies after it; a fold's appendable packs
under the lock held exclusively; see ``maintenance.fold``). It is a hint, never flushed: a
reader that finds no log, or a token other than the one it saw, lists ``packs/`` instead and
remembers where the log ends. A reader takes a line only if the whole line is one of these
forms. A deleter's lines follow a newline of their own, so a line left torn by a failed
append cannot swallow them; a deleter that cannot append starts a new log (a new token)
instead, so a process that followed the log either reads the deletion or lists the packs
again. A log that grew past ``RESTART_BYTES`` is started again at the next deletion (while a
gc deletes, past its ``limit``: gc starts a new one at its end). A line
lost in a power cut only means a pack is found by the next listing (a reader that misses a
blob lists the packs before giving up); no process that followed the log outlives a power
cut.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from typing import NamedTuple

from snapstore.fs.durable import write_atomic
from snapstore.fs.seam import FileSystem

TOKEN_BYTES = 32
_PUBLISHED = re.compile(rb"([0-9a-f]{32})(?: ([0-9a-f]{1,16}))?")
"""A whole line (without its newline) saying that the pack of that id was published, or a
segment of the appendable pack of that id appended, and where it ends."""
LogEntry = tuple[str, int | None]
"""A publication read from the log: a pack id, and where the segment it announces ends
(None: a whole pack with an index file of its own)."""
MAX_READ_BYTES = 16 << 20
"""A log read in one go at most this far past a reader's last position (more: list instead)."""
_DELETED = re.compile(rb"-([0-9a-f]{32})")
"""A whole line (without its newline) saying that the pack of that id is deleted."""
RESTART_BYTES = 1 << 20
"""A deleter starts a new log instead of appending to one this long (about 30,000 lines): the
log stays small, and every process lists the packs once per that many changes."""


class LogPosition(NamedTuple):
    """Where a reader stopped: the log's token and the offset just after its last whole line."""

    token: bytes
    offset: int


class PackLog:
    """The pack log at ``path`` (see the module docstring)."""

    def __init__(self, path: str, fs: FileSystem, tmp_dir: str) -> None:
        self.path = path
        self.fs = fs
        self.tmp_dir = tmp_dir

    def read(self, since: LogPosition | None) -> tuple[list[LogEntry] | None, LogPosition | None]:
        """The packs and segments published since ``since`` (None: they cannot be told, list
        the packs), and the position to read from next (None: there is no log to follow)."""
        data, position = self.read_lines(since)
        if data is None:
            return None, position
        return published(data), position

    def read_lines(self, since: LogPosition | None) -> tuple[bytes | None, LogPosition | None]:
        """The whole lines appended since ``since`` (None: they cannot be told, list the
        packs), and the position to read from next (None: there is no log to follow)."""
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
        return data[:end], LogPosition(token, max(start, since.offset + end))

    def add(self, pack_id: str) -> None:
        """Note that pack ``pack_id`` was published (errors are ignored: only a hint)."""
        self._append(pack_id.encode() + b"\n")

    def add_segment(self, pack_id: str, end: int) -> None:
        """Note that a segment of the appendable pack ``pack_id`` ending at ``end`` was
        appended, durably (errors are ignored: only a hint)."""
        self._append(f"{pack_id} {end:x}\n".encode())

    def _append(self, line: bytes) -> None:
        with contextlib.suppress(OSError):
            fd = self.fs.open(self.path, os.O_WRONLY | os.O_APPEND)
            try:
                self.fs.write(fd, line)
            finally:
                self.fs.close(fd)

    def restart(self) -> None:
        """Start a new log (a deleter that cannot append, a long log, the end of a gc): every
        reader lists the packs again. Raises if it cannot."""
        token = os.urandom(TOKEN_BYTES // 2).hex().encode() + b"\n"
        write_atomic(self.fs, self.path, token, tmp_dir=self.tmp_dir, durable=False)

    def record_deletions(self, pack_ids: list[str], *, limit: int = RESTART_BYTES) -> bool:
        """Note that these packs are being deleted (gc: before their indexes are unlinked,
        under the gc lock held exclusively; a fold: after, under it held shared).
        True if the lines were appended; False if a new log was started instead (there was
        none, it passed ``RESTART_BYTES``, or the append failed): every reader then lists
        the packs again. Raises if neither can be done (nothing may be deleted then).
        ``limit``: the length past which a new log is started instead (a running gc, which
        starts one at its end, lets the log grow: a new log mid-gc makes every process list
        ``packs/`` while it still holds thousands of packs)."""
        # after a newline: a line another writer left torn (a full disk) cannot swallow them
        lines = b"\n" + b"".join(b"-" + pack_id.encode() + b"\n" for pack_id in pack_ids)
        try:
            fd = self.fs.open(self.path, os.O_WRONLY | os.O_APPEND)
        except OSError:
            self.restart()
            return False
        try:
            if os.fstat(fd).st_size + len(lines) <= limit:
                self.fs.write(fd, lines)
                return True
        except OSError:
            pass  # a line may be torn: the new log below leaves it behind
        finally:
            self.fs.close(fd)
        self.restart()
        return False


def _published(lines: bytes) -> Iterator[re.Match[bytes]]:
    for line in lines.split(b"\n"):
        match = _PUBLISHED.fullmatch(line)
        if match is not None:
            yield match


def published(lines: bytes) -> list[LogEntry]:
    """The packs and segments whose publication ``lines`` (whole lines, from
    ``PackLog.read_lines``) record; a line is one full match of one form, or skipped."""
    return [
        (match.group(1).decode(), int(match.group(2), 16) if match.group(2) else None)
        for match in _published(lines)
    ]


def published_ids(lines: bytes) -> list[str]:
    """The ids of the packs with an index file whose publication ``lines`` (whole lines,
    from ``PackLog.read_lines``) record (``published`` also gives segments)."""
    return [match.group(1).decode() for match in _published(lines) if match.group(2) is None]


def deleted_ids(lines: bytes) -> list[str]:
    """The ids of the packs whose deletion ``lines`` (whole lines) record."""
    found = (_DELETED.fullmatch(line) for line in lines.split(b"\n"))
    return [match.group(1).decode() for match in found if match is not None]
