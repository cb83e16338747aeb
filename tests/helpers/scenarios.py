"""The mutating operations the crash, power-loss and fault suites drive, on small trees.

A scenario directory holds ``root`` (the store), ``src`` (files to snapshot) and ``target``
(a restore target). ``prepare`` builds a template once per test; every run works on a fresh
copy of it. ``run`` performs exactly one public operation through the given I/O seam.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from helpers.consistency import Expectation, fingerprints
from helpers.formatv1 import downgrade_to_format_1
from helpers.formatv3 import mark_format, new_layout_path, old_layout_path, to_old_layout
from helpers.seam import FastFileSystem
from helpers.trees import Spec, copy_tree, read_tree, remove_tree, write_tree
from snapstore import SnapStore
from snapstore.fs.durable import TEMP_PREFIX
from snapstore.fs.seam import FileSystem
from snapstore.internals import autofold, repository
from snapstore.maintenance import gcsteps, sweep

SESSION = "s1"
TREE_V1: Spec = {
    "a.txt": b"alpha\n",
    "dir/b.bin": bytes(range(256)) * 3,
    "dir/sub/c.txt": b"charlie\n",
    "link": "->a.txt",
    "empty": None,
    "run.sh": (b"#!/bin/sh\necho hi\n", 0o755),
}
TREE_V2: Spec = {
    "a.txt": b"alpha, changed\n",
    "dir/b.bin": bytes(range(256)) * 3,
    "dir/new.txt": b"new file\n",
    "link": "->dir/b.bin",
    "empty": None,
    "run.sh": (b"#!/bin/sh\necho hi\n", 0o700),
    "extra/deep/file": b"only in v2\n",
}

BIG_V1 = bytes(random.Random(7).randbytes(3 << 19))
"""A file large enough to be stored as content-defined chunks (1.5 MiB, about six)."""
BIG_V2 = (
    BIG_V1[: 1 << 19]
    + b"inserted"
    + BIG_V1[1 << 19 : 1 << 20]
    + bytes(4096)
    + BIG_V1[(1 << 20) + 4096 :]
)
TREE_CHUNKED_V1: Spec = {**TREE_V1, "dir/big.bin": BIG_V1}
TREE_CHUNKED_V2: Spec = {**TREE_V2, "dir/big.bin": BIG_V2}


def open_store(scenario_dir: Path, fs: FileSystem | None = None) -> SnapStore:
    """The scenario's store, through ``fs``; short lock timeout (nothing else holds locks)."""
    return SnapStore(scenario_dir / "root", fs=fs, lock_timeout=10)


def _setup_store(scenario_dir: Path) -> SnapStore:
    (scenario_dir / "target").mkdir(parents=True, exist_ok=True)
    return SnapStore(scenario_dir / "root", durable=False)


def _snapshot(store: SnapStore, scenario_dir: Path, name: str, spec: Spec, **kw: object) -> None:
    src = scenario_dir / "src"
    remove_tree(src)
    write_tree(src, spec)
    store.create(SESSION, name, ["."], base_dir=src, **kw)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Scenario:
    """One operation under test, with how to build its starting point."""

    name: str
    prepare: Callable[[Path], None]
    operation: Callable[[Path, FileSystem], object]
    restores: bool = False

    def run(self, scenario_dir: Path, fs: FileSystem) -> object:
        """Perform the operation through ``fs``, on a stopped clock (``stopped_clock``)."""
        with stopped_clock():
            return self.operation(scenario_dir, fs)


STOPPED_AT = 1000.0
"""The time gc's steps and sweep's holds read while a scenario runs."""


@contextmanager
def stopped_clock() -> Iterator[None]:
    """Make gc's steps and sweep's holds read a clock that never moves, so that no hold runs
    out of time: how many deletions a hold makes (and so how many holds, pack log appends
    and flushes an operation makes) would otherwise depend on the machine's load, and the
    suites that compare a run's calls with a counting run's would see the order change. A
    scenario that wants short holds sets ``STEP_ITEMS`` (the same calls on every run)."""
    saved = gcsteps.monotonic, sweep.monotonic
    gcsteps.monotonic = sweep.monotonic = lambda: STOPPED_AT
    try:
        yield
    finally:
        gcsteps.monotonic, sweep.monotonic = saved


def _prepare_init(scenario_dir: Path) -> None:
    (scenario_dir / "target").mkdir(parents=True)


def _run_init(scenario_dir: Path, fs: FileSystem) -> object:
    return open_store(scenario_dir, fs)


def _prepare_create(scenario_dir: Path) -> None:
    store = _setup_store(scenario_dir)
    _snapshot(store, scenario_dir, "base", TREE_V1)
    remove_tree(scenario_dir / "src")
    write_tree(scenario_dir / "src", TREE_V2)


def _run_create(scenario_dir: Path, fs: FileSystem) -> object:
    return open_store(scenario_dir, fs).create(
        SESSION, "new", ["."], base_dir=scenario_dir / "src", meta={"why": "test"}
    )


def _run_overwrite(scenario_dir: Path, fs: FileSystem) -> object:
    return open_store(scenario_dir, fs).create(
        SESSION, "base", ["."], base_dir=scenario_dir / "src"
    )


def _run_create_after_dead_writer(scenario_dir: Path, fs: FileSystem) -> object:
    """Another writer published a blob of the same bytes and died before its commit (so it
    never flushed the blob's directory); this snapshot reuses that blob."""
    repository(open_store(scenario_dir, fs)).blobs.put_bytes(b"alpha, changed\n")
    return _run_create(scenario_dir, fs)


def _run_create_after_dead_mkdir(scenario_dir: Path, fs: FileSystem) -> object:
    """Another writer made the session's directory and died before flushing its parent;
    this snapshot is the first one committed into it."""
    store = open_store(scenario_dir, fs)
    session_dir = os.path.dirname(repository(store).catalog.manifest_path("s2", "new"))
    fs.mkdir(session_dir, 0o755)
    return store.create("s2", "new", ["."], base_dir=scenario_dir / "src")


def _prepare_create_old_layout(scenario_dir: Path) -> None:
    """``_prepare_create`` as a format 3 writer left it: ``base`` in its own directory."""
    _prepare_create(scenario_dir)
    to_old_layout(scenario_dir / "root")
    mark_format(scenario_dir / "root", 3)


def _prepare_delete_both_layouts(scenario_dir: Path) -> None:
    """``a`` committed twice, the older manifest left in the old layout beside the newer file
    (a writer killed between its commit and the removal of the old manifest), ``b`` old."""
    store = _setup_store(scenario_dir)
    _snapshot(store, scenario_dir, "a", TREE_V1)
    root = scenario_dir / "root"
    older = new_layout_path(root, SESSION, "a").read_bytes()
    _snapshot(store, scenario_dir, "a", TREE_V2)
    _snapshot(store, scenario_dir, "b", {"b.txt": b"b\n"})
    store.close()
    to_old_layout(root, [(SESSION, "b")])
    old = old_layout_path(root, SESSION, "a")
    old.parent.mkdir()
    old.write_bytes(older)
    old.chmod(0o444)


def _prepare_sweep_old_layout(scenario_dir: Path) -> None:
    """``_prepare_sweep`` with every snapshot in the old layout but the newest."""
    _prepare_sweep(scenario_dir)
    to_old_layout(scenario_dir / "root", [(SESSION, "old-1"), (SESSION, "old-2"), ("s2", "kept")])
    mark_format(scenario_dir / "root", 3)


def _prepare_sweep_mixed_layouts(scenario_dir: Path) -> None:
    """``_prepare_sweep`` with the younger victim in the old layout and the older one in
    the new: one hold of the sweep deletes both, the old layout's last."""
    _prepare_sweep(scenario_dir)
    to_old_layout(scenario_dir / "root", [(SESSION, "old-2")])
    mark_format(scenario_dir / "root", 3)


TREE_V3: Spec = {
    "a.txt": b"alpha, changed again\n",
    "dir/new.txt": b"new file, edited\n",
    "dir/sub/c.txt": b"charlie\n",
    "fresh.txt": b"only in v3\n",
}


def _prepare_appends(scenario_dir: Path) -> None:
    """As for a create, and a second source (``src2``) for the create after it."""
    _prepare_create(scenario_dir)
    write_tree(scenario_dir / "src2", TREE_V3)


def _run_two_creates(scenario_dir: Path, fs: FileSystem) -> object:
    """Two creates of one process: the second appends a segment to the pack the first
    wrote (one flush for its data and index)."""
    store = open_store(scenario_dir, fs)
    store.create(SESSION, "new", ["."], base_dir=scenario_dir / "src")
    return store.create(SESSION, "newer", ["."], base_dir=scenario_dir / "src2")


def _run_create_gc_create(scenario_dir: Path, fs: FileSystem) -> object:
    """A process creates, another gc merges the small packs (deleting the pack the first
    keeps open), then the first creates again: it must start a new pack."""
    store = open_store(scenario_dir, fs)
    store.create(SESSION, "new", ["."], base_dir=scenario_dir / "src")
    report = open_store(scenario_dir, fs).gc()
    assert report.packs_deleted >= 1, "gc did not take the open pack"
    return store.create(SESSION, "newer", ["."], base_dir=scenario_dir / "src2")


def _prepare_state(scenario_dir: Path) -> None:
    store = _setup_store(scenario_dir)
    store.put_state(SESSION, "cursor", {"row": 1, "etag": "abc"})


def _run_state(scenario_dir: Path, fs: FileSystem) -> object:
    return open_store(scenario_dir, fs).put_state(SESSION, "cursor", {"row": 2, "etag": "def"})


def _run_new_state(scenario_dir: Path, fs: FileSystem) -> object:
    return open_store(scenario_dir, fs).put_state("s3", "first", [1, "two"], ttl=60)


def _prepare_delete(scenario_dir: Path) -> None:
    store = _setup_store(scenario_dir)
    _snapshot(store, scenario_dir, "a", TREE_V1)
    _snapshot(store, scenario_dir, "b", TREE_V2)
    store.put_state("s2", "cursor", 7)


def _run_delete(scenario_dir: Path, fs: FileSystem) -> object:
    return open_store(scenario_dir, fs).delete(SESSION, "a")


def _run_delete_session(scenario_dir: Path, fs: FileSystem) -> object:
    return open_store(scenario_dir, fs).delete_session(SESSION)


def _prepare_sweep(scenario_dir: Path) -> None:
    store = _setup_store(scenario_dir)
    _snapshot(store, scenario_dir, "old-1", TREE_V1)
    _snapshot(store, scenario_dir, "old-2", TREE_V2)
    _snapshot(store, scenario_dir, "newest", TREE_V1)
    store.put_state("s2", "expiring", 1, ttl=3600)
    store.put_state("s2", "kept", 2)


def _run_sweep(scenario_dir: Path, fs: FileSystem) -> object:
    now = datetime.now(UTC) + timedelta(days=1)
    return open_store(scenario_dir, fs).sweep(keep_last=1, now=now)


def _prepare_gc(scenario_dir: Path) -> None:
    """Three snapshots, each with a small pack of its own (written by processes of their
    own), one of them deleted, and a stale temp file."""
    for name, spec in [
        ("kept", TREE_V1),
        ("gone", {"unique.txt": b"garbage soon\n"}),
        ("kept", TREE_V2),
    ]:
        with _setup_store(scenario_dir) as store:
            _snapshot(store, scenario_dir, name, spec)
    store.delete(SESSION, "gone")
    (scenario_dir / "root" / "tmp" / f"{TEMP_PREFIX}stale").write_bytes(b"left by a crash")


def _run_gc(scenario_dir: Path, fs: FileSystem) -> object:
    return open_store(scenario_dir, fs).gc()


def _prepare_fold(scenario_dir: Path) -> None:
    """Four snapshots, each with a small pack of its own (one of them overwritten): each
    from a process of its own, as one-shot commands leave them (a process appends its
    creates to one pack)."""
    for name, spec in [
        ("kept", TREE_V1),
        ("other", {"o.txt": b"other\n"}),
        ("kept", TREE_V2),
        ("third", {"t.txt": b"third\n", "a.txt": b"alpha\n"}),
    ]:
        with _setup_store(scenario_dir) as store:
            _snapshot(store, scenario_dir, name, spec)


def _run_fold(scenario_dir: Path, fs: FileSystem) -> object:
    """One fold step, run in the caller's thread (as the background thread runs it)."""
    store = SnapStore(scenario_dir / "root", fs=fs, lock_timeout=10, fold_threshold=2)
    folded = autofold(store).run_steps(1)
    assert folded == 1 and not autofold(store).pending, "the fold step did not complete"
    return folded


def _prepare_upgrade(scenario_dir: Path) -> None:
    """A format 1 store: files snapshots (one overwritten), a state value, a stale temp."""
    store = _setup_store(scenario_dir)
    _snapshot(store, scenario_dir, "kept", TREE_V1)
    _snapshot(store, scenario_dir, "other", TREE_V2)
    store.put_state(SESSION, "cursor", {"row": 7})
    store.close()
    downgrade_to_format_1(scenario_dir / "root")
    (scenario_dir / "root" / "tmp" / f"{TEMP_PREFIX}stale").write_bytes(b"left by a crash")


def _run_upgrade(scenario_dir: Path, fs: FileSystem) -> object:
    return open_store(scenario_dir, fs).upgrade()


def _prepare_create_chunked(scenario_dir: Path) -> None:
    """A snapshot with a chunked file; the source then has it overwritten and inserted into."""
    store = _setup_store(scenario_dir)
    _snapshot(store, scenario_dir, "base", TREE_CHUNKED_V1)
    remove_tree(scenario_dir / "src")
    write_tree(scenario_dir / "src", TREE_CHUNKED_V2)


def _prepare_restore_chunked(scenario_dir: Path) -> None:
    """A snapshot with a chunked file, restored over a target holding another version."""
    store = _setup_store(scenario_dir)
    _snapshot(store, scenario_dir, "snap", TREE_CHUNKED_V1)
    write_tree(scenario_dir / "target", TREE_CHUNKED_V2)


def _prepare_restore(scenario_dir: Path) -> None:
    store = _setup_store(scenario_dir)
    _snapshot(store, scenario_dir, "snap", TREE_V1)
    write_tree(scenario_dir / "target", TREE_V2)
    (scenario_dir / "target" / "untracked.txt").write_bytes(b"not in the snapshot\n")


def _prepare_restore_new_target(scenario_dir: Path) -> None:
    store = _setup_store(scenario_dir)
    _snapshot(store, scenario_dir, "snap", TREE_V1)
    (scenario_dir / "target").rmdir()


def _run_restore(scenario_dir: Path, fs: FileSystem) -> object:
    return open_store(scenario_dir, fs).restore(SESSION, "snap", scenario_dir / "target")


SCENARIOS = [
    Scenario("init", _prepare_init, _run_init),
    Scenario("create", _prepare_create, _run_create),
    Scenario("overwrite", _prepare_create, _run_overwrite),
    Scenario("create_after_dead_writer", _prepare_create, _run_create_after_dead_writer),
    Scenario("create_after_dead_mkdir", _prepare_create, _run_create_after_dead_mkdir),
    Scenario("put_state", _prepare_state, _run_state),
    Scenario("delete", _prepare_delete, _run_delete),
    Scenario("delete_session", _prepare_delete, _run_delete_session),
    Scenario("sweep", _prepare_sweep, _run_sweep),
    Scenario("gc", _prepare_gc, _run_gc),
    Scenario("fold", _prepare_fold, _run_fold),
    Scenario("upgrade", _prepare_upgrade, _run_upgrade),
    Scenario("overwrite_old_layout", _prepare_create_old_layout, _run_overwrite),
    Scenario("delete_both_layouts", _prepare_delete_both_layouts, _run_delete),
    Scenario("sweep_old_layout", _prepare_sweep_old_layout, _run_sweep),
    Scenario("sweep_mixed_layouts", _prepare_sweep_mixed_layouts, _run_sweep),
    Scenario("put_state_new", _prepare_state, _run_new_state),
    Scenario("restore", _prepare_restore, _run_restore, restores=True),
    Scenario("restore_new_target", _prepare_restore_new_target, _run_restore, restores=True),
    Scenario("create_chunked", _prepare_create_chunked, _run_create),
    Scenario("two_creates", _prepare_appends, _run_two_creates),
    Scenario("create_gc_create", _prepare_appends, _run_create_gc_create),
    Scenario("restore_chunked", _prepare_restore_chunked, _run_restore, restores=True),
]
BY_NAME = {scenario.name: scenario for scenario in SCENARIOS}


def template(scenario: Scenario, directory: Path) -> Path:
    """Build the scenario's starting point under ``directory`` (resolved, so that paths the
    recording layer reads back from /proc match)."""
    path = Path(os.path.realpath(directory))
    scenario.prepare(path)
    return path


def expectation(scenario: Scenario, template_dir: Path, scratch: Path) -> Expectation:
    """Run the operation cleanly on a copy: what the store held before and after."""
    copy_tree(template_dir, scratch)
    old = fingerprints(scratch / "root")
    old_target = read_tree(scratch / "target")
    target_existed = (scratch / "target").is_dir()
    scenario.run(scratch, FastFileSystem())
    expect = Expectation(old, fingerprints(scratch / "root"))
    if scenario.restores:
        expect.old_target = old_target
        expect.new_target = read_tree(scratch / "target")
        expect.restore_session = SESSION
        expect.target_existed = target_existed
    remove_tree(scratch)
    return expect
