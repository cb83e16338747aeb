"""The mixed workload: processes x threads hammering one store root, each keeping a model.

Every thread owns its own sessions, so it knows exactly what each of its snapshots must hold
at any moment: reads and restores are checked against that model while the run goes on, and
the final models are checked against the disk at the end. Expiring snapshots (short TTL) may
be swept by anyone once expired, never before. Shared file contents make writers in
different processes reuse the same blobs while gc runs.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
import traceback
import warnings
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from helpers.seam import FastFileSystem
from helpers.trees import read_tree, remove_tree, write_tree
from snapstore import SnapStore
from snapstore.errors import SnapshotNotFound

NAMES = ("k0", "k1", "k2", "k3")
SHARED_CONTENTS = tuple(f"shared content {i}\n".encode() * (i + 1) for i in range(4))
EPHEMERAL_TTL = 0.4


@dataclass
class WorkerSpec:
    """What one process runs."""

    root: str
    work: str
    process: int
    threads: int
    duration: float
    seed: int
    operations: dict[str, int]


@dataclass
class ThreadResult:
    """What one thread did, what its sessions must hold now, and what went wrong."""

    process: int
    thread: int
    counts: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    files: dict[str, Any] = field(default_factory=dict)
    ephemeral: dict[str, Any] = field(default_factory=dict)
    state: int | None = None
    gc_skipped: int = 0


def session_of(process: int, thread: int, kind: str = "files") -> str:
    """The session a thread owns, per kind of snapshot."""
    return f"p{process}-t{thread}" + ("" if kind == "files" else f"-{kind}")


def version_files(rng: random.Random, tag: str) -> dict[str, bytes]:
    """Fresh contents for one version: unique files plus one shared with other writers."""
    files = {
        f"dir/f{i}.txt": f"{tag} file {i}\n".encode() + rng.randbytes(rng.randrange(0, 300))
        for i in range(rng.randrange(1, 4))
    }
    files["common.txt"] = rng.choice(SHARED_CONTENTS)
    return files


class Worker:
    """One thread's loop and its model."""

    def __init__(self, store: SnapStore, spec: WorkerSpec, thread: int) -> None:
        self.store = store
        self.spec = spec
        self.rng = random.Random(spec.seed * 1000 + thread)
        self.result = ThreadResult(spec.process, thread)
        self.session = session_of(spec.process, thread)
        self.ephemeral_session = session_of(spec.process, thread, "eph")
        self.state_session = session_of(spec.process, thread, "state")
        self.base = Path(spec.work) / f"t{thread}"
        self.version = 0
        self.files: dict[str, tuple[int, dict[str, bytes]] | None] = dict.fromkeys(NAMES)
        self.ephemeral: dict[str, tuple[int, dict[str, bytes], float] | None] = dict.fromkeys(
            NAMES[:2]
        )
        self.state: int | None = None
        self.counts: Counter[str] = Counter()

    def fail(self, message: str) -> None:
        self.result.errors.append(message)

    def run(self) -> ThreadResult:
        deadline = time.monotonic() + self.spec.duration
        operations = list(self.spec.operations)
        weights = [self.spec.operations[name] for name in operations]
        while time.monotonic() < deadline:
            operation = self.rng.choices(operations, weights)[0]
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("error")
                    getattr(self, f"op_{operation}")()
                self.counts[operation] += 1
            except Exception:
                self.fail(f"{operation}: {traceback.format_exc()}")
        self.result.counts = dict(self.counts)
        self.result.files = {
            name: None if value is None else [value[0], _hex(value[1])]
            for name, value in self.files.items()
        }
        self.result.ephemeral = {
            name: None if value is None else [value[0], _hex(value[1]), value[2]]
            for name, value in self.ephemeral.items()
        }
        self.result.state = self.state
        return self.result

    def _source(self, files: dict[str, bytes]) -> Path:
        source = self.base / "src"
        remove_tree(source)
        write_tree(source, files)
        return source

    def op_create(self) -> None:
        name = self.rng.choice(NAMES)
        self.version += 1
        files = version_files(self.rng, f"{self.session}/{name}/v{self.version}")
        info = self.store.create(
            self.session, name, ["."], base_dir=self._source(files), meta={"v": self.version}
        )
        self.files[name] = (self.version, files)
        if info.file_count != len(files):
            self.fail(f"create {name}: file_count {info.file_count} != {len(files)}")

    def op_create_expiring(self) -> None:
        name = self.rng.choice(list(self.ephemeral))
        self.version += 1
        files = version_files(self.rng, f"{self.ephemeral_session}/{name}/v{self.version}")
        info = self.store.create(
            self.ephemeral_session,
            name,
            ["."],
            base_dir=self._source(files),
            meta={"v": self.version},
            ttl=EPHEMERAL_TTL,
        )
        assert info.expires_at is not None
        self.ephemeral[name] = (self.version, files, info.expires_at.timestamp())

    def _check_snapshot(
        self, session: str, name: str, version: int, files: dict[str, bytes]
    ) -> None:
        snapshot = self.store.get(session, name)
        if snapshot.info.meta.get("v") != version:
            self.fail(f"{session}/{name}: holds v{snapshot.info.meta.get('v')}, not v{version}")
            return
        recorded = {e.path for e in snapshot.entries if e.kind == "file"}
        if recorded != set(files):
            self.fail(f"{session}/{name} v{version}: files {sorted(recorded)} != {sorted(files)}")
        for path, content in files.items():
            if self.store.read(session, name, path) != content:
                self.fail(f"{session}/{name} v{version}: {path} reads back different bytes")

    def op_read(self) -> None:
        name = self.rng.choice(NAMES)
        expected = self.files[name]
        if expected is None:
            try:
                self.store.get(self.session, name)
            except SnapshotNotFound:
                return
            self.fail(f"{self.session}/{name}: deleted, yet it is there (resurrected)")
            return
        try:
            self._check_snapshot(self.session, name, *expected)
        except SnapshotNotFound:
            self.fail(f"{self.session}/{name} v{expected[0]}: lost")

    def op_read_expiring(self) -> None:
        name = self.rng.choice(list(self.ephemeral))
        expected = self.ephemeral[name]
        try:
            snapshot = self.store.get(self.ephemeral_session, name)
        except SnapshotNotFound:
            seen_gone = time.time()  # a sweep may delete it while get() runs, not before
            if expected is not None and seen_gone < expected[2]:
                self.fail(f"{self.ephemeral_session}/{name}: gone before it expired")
            return
        if expected is None:
            self.fail(f"{self.ephemeral_session}/{name}: deleted, yet it is there")
            return
        if snapshot.info.meta.get("v") != expected[0]:
            self.fail(f"{self.ephemeral_session}/{name}: holds an older version")

    def op_restore(self) -> None:
        present = [name for name in NAMES if self.files[name] is not None]
        if not present:
            return
        name = self.rng.choice(present)
        expected = self.files[name]
        assert expected is not None
        target = self.base / "target"
        self.store.restore(self.session, name, target)
        tree = {p: n[1] for p, n in read_tree(target).items() if n[0] == "file"}
        if tree != expected[1]:
            self.fail(f"restore {self.session}/{name} v{expected[0]}: target differs")

    def op_delete(self) -> None:
        name = self.rng.choice(NAMES)
        existed = self.store.delete(self.session, name)
        if existed != (self.files[name] is not None):
            self.fail(f"delete {self.session}/{name} returned {existed}, model disagrees")
        self.files[name] = None

    def op_delete_session(self) -> None:
        present = sum(value is not None for value in self.files.values())
        backups = len(self.store.backups(self.session))
        count = self.store.delete_session(self.session)
        if count != present + backups:
            self.fail(
                f"delete_session {self.session}: {count} deleted, model had {present} and "
                f"{backups} undo backups"
            )
        self.files = dict.fromkeys(NAMES)

    def op_put_state(self) -> None:
        value = self.rng.randrange(1 << 30)
        self.store.put_state(self.state_session, "cursor", {"row": value})
        self.state = value
        if self.store.get_state(self.state_session, "cursor") != {"row": value}:
            self.fail(f"{self.state_session}: get_state right after put_state differs")

    def op_list(self) -> None:
        listed = {info.name for info in self.store.list(self.session)}
        expected = {name for name, value in self.files.items() if value is not None}
        if listed != expected:
            self.fail(f"list {self.session}: {sorted(listed)} != model {sorted(expected)}")

    def op_sweep(self) -> None:
        report = self.store.sweep(ttl=3600)
        for session, name in report.deleted:
            if not session.endswith("-eph"):
                self.fail(f"sweep deleted {session}/{name}, which had not expired")

    def op_gc(self) -> None:
        report = self.store.gc()
        if report.skipped:
            self.result.gc_skipped += 1


def _hex(files: dict[str, bytes]) -> dict[str, str]:
    return {path: content.hex() for path, content in files.items()}


def process_main(spec: WorkerSpec, result_path: str) -> None:
    """Run ``spec.threads`` workers (thread 0 with its own store object, the others sharing
    one) and write their results as JSON."""
    shared = SnapStore(spec.root, fs=FastFileSystem())
    results: list[ThreadResult] = []
    lock = threading.Lock()

    def thread_main(index: int) -> None:
        store = SnapStore(spec.root, fs=FastFileSystem()) if index == 0 else shared
        try:
            result = Worker(store, spec, index).run()
        except BaseException:
            result = ThreadResult(spec.process, index, errors=[traceback.format_exc()])
        with lock:
            results.append(result)

    threads = [threading.Thread(target=thread_main, args=(i,)) for i in range(spec.threads)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    with open(result_path, "w", encoding="utf-8") as file:
        json.dump([asdict(result) for result in results], file)


def check_final(root: Path, results: list[dict[str, Any]]) -> dict[str, int]:
    """Compare every thread's final model with the disk; returns counts of what was checked.

    Raises AssertionError naming every lost, torn or resurrected snapshot.
    """
    store = SnapStore(root, durable=False)
    problems: list[str] = []
    owned: set[tuple[str, str]] = set()
    checked = Counter[str]()
    now = time.time()
    for result in results:
        process, thread = result["process"], result["thread"]
        session = session_of(process, thread)
        for name, value in result["files"].items():
            owned.add((session, name))
            problems += _final_files(store, session, name, value)
            checked["files"] += 1
        ephemeral = session_of(process, thread, "eph")
        for name, value in result["ephemeral"].items():
            owned.add((ephemeral, name))
            try:
                snapshot = store.get(ephemeral, name)
            except SnapshotNotFound:
                if value is not None and now < value[2]:
                    problems.append(f"{ephemeral}/{name}: lost before it expired")
                continue
            if value is None or snapshot.info.meta.get("v") != value[0]:
                problems.append(f"{ephemeral}/{name}: resurrected or stale")
            checked["expiring"] += 1
        state_session = session_of(process, thread, "state")
        owned.add((state_session, "cursor"))
        if result["state"] is not None:
            stored = store.get_state(state_session, "cursor")
            if stored != {"row": result["state"]}:
                problems.append(f"{state_session}: state {stored!r} != {result['state']!r}")
            checked["states"] += 1
    for info in store.list():
        if (info.session, info.name) not in owned:
            problems.append(f"{info.session}/{info.name}: in the store but in no model")
    report = store.verify(deep=True)
    if not report.ok:
        problems.append(f"verify: {report.problems}")
    assert not problems, "\n".join(problems)
    return dict(checked)


def _final_files(store: SnapStore, session: str, name: str, value: Any) -> list[str]:
    try:
        snapshot = store.get(session, name)
    except SnapshotNotFound:
        return [] if value is None else [f"{session}/{name} v{value[0]}: lost"]
    if value is None:
        return [f"{session}/{name}: deleted, yet it is there (resurrected)"]
    version, files = value
    if snapshot.info.meta.get("v") != version:
        return [f"{session}/{name}: holds v{snapshot.info.meta.get('v')}, not v{version}"]
    for path, content in files.items():
        if store.read(session, name, path) != bytes.fromhex(content):
            return [f"{session}/{name} v{version}: {path} is torn"]
    return []


def run_processes(
    root: Path, work: Path, specs: list[WorkerSpec], *, grace: float = 90.0
) -> list[dict[str, Any]]:
    """Run one forked process per spec; fails on a hang (deadlock) or a crashed process."""
    import multiprocessing

    context = multiprocessing.get_context("fork")
    processes = []
    for spec in specs:
        result_path = str(work / f"result-{spec.process}.json")
        process = context.Process(target=process_main, args=(spec, result_path))
        process.start()
        processes.append((process, result_path))
    deadline = time.monotonic() + max(spec.duration for spec in specs) + grace
    hung = []
    for process, _ in processes:
        process.join(max(0.0, deadline - time.monotonic()))
        if process.is_alive():
            hung.append(process.pid)
            process.kill()
            process.join()
    assert not hung, f"processes {hung} did not finish in time: deadlock or starvation"
    results: list[dict[str, Any]] = []
    for process, result_path in processes:
        assert process.exitcode == 0, f"process {process.pid} exited with {process.exitcode}"
        with open(result_path, encoding="utf-8") as file:
            results.extend(json.load(file))
    return results


def errors_of(results: list[dict[str, Any]]) -> list[str]:
    """Every error any thread reported, labelled with its process and thread."""
    return [f"p{r['process']}-t{r['thread']}: {e}" for r in results for e in r["errors"]]


def totals(results: list[dict[str, Any]]) -> Counter[str]:
    """Operations completed, summed over all threads."""
    counts: Counter[str] = Counter()
    for result in results:
        counts.update(result["counts"])
    return counts


def ensure_dirs(*paths: Path) -> None:
    """Create directories (the root is made by the first SnapStore)."""
    for path in paths:
        os.makedirs(path, exist_ok=True)
