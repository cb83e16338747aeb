"""Session heads: a session's highest sequence number and newest snapshot names, kept so that
a commit's number and ``latest`` need not list the session.

A head is a hint, never the authority: a cache object (``heads/<session-dir>``) written without
a flush by whoever changes the session, under the session's lock. It is believed only if

- it decodes (its envelope's checksum holds);
- it was written since this machine last started (a power cut may leave any older version
  of it; no process that could have written it since is alive);
- the backend's listing stamp of the session (a local store: its directory's identity and
  times) is the one the writer saw after its change (nothing was changed behind its back);
- it is still the same object after the stamp was read (no writer replaced it meanwhile).

Every change under the session's lock first removes the head, then changes the session, then
writes the new head: a writer killed in between leaves no head, and the next one lists the
session once to build it again. A backend that has no cheap stamp (object storage) keeps no
heads: there a commit lists the session.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Hashable, Iterable
from typing import Any, NamedTuple

from snapstore.backend.seam import Backend, Handle, Kind
from snapstore.format.envelope import seal, unseal
from snapstore.format.header import Header

MAGIC = b"SNAPHED\x01"
KEEP = 32
"""How many of the newest checkpoints (and undo backups) a head names: ``latest~N`` for N
below it, and trimming an undo history up to that depth, need no listing."""
MAX_HEAD_BYTES = 1 << 20

_BOOT: list[str] = []


def boot_id() -> str:
    """What names this machine's current boot: the kernel's boot id where there is one, else
    the boot time to the minute (a reboot changes either)."""
    if not _BOOT:
        try:
            with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as file:
                _BOOT.append(file.read().strip())
        except OSError:
            _BOOT.append(str(round((time.time() - time.monotonic()) / 60)))
    return _BOOT[0]


class Head(NamedTuple):
    """What a session holds, as far as commits and selectors need it: its highest sequence
    number, and the names of its newest checkpoints and undo backups, oldest first (all of
    them when ``*_all``)."""

    seq: int = 0
    checkpoints: tuple[str, ...] = ()
    checkpoints_all: bool = True
    backups: tuple[str, ...] = ()
    backups_all: bool = True

    @classmethod
    def of(cls, headers: Iterable[Header]) -> Head:
        """The head of a session whose valid manifests have ``headers``."""
        ordered = sorted(headers, key=lambda header: header.session_order)
        checkpoints = [
            h.info.name for h in ordered if h.info.kind == "files" and not h.info.is_backup
        ]
        backups = [h.info.name for h in ordered if h.info.is_backup]
        return cls(
            max((h.seq for h in ordered), default=0),
            tuple(checkpoints[-KEEP:]),
            len(checkpoints) <= KEEP,
            tuple(backups[-KEEP:]),
            len(backups) <= KEEP,
        )

    def removed(self, names: Iterable[str]) -> Head:
        """This head once the snapshots ``names`` are gone."""
        gone = set(names)
        return self._replace(
            checkpoints=tuple(n for n in self.checkpoints if n not in gone),
            backups=tuple(n for n in self.backups if n not in gone),
        )

    def committed(self, seq: int, name: str, *, checkpoint: bool, backup: bool) -> Head:
        """This head once snapshot ``name`` (a checkpoint, an undo backup, or neither: a state
        value) was committed as number ``seq`` (replacing any snapshot of that name)."""
        head = self.removed([name]) if name in self.checkpoints or name in self.backups else self
        checkpoints, backups = head.checkpoints, head.backups
        checkpoints_all, backups_all = head.checkpoints_all, head.backups_all
        if checkpoint:
            checkpoints = (*checkpoints, name)
            checkpoints_all = checkpoints_all and len(checkpoints) <= KEEP
            checkpoints = checkpoints[-KEEP:]
        if backup:
            backups = (*backups, name)
            backups_all = backups_all and len(backups) <= KEEP
            backups = backups[-KEEP:]
        return Head(max(self.seq, seq), checkpoints, checkpoints_all, backups, backups_all)

    def checkpoint_back(self, back: int) -> str | None:
        """The name of the ``back``-th checkpoint before the newest (0: the newest), or None if
        this head cannot tell (it names too few); raises IndexError if there is none."""
        if back < len(self.checkpoints):
            return self.checkpoints[-1 - back]
        if self.checkpoints_all:
            raise IndexError(back)
        return None

    def _stored(self) -> list[Any]:
        return [
            self.seq,
            list(self.checkpoints),
            self.checkpoints_all,
            list(self.backups),
            self.backups_all,
        ]

    @classmethod
    def _from_stored(cls, fields: Any) -> Head | None:
        try:
            seq, checkpoints, checkpoints_all, backups, backups_all = fields
        except (TypeError, ValueError):
            return None
        names_ok = (
            type(checkpoints) is list
            and type(backups) is list
            and set(map(type, checkpoints + backups)) <= {str}
        )
        if type(seq) is not int or seq < 0 or not names_ok:
            return None
        return cls(
            seq, tuple(checkpoints), checkpoints_all is True, tuple(backups), backups_all is True
        )


def _stamp_fields(stamp: Hashable) -> Any:
    return list(stamp) if isinstance(stamp, tuple) else stamp


class HeadStore:
    """The heads of the sessions of one store (see the module docstring)."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    @staticmethod
    def _handle(session_dir: str) -> Handle:
        return Handle(Kind.CACHE, f"heads/{session_dir}")

    def _stamp(self, session_dir: str) -> Hashable | None:
        return self.backend.listing_stamp(Kind.MANIFEST, session_dir + "/")

    def read(self, session_dir: str) -> Head | None:
        """The session's head, if there is one to believe (see the module docstring)."""
        handle = self._handle(session_dir)
        try:
            data, info = self.backend.read(handle, max_bytes=MAX_HEAD_BYTES)
        except (OSError, ValueError):
            return None
        found = unseal(MAGIC, data)
        if not isinstance(found, list) or len(found) != 3 or found[0] != boot_id():
            return None
        stamp = self._stamp(session_dir)
        if stamp is None or _stamp_fields(stamp) != found[1]:
            return None
        try:
            if self.backend.stat(handle).version != info.version:
                return None
        except (OSError, ValueError):
            return None
        return Head._from_stored(found[2])

    def forget(self, session_dir: str) -> None:
        """Remove the session's head before changing the session (see the module docstring).
        An error is raised, so the change does not start: a head left in place could be
        believed after it (a snapshot replaced under an existing name leaves the session's
        stamp as it was). A backend that keeps no heads has none to remove."""
        try:
            self.backend.delete(self._handle(session_dir), durable=False)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return  # no head there, or nothing that could be read as one
        except OSError:
            if self._stamp(session_dir) is None:
                return
            raise

    def write(self, session_dir: str, head: Head) -> None:
        """Record the session's head as it is after a change (made under the session's lock);
        errors are ignored: it is only a hint, and the change it follows is committed (the
        head was removed before it, so none is left to believe)."""
        with contextlib.suppress(OSError):
            stamp = self._stamp(session_dir)
            if stamp is None:
                return
            data = seal(MAGIC, [boot_id(), _stamp_fields(stamp), head._stored()])
            self.backend.write(self._handle(session_dir), data, durable=False)
