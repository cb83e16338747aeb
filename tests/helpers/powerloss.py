"""Build the disks a power cut could leave, from a recorded log of filesystem operations.

The model (conservative, after ALICE and CrashMonkey):

* Before recording starts, everything on disk is durable.
* A file's contents and mode become durable only at an ``fsync`` of that file. Until then a
  power cut may leave the last durable contents (empty, for a file never synced), the latest
  contents, or a torn mix of them (the latest contents cut in half). Bytes made durable stay
  so when a file is appended to: a torn append keeps them, and may end in half the appended
  bytes, in zeros as long as the appended bytes (its size durable before its data), or in
  the appended bytes with their first half zeros (pages written back out of order).
* A directory entry change (create, mkdir, symlink, rename, link, unlink, rmdir) becomes
  durable only when the directory holding the new entry (the destination's, for a rename) is
  fsynced afterwards. fsync of a file does not make its name durable. Until then the change
  may or may not survive.
* Entries whose parent directory did not survive are unreachable and are dropped.

For a prefix of the log the replay builds several disks: all unsynced changes lost; every
entry change kept but unsynced contents lost (the state a rename-before-fsync bug shows);
everything kept (what ``kill -9`` leaves); each unsynced entry change dropped on its own; and
random mixes where the entry changes survive up to a random point of the journal (or a random
subset of them survives) and each unsynced file independently keeps old, new or torn
contents. Directory modes are not modelled (they are metadata the checks do not compare).

A power cut keeps every surviving directory's inode number; a disk written out as a real
tree (``materialize``) gives each one a new number. What the store records by identity (the
directory a restore into a new target made, in its journal) is carried over to the
materialized directory that stands for it (``carry_identities``).
"""

from __future__ import annotations

import hashlib
import os
import random
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from snapstore.restore.journal import Journal

NAMESPACE_EVENTS = frozenset({"create", "mkdir", "symlink", "rename", "link", "unlink", "rmdir"})


@dataclass(frozen=True)
class Inode:
    """One file, directory or symlink of the model."""

    kind: str
    data: bytes = b""
    mode: int = 0o644
    target: str = ""


@dataclass
class BaseImage:
    """The durable disk before recording: relative path -> inode key, and the inodes."""

    names: dict[str, Any]
    inodes: dict[Any, Inode]


def capture(base: Path) -> BaseImage:
    """Read every path under ``base`` into a durable base image (keys are real inode numbers)."""
    names: dict[str, Any] = {}
    inodes: dict[Any, Inode] = {}
    for directory, dirs, files in os.walk(base):
        for name in dirs + files:
            path = os.path.join(directory, name)
            relative = os.path.relpath(path, base)
            info = os.lstat(path)
            names[relative] = info.st_ino
            mode = stat.S_IMODE(info.st_mode)
            if stat.S_ISLNK(info.st_mode):
                inodes[info.st_ino] = Inode("symlink", target=os.readlink(path))
            elif stat.S_ISDIR(info.st_mode):
                inodes[info.st_ino] = Inode("dir", mode=mode)
            else:
                inodes[info.st_ino] = Inode("file", Path(path).read_bytes(), mode)
    return BaseImage(names, inodes)


@dataclass(frozen=True)
class CrashState:
    """One disk a power cut could leave: relative path -> inode, and how it was chosen."""

    prefix: int
    policy: str
    files: dict[str, Inode]
    keys: dict[str, Any] = field(default_factory=dict)
    """The inode key of each path (what the recording named it)."""

    def fingerprint(self) -> str:
        """A digest of the disk's contents, to skip states already checked."""
        digest = hashlib.blake2b()
        for path in sorted(self.files):
            node = self.files[path]
            digest.update(repr((path, node.kind, node.mode, node.target)).encode())
            digest.update(node.data)
        return digest.hexdigest()


class PowerLossModel:
    """The replay of one recorded log against its base image."""

    def __init__(
        self,
        base_dir: Path,
        image: BaseImage,
        events: list[tuple[Any, ...]],
        inode_keys: dict[int, Any] | None = None,
    ) -> None:
        self.base_dir = str(base_dir)
        self.image = image
        self.inode_keys = inode_keys or {}
        """The recording's keys of inodes it saw made, by their inode number then."""
        self.events = [self._relative(event) for event in events]
        self.synced_at = self._sync_points()

    def _rel(self, path: str) -> str:
        relative = os.path.relpath(path, self.base_dir)
        if relative.startswith(".."):
            raise AssertionError(f"recorded operation outside the scenario: {path}")
        return relative

    def _relative(self, event: tuple[Any, ...]) -> tuple[Any, ...]:
        kind = event[0]
        if kind in ("create", "mkdir", "unlink", "rmdir", "fsync_dir"):
            return (kind, self._rel(event[1]), *event[2:])
        if kind == "symlink":
            return (kind, self._rel(event[1]), event[2], event[3])
        if kind in ("rename", "link"):
            return (kind, self._rel(event[1]), self._rel(event[2]), event[3])
        return event

    def _sync_points(self) -> list[int | None]:
        """For each entry change, the index of the first later fsync of its directory."""
        points: list[int | None] = []
        for index, event in enumerate(self.events):
            if event[0] not in NAMESPACE_EVENTS:
                points.append(None)
                continue
            path = event[2] if event[0] in ("rename", "link") else event[1]
            parent = os.path.dirname(path) or "."
            found = None
            for later in range(index + 1, len(self.events)):
                other = self.events[later]
                if other[0] == "fsync_dir" and os.path.normpath(other[1]) == parent:
                    found = later
                    break
            points.append(found)
        return points

    def _names(self, prefix: int, keep: Any) -> dict[str, Any]:
        names = dict(self.image.names)
        for index in range(prefix):
            event = self.events[index]
            kind = event[0]
            if kind not in NAMESPACE_EVENTS:
                continue
            synced = self.synced_at[index] is not None and self.synced_at[index] < prefix
            if not (synced or keep(index)):
                continue
            if kind in ("create", "mkdir"):
                names[event[1]] = event[2]
            elif kind == "symlink":
                names[event[1]] = event[3]
            elif kind == "rename":
                names.pop(event[1], None)
                names[event[2]] = event[3]
            elif kind == "link":
                names[event[2]] = event[3]
            elif kind == "unlink":
                names.pop(event[1], None)
            elif kind == "rmdir":
                gone = event[1]
                for path in [p for p in names if p == gone or p.startswith(gone + os.sep)]:
                    del names[path]
        return names

    def _inodes(self, prefix: int) -> tuple[dict[Any, Inode], dict[Any, Inode]]:
        """Latest and durable versions of every inode after ``prefix`` events."""
        latest = dict(self.image.inodes)
        durable = dict(self.image.inodes)
        for index in range(prefix):
            event = self.events[index]
            kind = event[0]
            if kind in ("create",):
                latest[event[2]] = Inode("file", b"", 0o600)
            elif kind == "mkdir":
                latest[event[2]] = Inode("dir", mode=0o755)
                durable[event[2]] = latest[event[2]]
            elif kind == "symlink":
                latest[event[3]] = Inode("symlink", target=event[2])
                durable[event[3]] = latest[event[3]]
            elif kind == "data":
                latest[event[1]] = Inode("file", event[2], event[3])
            elif kind == "fsync":
                latest[event[1]] = Inode("file", event[2], event[3])
                durable[event[1]] = latest[event[1]]
        return latest, durable

    def state(self, prefix: int, policy: str, rng: random.Random | None = None) -> CrashState:
        """The disk after the first ``prefix`` events under one policy: ``lost`` (unsynced
        changes lost), ``entries`` (entry changes kept, unsynced contents lost), ``kept``
        (everything kept) or ``random`` (needs ``rng``)."""
        if policy == "random":
            assert rng is not None
            if rng.random() < 0.5:
                cut = rng.randrange(prefix + 1)
                names = self._names(prefix, lambda index: index < cut)
            else:
                kept = {index for index in range(prefix) if rng.random() < 0.5}
                names = self._names(prefix, kept.__contains__)
        elif policy.startswith("omit:"):
            omitted = int(policy[5:])
            names = self._names(prefix, lambda index: index != omitted)
        elif policy == "lost":
            names = self._names(prefix, lambda index: False)
        else:
            names = self._names(prefix, lambda index: True)
        latest, durable = self._inodes(prefix)
        files: dict[str, Inode] = {}
        for path in sorted(names, key=lambda p: p.count(os.sep)):
            parent = os.path.dirname(path)
            if parent and (parent not in files or files[parent].kind != "dir"):
                continue
            key = names[path]
            files[path] = self._contents(key, latest, durable, policy, rng)
        return CrashState(prefix, policy, files, {path: names[path] for path in files})

    def _contents(
        self,
        key: Any,
        latest: dict[Any, Inode],
        durable: dict[Any, Inode],
        policy: str,
        rng: random.Random | None,
    ) -> Inode:
        now = latest[key]
        if now.kind != "file":
            return now
        synced = durable.get(key, Inode("file", b"", now.mode))
        if policy in ("kept",) or policy.startswith("omit:") or synced == now:
            return now
        if policy in ("lost", "entries"):
            return synced
        assert rng is not None
        mode = rng.choice((synced.mode, now.mode))
        if synced.data == now.data:
            return Inode("file", now.data, mode)
        return Inode("file", rng.choice(_unsynced_contents(synced.data, now.data)), mode)

    def unsynced(self, prefix: int) -> list[int]:
        """The entry changes among the first ``prefix`` events not yet made durable."""
        found = []
        for index in range(prefix):
            synced = self.synced_at[index]
            if self.events[index][0] in NAMESPACE_EVENTS and (synced is None or synced >= prefix):
                found.append(index)
        return found

    def states(
        self, *, random_per_prefix: int, omit_each: bool = False, seed: int = 0
    ) -> Iterator[CrashState]:
        """Every distinct crash state over all prefixes of the log (the states after the last
        event are kept apart: there the operation has returned and must be durable).

        Besides the fixed policies and ``random_per_prefix`` random mixes, each unsynced entry
        change is dropped on its own (``omit:<index>``, all else kept): after the last event
        always, at every prefix with ``omit_each``."""
        rng = random.Random(seed)
        seen: set[tuple[str, bool]] = set()
        for prefix in range(len(self.events) + 1):
            candidates = [self.state(prefix, p) for p in ("lost", "entries", "kept")]
            candidates += [self.state(prefix, "random", rng) for _ in range(random_per_prefix)]
            if omit_each or prefix == len(self.events):
                candidates += [self.state(prefix, f"omit:{i}") for i in self.unsynced(prefix)]
            for candidate in candidates:
                fingerprint = (candidate.fingerprint(), prefix == len(self.events))
                if fingerprint not in seen:
                    seen.add(fingerprint)
                    yield candidate


def _unsynced_contents(synced: bytes, now: bytes) -> tuple[bytes, ...]:
    """What a power cut may leave of a file whose durable contents are ``synced`` and latest
    ``now``: either of them, or the latest cut in half. A file appended to after a flush
    (``now`` extends ``synced``) keeps its flushed bytes: only the appended ones may be
    lost, cut in half, or left as zeros (its size made durable before its data), or its
    later half kept and its earlier half zeros (pages written back out of order)."""
    if not now.startswith(synced) or not synced:
        return synced, now, now[: len(now) // 2]
    appended = len(now) - len(synced)
    half = len(synced) + appended // 2
    earlier_lost = synced + bytes(appended // 2) + now[half:]
    return synced, now, now[:half], synced + bytes(appended), earlier_lost


def materialize(state: CrashState, destination: Path) -> None:
    """Write a crash state out as a real directory tree."""
    destination.mkdir(parents=True)
    modes: list[tuple[Path, int]] = []
    for relative in sorted(state.files, key=lambda p: p.count(os.sep)):
        node = state.files[relative]
        path = destination / relative
        if node.kind == "dir":
            path.mkdir()
            modes.append((path, node.mode))
        elif node.kind == "symlink":
            os.symlink(node.target, path)
        else:
            path.write_bytes(node.data)
            path.chmod(node.mode)
    for path, mode in reversed(modes):
        path.chmod(mode | 0o700)


def carry_identities(model: PowerLossModel, state: CrashState, destination: Path) -> None:
    """Rewrite the restore journals of a materialized ``state`` (at ``destination``) that
    name the directory their restore made by its inode number, with the number that
    directory has on the materialized disk, as a power cut would have kept it; a journal
    whose directory did not survive keeps the number it recorded."""
    for relative in state.files:
        directory, name = os.path.split(relative)
        if os.path.basename(directory) != "journal" or len(name) != 32:
            continue
        path = destination / relative
        try:
            journal = Journal.decode(path.read_bytes())
        except ValueError:
            continue
        if journal.target_inode is None:
            continue
        key = model.inode_keys.get(journal.target_inode, journal.target_inode)
        target = os.path.relpath(journal.target, model.base_dir)
        if state.keys.get(target) != key or state.files[target].kind != "dir":
            continue
        found = os.lstat(destination / target)
        carried = journal._replace(target_inode=found.st_ino)
        path.write_bytes(carried.encode())
