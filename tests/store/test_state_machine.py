"""Model-based test: random sequences of store operations, checked against a plain dict.

Besides the public operations, rules reopen the store and crash mid-operation (an injected
I/O error, or a forked child killed at its Nth filesystem call) before reopening: after a
crash the touched snapshot must be exactly the model's old or new value, and the model
follows whichever the disk holds. Restores and undos go into one target directory per
session, whose files and undo history the model follows too; a restore or undo killed part-way
must leave, once the store is reopened, the target and its undo history as before or as after.
"""

from __future__ import annotations

import errno
import tempfile
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
from helpers.figures import depth, record
from helpers.fork import in_a_child
from helpers.scratch import scratch_base
from helpers.seam import FailingFileSystem, FastFileSystem, KillingFileSystem
from helpers.trees import read_tree, remove_tree, write_tree
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from snapstore import SnapStore
from snapstore.errors import SnapshotNotFound, SnapstoreError
from snapstore.fs.seam import FileSystem
from snapstore.fs.tempnames import is_target_marker
from snapstore.internals import journals

SESSIONS_LIST = ["alpha", "beta", "a/b", "A", "ünï"]
SESSIONS = st.sampled_from(SESSIONS_LIST)
NAMES = st.sampled_from(["n1", "n2", "N1", "x y"])
PATHS = ("a.txt", "b/c.txt", "b/d.bin", "e/f/g")
FILES = st.dictionaries(st.sampled_from(PATHS), st.binary(max_size=48), min_size=1)
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=6,
)
HOUR = 3600.0
UNDO_DEPTH = 4
RUN_COUNTS: Counter[str] = Counter()


@dataclass
class Entry:
    """The model of one snapshot: files (None: contents not modelled) or a state value."""

    kind: str
    seq: int
    files: dict[str, bytes] | None = None
    value: Any = None
    expires: bool = False


class StoreMachine(RuleBasedStateMachine):
    """The store under test and its model."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="snapstore-sm-", dir=scratch_base()))
        self.root = self.dir / "root"
        self.store = self._open()
        self.model: dict[tuple[str, str], Entry] = {}
        self.targets: dict[str, dict[str, bytes] | None] = {}
        self.undo: dict[str, list[dict[str, bytes]]] = {}
        self.untrimmed: set[str] = set()
        """Sessions whose killed restore went through but may not have trimmed its history."""
        self.seq = 0
        RUN_COUNTS["examples"] += 1

    def teardown(self) -> None:
        remove_tree(self.dir)

    def _open(self, fs: FileSystem | None = None) -> SnapStore:
        return SnapStore(
            self.root, fs=fs or FastFileSystem(), lock_timeout=10, undo_depth=UNDO_DEPTH
        )

    def _target(self, session: str) -> Path:
        return self.dir / f"target-{sorted(set(SESSIONS_LIST)).index(session)}"

    def _target_files(self, session: str) -> dict[str, bytes] | None:
        """The files of the session's target (None if there is none), but for a target marker
        a restore killed before its journal left (documented litter that no create records
        and no restore touches)."""
        target = self._target(session)
        if not target.is_dir():
            return None
        return {
            p: node[1]
            for p, node in read_tree(target).items()
            if node[0] == "file" and not is_target_marker(Path(p).name)
        }

    def _restored(self, session: str, before: dict[str, bytes] | None, backup: bool) -> None:
        """The model after a restore or undo of ``session`` went through: the target holds
        what it holds now, and what it replaced is the newest undo backup."""
        after = self._target_files(session)
        if backup and before is not None and before != after:
            stack = self.undo.setdefault(session, [])
            stack.append(before)
            del stack[:-UNDO_DEPTH]
            self.untrimmed.discard(session)
        self.targets[session] = after

    def _next(self) -> int:
        self.seq += 1
        return self.seq

    def _source(self, files: dict[str, bytes]) -> Path:
        source = self.dir / "src"
        remove_tree(source)
        write_tree(source, files)
        return source

    def _actual(self, key: tuple[str, str]) -> Entry | None:
        """What the disk holds for ``key``, as a model entry (seq unknown: 0)."""
        try:
            snapshot = self.store.get(*key)
        except SnapshotNotFound:
            return None
        expires = snapshot.info.expires_at is not None
        if snapshot.info.kind == "state":
            return Entry("state", 0, value=self.store.get_state(*key), expires=expires)
        files = {
            e.path: self.store.read(key[0], key[1], e.path)
            for e in snapshot.entries
            if e.kind == "file"
        }
        return Entry("files", 0, files=files, expires=expires)

    @staticmethod
    def _same(actual: Entry | None, expected: Entry | None) -> bool:
        if actual is None or expected is None:
            return actual is expected
        if (actual.kind, actual.expires) != (expected.kind, expected.expires):
            return False
        if actual.kind == "state":
            return bool(actual.value == expected.value)
        return expected.files is None or actual.files == expected.files

    @rule(session=SESSIONS, name=NAMES, files=FILES, ttl=st.booleans())
    def create(self, session: str, name: str, files: dict[str, bytes], ttl: bool) -> None:
        self.store.create(
            session, name, ["."], base_dir=self._source(files), ttl=HOUR if ttl else None
        )
        self.model[(session, name)] = Entry("files", self._next(), files=files, expires=ttl)

    @rule(session=SESSIONS, name=NAMES, value=VALUES, ttl=st.booleans())
    def put_state(self, session: str, name: str, value: Any, ttl: bool) -> None:
        self.store.put_state(session, name, value, ttl=HOUR if ttl else None)
        self.model[(session, name)] = Entry("state", self._next(), value=value, expires=ttl)

    @rule(session=SESSIONS, name=NAMES)
    def get(self, session: str, name: str) -> None:
        key = (session, name)
        assert self._same(self._actual(key), self.model.get(key)), f"{key} differs from model"

    @rule(session=SESSIONS, name=NAMES)
    def delete(self, session: str, name: str) -> None:
        existed = self.store.delete(session, name)
        assert existed == ((session, name) in self.model)
        self.model.pop((session, name), None)

    @rule(session=SESSIONS)
    def delete_session(self, session: str) -> None:
        count = self.store.delete_session(session)
        keys = [key for key in self.model if key[0] == session]
        assert count == len(keys) + len(self.undo.get(session, []))
        for key in keys:
            del self.model[key]
        self.undo.pop(session, None)
        self.untrimmed.discard(session)

    @rule(session=SESSIONS, name=NAMES, backup=st.booleans())
    def restore(self, session: str, name: str, backup: bool) -> None:
        entry = self.model.get((session, name))
        if entry is None or entry.kind != "files" or entry.files is None:
            return
        before = self._target_files(session)
        self.store.restore(session, name, self._target(session), backup=backup)
        assert self._target_files(session) == entry.files
        self._restored(session, before, backup)

    @rule(session=SESSIONS)
    def undo(self, session: str) -> None:
        stack = self.undo.get(session, [])
        if not stack:
            return
        before = self._target_files(session)
        expected = stack[-1]  # the backup stays: undoing again undoes this undo
        self.store.undo(session)
        assert self._target_files(session) == expected
        self._restored(session, before, True)

    @rule(
        session=SESSIONS,
        name=NAMES,
        kill_at=st.integers(1, 80),
        operation=st.sampled_from(["restore", "undo"]),
    )
    def restore_killed_and_reopened(
        self, session: str, name: str, kill_at: int, operation: str
    ) -> None:
        entry = self.model.get((session, name))
        stack = self.undo.get(session, [])
        if operation == "undo" and not stack:
            return
        if operation == "restore" and (entry is None or entry.files is None):
            return
        before = self._target_files(session)
        expected = stack[-1] if operation == "undo" else entry.files  # type: ignore[union-attr]

        def run() -> None:
            store = self._open(KillingFileSystem(kill_at))
            if operation == "undo":
                store.undo(session)
            else:
                store.restore(session, name, self._target(session))

        completed = in_a_child(run)
        RUN_COUNTS["restore_kills"] += not completed
        self.reopen()
        after = self._target_files(session)
        if after == expected and (completed or after != before):
            self._restored(session, before, operation == "undo" or before is not None)
            if not completed:
                self.untrimmed.add(session)
            return
        if before is None and after == {} and not completed:
            self.targets[session] = after  # killed between making the target and its journal
            return
        assert after == before, f"{operation} killed at {kill_at}: target neither old nor new"

    @rule(
        keep_last=st.none() | st.integers(0, 3),
        ttl=st.booleans(),
        future=st.booleans(),
    )
    def sweep(self, keep_last: int | None, ttl: bool, future: bool) -> None:
        now = datetime.now(UTC) + (timedelta(hours=2) if future else timedelta(0))
        report = self.store.sweep(ttl=HOUR if ttl else None, keep_last=keep_last, now=now)
        victims = {key for key, e in self.model.items() if future and e.expires}
        if ttl or keep_last is not None:
            by_session: dict[str, list[tuple[int, tuple[str, str]]]] = {}
            for key, e in self.model.items():
                if e.kind == "files" and key not in victims:
                    by_session.setdefault(key[0], []).append((e.seq, key))
            for items in by_session.values():
                items.sort(reverse=True)
                for rank, (_, key) in enumerate(items):
                    kept_by_ttl = ttl and not future
                    kept_by_count = keep_last is not None and rank < keep_last
                    if not (kept_by_ttl or kept_by_count):
                        victims.add(key)
        assert set(report.deleted) == victims
        for key in victims:
            del self.model[key]

    @rule()
    def gc(self) -> None:
        report = self.store.gc()
        assert not report.skipped
        assert self.store.verify().garbage == []

    @rule()
    def reopen(self) -> None:
        self.store = self._open()

    def _settle(self, key: tuple[str, str], old: Entry | None, new: Entry | None) -> None:
        """After a crash: the disk holds the old or the new value; the model follows it."""
        self.reopen()
        actual = self._actual(key)
        if self._same(actual, old):
            return
        assert self._same(actual, new), f"{key} is neither old nor new after a crash"
        assert new is not None
        self.model[key] = new

    @rule(
        session=SESSIONS,
        name=NAMES,
        files=FILES,
        fail_at=st.integers(1, 40),
        code=st.sampled_from([errno.EIO, errno.ENOSPC]),
    )
    def create_fails(
        self, session: str, name: str, files: dict[str, bytes], fail_at: int, code: int
    ) -> None:
        source = self._source(files)
        failing = FailingFileSystem(fail_at, code)
        store = SnapStore(self.root, fs=failing, lock_timeout=10)
        try:
            store.create(session, name, ["."], base_dir=source)
        except (OSError, SnapstoreError):
            assert failing.fired is not None
            RUN_COUNTS["faults_injected"] += 1
        key = (session, name)
        self._settle(key, self.model.get(key), Entry("files", self._next(), files=files))

    @precondition(lambda self: bool(self.model))
    @rule(data=st.data(), kill_at=st.integers(1, 12), operation=st.sampled_from(["put", "del"]))
    def killed_and_reopened(self, data: st.DataObject, kill_at: int, operation: str) -> None:
        key = data.draw(st.sampled_from(sorted(self.model)))
        value = data.draw(VALUES)

        def run() -> None:
            store = SnapStore(self.root, fs=KillingFileSystem(kill_at), lock_timeout=10)
            if operation == "put":
                store.put_state(*key, value)
            else:
                store.delete(*key)

        RUN_COUNTS["kills"] += not in_a_child(run)
        old = self.model.get(key)
        if operation == "put":
            self._settle(key, old, Entry("state", self._next(), value=value))
        else:
            self.reopen()
            if self._actual(key) is None:
                del self.model[key]
            else:
                assert self._same(self._actual(key), old)

    @invariant()
    def listing_matches_model(self) -> None:
        RUN_COUNTS["steps"] += 1
        listed = {(info.session, info.name) for info in self.store.list()}
        assert listed == set(self.model)
        assert self.store.sessions() == sorted({key[0] for key in self.model})

    @invariant()
    def undo_history_matches_model(self) -> None:
        for session in SESSIONS_LIST:
            found, modelled = len(self.store.backups(session)), len(self.undo.get(session, []))
            extra = int(session in self.untrimmed and modelled == UNDO_DEPTH)
            assert found in (modelled, modelled + extra), f"{session}: {found} undo backups"
        assert not journals(self.store).pending()

    @invariant()
    def store_verifies(self) -> None:
        report = self.store.verify()
        assert report.ok, report.problems


StoreMachine.TestCase.settings = settings(
    max_examples=depth(100, 1000),
    stateful_step_count=depth(25, 50),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestStoreMachine = StoreMachine.TestCase


def teardown_module() -> None:
    """Record how many examples, steps and crashes ran (for docs/reliability.md)."""
    record("state_machine", **RUN_COUNTS)
