"""Packs under kill -9 and power loss: the crash suites' checks, run on operations that write,
reuse, read and rewrite packs (the core scenarios use trees too small to be packed).

For every mutating call of each operation a forked child is killed just before it (and torn
half-way through each write); every prefix of the recorded calls is replayed as the disks a
power cut could leave. Each result must pass the full consistency check.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers.blobs import two_file_packs
from helpers.figures import depth
from helpers.fork import call_trace, kill_at_every_call
from helpers.replay import check_every_power_cut, recorded_model
from helpers.scenarios import SESSION, Scenario, expectation, open_store, template
from helpers.scratch import scratch
from helpers.trees import write_tree

from snapstore import SnapStore
from snapstore.backend.local import LocalBackend
from snapstore.fs.seam import FileSystem
from snapstore.repo.packs import PackWriter

__all__ = ["scratch"]

FILES = {f"d{i % 3}/f{i:02d}.txt": f"small file {i}\n".encode() * (i + 1) for i in range(34)}


def _store(scenario_dir: Path) -> SnapStore:
    (scenario_dir / "target").mkdir(parents=True, exist_ok=True)
    return SnapStore(scenario_dir / "root", durable=False)


def _prepare_packed_create(scenario_dir: Path) -> None:
    store = _store(scenario_dir)
    write_tree(scenario_dir / "old", {"a.txt": b"alpha\n"})
    store.create(SESSION, "base", ["."], base_dir=scenario_dir / "old")
    write_tree(scenario_dir / "src", FILES)


def _run_packed_create(scenario_dir: Path, fs: FileSystem) -> object:
    return open_store(scenario_dir, fs).create(SESSION, "new", ["."], base_dir=scenario_dir / "src")


class _DiesBeforeFlushingNames(FileSystem):
    """A writer that publishes a pack through ``inner`` and dies right after renaming its
    index into place, before flushing that name (the pack's own name it flushed first, as
    the protocol requires before an index may name it)."""

    def __init__(self, inner: FileSystem) -> None:
        self.inner = inner
        self.dir_flushes = 0

    def open(self, path: str, flags: int, mode: int = 0o666, *, dir_fd: int | None = None) -> int:
        return self.inner.open(path, flags, mode, dir_fd=dir_fd)

    def write(self, fd: int, data: bytes | memoryview) -> None:
        self.inner.write(fd, data)

    def fsync(self, fd: int) -> None:
        self.inner.fsync(fd)

    def close(self, fd: int) -> None:
        self.inner.close(fd)

    def fchmod(self, fd: int, mode: int) -> None:
        self.inner.fchmod(fd, mode)

    def replace(
        self, src: str, dst: str, *, src_dir_fd: int | None = None, dst_dir_fd: int | None = None
    ) -> None:
        self.inner.replace(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)

    def unlink(self, path: str, *, dir_fd: int | None = None) -> None:
        self.inner.unlink(path, dir_fd=dir_fd)

    def fsync_dir(self, path: str, *, dir_fd: int | None = None) -> None:
        self.dir_flushes += 1
        if self.dir_flushes == 1:
            self.inner.fsync_dir(path, dir_fd=dir_fd)


def _run_create_reusing_dead_pack(scenario_dir: Path, fs: FileSystem) -> object:
    """Another writer published a pack holding some of these blobs and died before flushing
    ``packs/``; this snapshot reuses them, so it must flush ``packs/`` itself."""
    import blake3

    root = scenario_dir / "root"
    dead = PackWriter(LocalBackend(str(root), fs=_DiesBeforeFlushingNames(fs)))
    for data in list(FILES.values())[:5]:
        dead.add(blake3.blake3(data).digest(), data)
    dead.publish()
    write_tree(scenario_dir / "src", dict(list(FILES.items())[:5]))
    return open_store(scenario_dir, fs).create(SESSION, "new", ["."], base_dir=scenario_dir / "src")


class _DiesBeforeFlushingAppends(_DiesBeforeFlushingNames):
    """A writer whose flushes of files stop once ``dying`` is set: it appends a segment to
    its pack and dies before flushing it (and before its log line mattered)."""

    dying = False

    def fsync(self, fd: int) -> None:
        if not self.dying:
            self.inner.fsync(fd)

    def fsync_dir(self, path: str, *, dir_fd: int | None = None) -> None:
        self.inner.fsync_dir(path, dir_fd=dir_fd)


def _run_create_reusing_unflushed_segment(scenario_dir: Path, fs: FileSystem) -> object:
    """Another process appended a segment holding some of these blobs to its pack and died
    before flushing it; this snapshot's process reads that segment from the file (no log
    line announced it), so it must not count on it: it stores those blobs again."""
    import blake3

    from snapstore.repo.openpack import OpenPack
    from snapstore.repo.packset import PackSet

    root = scenario_dir / "root"
    dying = _DiesBeforeFlushingAppends(fs)
    backend = LocalBackend(str(root), fs=dying)
    appendable = OpenPack(backend, PackSet(backend))
    for part, dies in ((list(FILES.values())[5:8], False), (list(FILES.values())[:5], True)):
        dying.dying = dies
        writer = PackWriter(backend, segments=appendable)
        for data in part:
            writer.add(blake3.blake3(data).digest(), data)
        writer.publish()
    write_tree(scenario_dir / "src", dict(list(FILES.items())[:5]))
    return open_store(scenario_dir, fs).create(SESSION, "new", ["."], base_dir=scenario_dir / "src")


def _prepare_empty(scenario_dir: Path) -> None:
    _store(scenario_dir)


def _prepare_pack_gc(scenario_dir: Path, *, appending: bool = True) -> None:
    """Snapshots of one process (one appendable pack; or, without ``appending``, a pack
    with an index file each), most of them deleted, and an orphan pack."""
    store = _store(scenario_dir) if appending else two_file_packs(_store(scenario_dir))
    write_tree(scenario_dir / "src", FILES)
    store.create(SESSION, "all", ["."], base_dir=scenario_dir / "src")
    store.create(SESSION, "few", ["d0"], base_dir=scenario_dir / "src")
    store.delete(SESSION, "all")
    write_tree(scenario_dir / "other", {k.replace("d", "e"): v + b"!" for k, v in FILES.items()})
    store.create("s2", "gone", ["."], base_dir=scenario_dir / "other")
    store.delete("s2", "gone")
    (scenario_dir / "root" / "packs" / ("e" * 32 + ".pack")).write_bytes(b"orphan")


def _run_gc(scenario_dir: Path, fs: FileSystem) -> object:
    report = open_store(scenario_dir, fs).gc()
    assert not report.skipped
    return report


def _prepare_restore_from_pack(scenario_dir: Path) -> None:
    store = _store(scenario_dir)
    write_tree(scenario_dir / "src", FILES)
    store.create(SESSION, "snap", ["."], base_dir=scenario_dir / "src")
    changed = {path: b"edited\n" for path in list(FILES)[:3]}
    write_tree(scenario_dir / "target", {**FILES, **changed, "extra.txt": b"untracked\n"})


def _run_restore(scenario_dir: Path, fs: FileSystem) -> object:
    return open_store(scenario_dir, fs).restore(SESSION, "snap", scenario_dir / "target")


SCENARIOS = [
    Scenario("packed_create", _prepare_packed_create, _run_packed_create),
    Scenario("create_reusing_dead_pack", _prepare_empty, _run_create_reusing_dead_pack),
    Scenario(
        "create_reusing_unflushed_segment", _prepare_empty, _run_create_reusing_unflushed_segment
    ),
    Scenario("pack_gc", _prepare_pack_gc, _run_gc),
    Scenario("pack_gc_index_files", lambda path: _prepare_pack_gc(path, appending=False), _run_gc),
    Scenario("restore_from_pack", _prepare_restore_from_pack, _run_restore, restores=True),
]


def _uses_packs(scenario_dir: Path) -> None:
    assert any(name.endswith(".pack") for name in os.listdir(scenario_dir / "root" / "packs"))


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_kill_at_every_call_with_packs(scenario: Scenario, scratch: Path) -> None:
    template_dir = template(scenario, scratch / "template")
    expect = expectation(scenario, template_dir, scratch / "reference")
    trace = call_trace(scenario, template_dir, scratch / "count", check=_uses_packs)
    kill_at_every_call(scenario, template_dir, expect, scratch, trace)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_power_loss_at_every_prefix_with_packs(scenario: Scenario, scratch: Path) -> None:
    template_dir = template(scenario, scratch / "template")
    expect = expectation(scenario, template_dir, scratch / "reference")
    model = recorded_model(scenario, template_dir, scratch / "recorded")
    check_every_power_cut(scenario, model, expect, scratch, random_per_prefix=depth(2, 12))
