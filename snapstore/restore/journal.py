"""The restore journal: what a restore in progress is doing, written before it changes a target.

A restore that is killed part-way leaves its journal behind (the journal object named by
its target's key). Whoever next restores into that target, creates a snapshot of it, or opens the
store finds the journal (its restore's target lock is then free) and finishes or rolls back
the interrupted restore. A journal is written atomically and durably, and removed durably
only once its restore has finished, failed cleanly or been recovered.
"""

from __future__ import annotations

import contextlib
from typing import NamedTuple

from snapstore.backend.seam import Backend, Handle, Kind
from snapstore.format.envelope import seal, unseal
from snapstore.fs.reading import UnfitFileError
from snapstore.fs.tempnames import TOKEN_PATTERN, RestoreTemps

MAGIC = b"SNAPJNL\x01"
MAX_JOURNAL_BYTES = 64 << 20
KEY_HEX = 32


class CorruptJournalError(ValueError):
    """A journal file failed its checksum or does not decode."""


class Journal(NamedTuple):
    """One restore in progress. ``backup`` names the undo backup it kept first (an
    interrupted restore is then rolled back from it); without one (a new target, or
    ``backup=False``) it is finished instead, keeping a backup first if ``backups`` (the
    restore's own ``backup`` argument). ``paths``: the subset restored (None: all). ``dirs``
    are where it may leave temp files, each named with its ``token`` (see
    ``snapstore.fs.tempnames``; None in a journal of a version before tokens).
    ``target_inode``: the inode number of the target a restore into a new directory made
    before writing this journal, in which it put its target marker (``RestoreTemps.marker``):
    a recovery writes only into a directory with that number that holds that marker (None:
    the target was there before, or a journal of a version before it). The device number is
    not kept: a remount may change it."""

    target: str
    session: str
    restoring: str
    backup: str | None
    backups: bool
    paths: tuple[str, ...] | None
    dirs: tuple[str, ...]
    keep_special_bits: bool
    started_ns: int
    token: str | None = None
    target_inode: int | None = None

    @property
    def temps(self) -> RestoreTemps:
        """The temp names this restore (and its rollback or finishing) writes and removes."""
        return RestoreTemps(self.token)

    def encode(self) -> bytes:
        """The journal object's bytes (the store's self-checking envelope)."""
        return seal(
            MAGIC,
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
                "token": self.token,
                "target_inode": self.target_inode,
            },
        )

    @classmethod
    def decode(cls, data: bytes) -> Journal:
        """Decode a journal object; CorruptJournalError if it is damaged."""
        fields = unseal(MAGIC, data)
        if not isinstance(fields, dict):
            raise CorruptJournalError("it is not an intact journal")
        try:
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
                token=fields.get("token"),
                target_inode=_inode(fields.get("target_inode")),
            )
        except Exception as error:
            raise CorruptJournalError(f"does not decode: {error}") from None
        text_fields = (journal.target, journal.session, journal.restoring)
        texts = (*text_fields, *journal.dirs, *(journal.paths or ()))
        if not all(isinstance(value, str) for value in texts):
            raise CorruptJournalError("a field that must be text is not")
        if not journal.target.startswith("/") or not isinstance(journal.backup, str | None):
            raise CorruptJournalError("bad target or backup")
        if journal.token is not None and not (
            isinstance(journal.token, str) and TOKEN_PATTERN.fullmatch(journal.token)
        ):
            raise CorruptJournalError("bad token")
        if journal.target_inode is not None and journal.token is None:
            raise CorruptJournalError("a target inode without the token naming its marker")
        return journal


def _inode(field: object) -> int | None:
    """A journal's ``target_inode`` field (None if absent); ValueError if it is anything but
    a non-negative integer."""
    if field is None:
        return None
    if type(field) is int and field >= 0:
        return field
    raise ValueError(f"bad target inode {field!r}")


class JournalDir:
    """The journals of one store."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    def exists(self, key: str) -> bool:
        """True if a journal of ``key`` is there now."""
        try:
            self.backend.stat(Handle(Kind.JOURNAL, key))
        except FileNotFoundError:
            return False
        except OSError:
            return True
        return True

    def pending(self) -> list[str]:
        """The keys of the journals there now."""
        return [name for name in self.backend.names(Kind.JOURNAL) if len(name) == KEY_HEX]

    def read(self, key: str) -> Journal | None:
        """The journal of ``key``, or None. CorruptJournalError if it is damaged (it fails
        its checksum or does not decode, or is no regular file of a journal's size); any
        other OSError (EIO, EMFILE...) is raised as it is: the journal may be intact."""
        try:
            data, _ = self.backend.read(Handle(Kind.JOURNAL, key), max_bytes=MAX_JOURNAL_BYTES)
        except FileNotFoundError:
            return None
        except UnfitFileError as error:
            raise CorruptJournalError(str(error)) from None
        return Journal.decode(data)

    def backups_in_use(self, session: str) -> set[str] | None:
        """The undo backups of ``session`` that journals there now name: the backup a
        rollback puts back, and the one an interrupted undo was restoring (finishing it reads
        it). None if some journal cannot be read (it may name any)."""
        names = set()
        for key in self.pending():
            try:
                journal = self.read(key)
            except (OSError, CorruptJournalError):
                return None
            if journal is not None and journal.session == session:
                names.add(journal.restoring)
                if journal.backup:
                    names.add(journal.backup)
        return names

    def write(self, key: str, journal: Journal) -> None:
        """Durably record ``journal`` (replacing any journal of the same target)."""
        self.backend.write(Handle(Kind.JOURNAL, key), journal.encode())

    def remove(self, key: str) -> None:
        """Durably remove the journal of ``key`` (the end of its restore)."""
        with contextlib.suppress(FileNotFoundError):
            self.backend.delete(Handle(Kind.JOURNAL, key))
