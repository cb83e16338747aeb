"""The commits a running gc must still mark: how gc can delete in short steps while creates go
on, without deleting a blob a create committed after gc looked at the manifests.

gc marks from the manifests on disk while creates run beside it, then deletes in steps, each
under the exclusive gc lock. A create that commits meanwhile may name a blob gc found
unreferenced (a blob already stored is reused, not written again). So while a gc runs, every
commit of a manifest first notes the manifest's name here, and each deletion step marks the
manifests noted since the last step before it deletes anything.

Only a store whose cache is shared by every process using it keeps this journal (a local
store: ``Backend.pack_log`` is not None); on the others gc holds the gc lock throughout.

- ``cache/gc-marking`` holds the running gc's token. gc writes it holding the gc lock
  exclusively, so every create either committed before (gc's marking sees its manifest) or
  takes the gc lock shared after, and then finds the token.
- A commit that finds a token writes ``cache/gc-noted-<token>-<random>``, holding the name of
  the manifest it is about to write, before it writes it (a name noted for a commit that
  then fails costs gc a read). An error writing it fails the commit.
- gc holds ``locks/gc-run`` exclusively from before it writes the token until after it
  removes it. A token left by a gc that died is recognised by that lock being free, and
  ignored: the commit notes nothing.
- Entries need no flush: a power cut ends the gc that would read them.
"""

from __future__ import annotations

import contextlib
import os

from snapstore.backend.seam import Backend, Handle, Kind, Lock
from snapstore.errors import LockTimeout

MARKER = Handle(Kind.CACHE, "gc-marking")
NOTED_PREFIX = "gc-noted-"
MAX_NOTE_BYTES = 4096


class GcJournal:
    """The journal of one store (see the module docstring)."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.supported = backend.pack_log() is not None
        self.run_lock: Lock = backend.lock("gc-run")

    def _token(self) -> str | None:
        """The token of a gc marking now, if any (a stale one included)."""
        try:
            data, _ = self.backend.read(MARKER, max_bytes=64)
        except (FileNotFoundError, NotADirectoryError):
            return None
        token = data.decode("ascii", "replace").strip()
        return token if token.isalnum() else None

    def gc_running(self) -> bool:
        """Whether a gc holds ``run_lock`` now."""
        try:
            with self.run_lock.shared(timeout=0):
                return False
        except LockTimeout:
            return True

    def note(self, object_name: str) -> None:
        """Note that the manifest ``object_name`` is about to be committed, if a gc is
        running (called holding the gc lock shared, before the write)."""
        if not self.supported:
            return
        token = self._token()
        if token is None or not self.gc_running():
            return
        entry = Handle(Kind.CACHE, f"{NOTED_PREFIX}{token}-{os.urandom(8).hex()}")
        self.backend.write(entry, object_name.encode(), durable=False)

    def start(self) -> str:
        """Begin noting commits for a gc that holds ``run_lock`` exclusively and the gc lock
        exclusively now. Returns the new token. What an earlier gc left is removed after the
        hold (``clear(keep=token)``): it costs the hold nothing, and no one reads entries of
        another token."""
        token = os.urandom(8).hex()
        self.backend.write(MARKER, token.encode(), durable=False)
        return token

    def entries(self, token: str) -> list[str]:
        """The entries noted under ``token`` (only under the gc lock held exclusively every
        commit so far: outside it, a manifest noted may not be written yet)."""
        return self.backend.names(Kind.CACHE, f"{NOTED_PREFIX}{token}-")

    def read_entry(self, entry: str) -> str:
        """The manifest name an entry holds (an entry is renamed into place whole and never
        changes)."""
        data, _ = self.backend.read(Handle(Kind.CACHE, entry), max_bytes=MAX_NOTE_BYTES)
        return data.decode("utf-8", "surrogateescape")

    def noted(self, token: str, seen: set[str]) -> list[tuple[str, str]]:
        """The entries noted under ``token`` and not in ``seen``, each with the manifest name
        it holds (see ``entries``)."""
        return [
            (entry, self.read_entry(entry)) for entry in self.entries(token) if entry not in seen
        ]

    def remove_entry(self, entry: str) -> None:
        """Remove an entry gc is done with (best-effort: a gc skips the entries it saw)."""
        with contextlib.suppress(OSError):
            self.backend.delete(Handle(Kind.CACHE, entry), durable=False)

    def consume(self, entry: str, seen: set[str]) -> None:
        """Done with an entry (its manifest marked, or its commit failed): it joins ``seen``
        and is removed, so that later looks list only what was noted since."""
        seen.add(entry)
        self.remove_entry(entry)

    def clear(self, *, keep: str | None = None) -> None:
        """Remove the marker (unless its token is ``keep``) and every entry not noted under
        ``keep``: gc's end (nothing kept), or a new gc removing what an earlier one left,
        after its opening hold (no lock needed: only a gc holding ``run_lock`` clears)."""
        if keep is None:
            with contextlib.suppress(FileNotFoundError):
                self.backend.delete(MARKER, durable=False)
        mine = None if keep is None else f"{NOTED_PREFIX}{keep}-"
        for entry in self.backend.names(Kind.CACHE, NOTED_PREFIX):
            if mine is None or not entry.startswith(mine):
                with contextlib.suppress(FileNotFoundError):
                    self.backend.delete(Handle(Kind.CACHE, entry), durable=False)
