"""The manifests committed while a gc runs, marked before each deletion step (see
``repo.gcjournal``), with as little as possible done under the exclusive gc lock.

A step may delete only once every manifest noted so far is marked in the version on disk
under the lock (no commit is half-way then). Reading and marking a manifest takes a tree walk
and a commit notes its manifest *before* writing it, so outside the lock a noted name may
still hold the snapshot's previous manifest, or none yet. So:

- **Ahead of the lock** (``mark_ahead``) every entry noted since the last look is read once
  (an entry is written whole by a rename and never changes), and its manifest is marked as it
  is now, remembering the BLAKE3 hash of the bytes marked.
- **Under the lock** (``settle``) each entry still open costs a read of its manifest (a few
  hundred bytes; no tree is read): bytes whose hash was marked under that name need nothing
  more; a missing manifest belongs to a commit that failed (or was deleted since: nothing of
  it needs keeping); other bytes are decoded and marked now. Not the file's version from a
  ``stat``: a manifest written twice over may get back an inode number freed meanwhile, with
  the same size and time on a filesystem whose clock is coarse. The clock is read before
  each entry: a hold that runs out of time deletes nothing and the next one goes on from
  there with twice the time, and so on, so that gc finishes while commits keep coming
  (entries done with stay done: their manifests are marked).
- **Missing manifests**: a noted manifest found missing (ahead of the lock or under it) may
  have been deleted without a flush yet (a sweep flushes once per hold, and may be killed
  within one): its session's directory is flushed before the step deletes anything
  (``flush_missing``: ahead of the lock for those found there; under it, rarely, for those
  first found there), so it cannot come back after a power cut naming a blob gc deleted.
- **After the lock** (``release``) the entries done with are unlinked: the unlinks cost the
  hold nothing (a gc that sees them again skips them: they are in ``seen``).

So a hold costs a small read per commit made since the last step, and decodes and marks only
the manifests written between the look ahead of the lock and the lock itself.
"""

from __future__ import annotations

from collections.abc import Callable

import blake3

from snapstore.backend.seam import Handle, Kind
from snapstore.errors import CorruptManifestError
from snapstore.format.manifest import MAX_MANIFEST_BYTES, decode
from snapstore.fs.reading import UnfitFileError
from snapstore.maintenance.checks import mark_manifest
from snapstore.repo.repository import Repository
from snapstore.repo.trees import Marks

_GONE = (FileNotFoundError, NotADirectoryError)


class NewCommits:
    """The manifests committed since gc marked, as the steps find them (module docstring)."""

    def __init__(self, repo: Repository, token: str | None) -> None:
        self.repo = repo
        self.token = token
        self.seen: set[str] = set()
        """Entries done with (their manifests marked in the version under the lock)."""
        self.open: dict[str, str] = {}
        """Entries read and not done with, each with the manifest name it holds."""
        self.looked: set[str] = set()
        """Open entries whose manifest was marked ahead of the lock."""
        self.marked: dict[str, bytes] = {}
        """The fingerprint of the bytes each manifest name was last marked in."""
        self.spent: list[str] = []
        """Entries done with, to unlink once the lock is let go."""
        self.settled_entries = 0
        """How many entries the last ``settle`` checked."""
        self.missing: set[str] = set()
        """Noted manifests found missing since the last ``flush_missing``: their deletion
        (a sweep in the middle of a hold, a deleter killed before its flush) must be durable
        before a blob they named goes."""

    def _learn(self, clock: Callable[[], float], deadline: float) -> bool:
        """Read the entries noted since the last look (until ``deadline``); True if every
        entry listed was read."""
        journal = self.repo.sessions.gc_journal
        assert self.token is not None
        for entry in journal.entries(self.token):
            if entry in self.seen or entry in self.open:
                continue
            if clock() > deadline:
                return False
            try:
                self.open[entry] = journal.read_entry(entry)
            except _GONE:
                continue  # removed by a gc that clears: nothing to mark
        return True

    def _read(self, name: str) -> bytes:
        """The bytes of the manifest called ``name`` (FileNotFoundError if there is none)."""
        handle = Handle(Kind.MANIFEST, name)
        try:
            data, _ = self.repo.backend.read(handle, max_bytes=MAX_MANIFEST_BYTES)
        except UnfitFileError as error:
            raise CorruptManifestError(f"corrupt manifest {self._where(name)}: {error}") from None
        return data

    def _where(self, name: str) -> str:
        return self.repo.backend.describe(Handle(Kind.MANIFEST, name))

    def _mark(self, name: str, marks: Marks, data: bytes | None = None) -> str | None:
        """Mark the manifest ``name`` as it is now (``data``: its bytes, just read), noting
        what was marked; why that failed, if it did."""
        try:
            if data is None:
                data = self._read(name)
            manifest = decode(data)
        except _GONE:
            self.missing.add(name)
            return None
        except CorruptManifestError as error:
            return f"a snapshot committed during gc cannot be read: {error}"
        problem = mark_manifest(self.repo, manifest, marks)
        if problem is None:
            self.marked[name] = _fingerprint(data)
        return problem

    def mark_ahead(self, marks: Marks, clock: Callable[[], float]) -> str | None:
        """Outside the lock: read the new entries and mark their manifests as they are now;
        why that failed, if it did (references unknown: nothing more may be deleted)."""
        if self.token is None:
            return None
        self._learn(clock, float("inf"))
        unmarked = [(entry, name) for entry, name in self.open.items() if entry not in self.looked]
        if unmarked:
            self.repo.blobs.refresh()  # follows the pack log: the new packs
        for entry, name in unmarked:
            problem = self._mark(name, marks)
            if problem is not None:
                return problem
            self.looked.add(entry)
        return None

    def settle(
        self, marks: Marks, clock: Callable[[], float], deadline: float
    ) -> tuple[bool, str | None]:
        """Under the gc lock held exclusively: finish with the open entries until
        ``deadline`` (module docstring); (whether every noted manifest is marked now, why
        marking failed if it did)."""
        self.settled_entries = 0
        if self.token is None:
            return True, None
        if not self._learn(clock, deadline):
            return False, None
        for entry, name in list(self.open.items()):
            if clock() > deadline:
                return False, None
            self.settled_entries += 1
            problem = self._settle_one(entry, name, marks)
            if problem is not None:
                return False, problem
        return True, None

    def _settle_one(self, entry: str, name: str, marks: Marks) -> str | None:
        try:
            data: bytes | None = self._read(name)
        except _GONE:
            data = None  # the commit failed, or the snapshot went since
            self.missing.add(name)
        except CorruptManifestError as error:
            return f"a snapshot committed during gc cannot be read: {error}"
        if data is not None and _fingerprint(data) != self.marked.get(name):
            problem = self._mark(name, marks, data)
            if problem is not None:
                return problem
        del self.open[entry]
        self.looked.discard(entry)
        self.seen.add(entry)
        self.spent.append(entry)
        return None

    def flush_missing(self) -> None:
        """Make durable the deletion of every noted manifest found missing (its session's
        directory flushed), before anything it named is deleted."""
        if self.missing:
            self.repo.backend.flush_deletions(Kind.MANIFEST, sorted(self.missing))
            self.missing.clear()

    def release(self) -> None:
        """Unlink the entries done with (the lock let go: see the module docstring)."""
        journal = self.repo.sessions.gc_journal
        spent, self.spent = self.spent, []
        for entry in spent:
            journal.remove_entry(entry)


def _fingerprint(data: bytes) -> bytes:
    """What tells two versions of a manifest apart: the BLAKE3 hash of its bytes."""
    return blake3.blake3(data).digest()
