"""The restore journal: what a restore in progress is doing, written before it changes a target.

A restore that is killed part-way leaves its journal behind, ``journal/<target key>`` in the
store root. Whoever next restores into that target, creates a snapshot of it, or opens the
store finds the journal (its restore's target lock is then free) and finishes or rolls back
the interrupted restore. A journal is written atomically and durably, and removed durably
only once its restore has finished, failed cleanly or been recovered.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass

import blake3
import msgpack

from snapstore.fs.durable import ensure_dir, write_atomic
from snapstore.fs.reading import read_regular
from snapstore.fs.seam import FileSystem

MAGIC = b"SNAPJNL\x01"
CHECKSUM_BYTES = 16
MAX_JOURNAL_BYTES = 64 << 20
KEY_HEX = 32


class CorruptJournalError(ValueError):
    """A journal file failed its checksum or does not decode."""


@dataclass(frozen=True)
class Journal:
    """One restore in progress. ``backup`` names the undo backup it kept first (an
    interrupted restore is then rolled back from it); without one (a new target, or
    ``backup=False``) it is finished instead, keeping a backup first if ``backups`` (the
    restore's own ``backup`` argument). ``paths``: the subset restored (None: all). ``dirs``
    are where it may leave temp files."""

    target: str
    session: str
    restoring: str
    backup: str | None
    backups: bool
    paths: tuple[str, ...] | None
    dirs: tuple[str, ...]
    keep_special_bits: bool
    started_ns: int

    def encode(self) -> bytes:
        """The journal file's bytes: magic, checksum of the body, msgpack body."""
        body = msgpack.packb(
            {
                "target": self.target,
                "session": self.session,
                "restoring": self.restoring,
                "backup": self.backup,
                "backups": self.backups,
                "paths": None if self.paths is None else list(self.paths),
                "dirs": list(self.dirs),
                "keep_special_bits": self.keep_special_bits,
                "started_ns": self.started_ns,
            },
            use_bin_type=True,
        )
        assert isinstance(body, bytes)
        return MAGIC + blake3.blake3(body).digest(length=CHECKSUM_BYTES) + body

    @classmethod
    def decode(cls, data: bytes) -> Journal:
        """Decode a journal file; CorruptJournalError if it is damaged."""
        head = len(MAGIC) + CHECKSUM_BYTES
        body = data[head:]
        if data[: len(MAGIC)] != MAGIC:
            raise CorruptJournalError("bad magic")
        if blake3.blake3(body).digest(length=CHECKSUM_BYTES) != data[len(MAGIC) : head]:
            raise CorruptJournalError("checksum mismatch")
        try:
            fields = msgpack.unpackb(body, raw=False)
            journal = cls(
                target=fields["target"],
                session=fields["session"],
                restoring=fields["restoring"],
                backup=fields["backup"],
                backups=bool(fields["backups"]),
                paths=None if fields["paths"] is None else tuple(fields["paths"]),
                dirs=tuple(fields["dirs"]),
                keep_special_bits=fields["keep_special_bits"],
                started_ns=fields["started_ns"],
            )
        except Exception as error:
            raise CorruptJournalError(f"does not decode: {error}") from None
        text_fields = (journal.target, journal.session, journal.restoring)
        texts = (*text_fields, *journal.dirs, *(journal.paths or ()))
        if not all(isinstance(value, str) for value in texts):
            raise CorruptJournalError("a field that must be text is not")
        if not journal.target.startswith("/") or not isinstance(journal.backup, str | None):
            raise CorruptJournalError("bad target or backup")
        return journal


class JournalDir:
    """The ``journal/`` directory of a store root."""

    def __init__(self, root: str, tmp_dir: str, fs: FileSystem, *, durable: bool) -> None:
        self.root = root
        self.path = os.path.join(root, "journal")
        self.tmp_dir = tmp_dir
        self.fs = fs
        self.durable = durable

    def exists(self, key: str) -> bool:
        """True if a journal of ``key`` is on disk now."""
        return os.path.lexists(os.path.join(self.path, key))

    def pending(self) -> list[str]:
        """The keys of the journals on disk now."""
        try:
            names = os.listdir(self.path)
        except FileNotFoundError:
            return []
        return sorted(name for name in names if len(name) == KEY_HEX)

    def read(self, key: str) -> Journal | None:
        """The journal of ``key``, or None; CorruptJournalError if damaged."""
        try:
            data, _ = read_regular(os.path.join(self.path, key), max_bytes=MAX_JOURNAL_BYTES)
        except FileNotFoundError:
            return None
        except OSError as error:
            raise CorruptJournalError(str(error)) from None
        return Journal.decode(data)

    def write(self, key: str, journal: Journal) -> None:
        """Durably record ``journal`` (replacing any journal of the same target)."""
        ensure_dir(self.fs, self.path, stop_at=self.root, durable=self.durable)
        write_atomic(
            self.fs,
            os.path.join(self.path, key),
            journal.encode(),
            tmp_dir=self.tmp_dir,
            durable=self.durable,
        )

    def remove(self, key: str) -> None:
        """Durably remove the journal of ``key`` (the end of its restore)."""
        with contextlib.suppress(FileNotFoundError):
            self.fs.unlink(os.path.join(self.path, key))
            if self.durable:
                self.fs.fsync_dir(self.path)
