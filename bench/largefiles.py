"""Large files: snapstore beside restic and borg, in one run, on the same files.

    .venv/bin/python bench/largefiles.py                      # all three series, ~10 minutes
    .venv/bin/python bench/largefiles.py --series edits --avg-kib 64 256 1024

Three series, each tool in its own repository, every operation a whole process (its wall time
and its peak RSS, from ``wait4``):

- ``edits``: a 40 MiB incompressible file checkpointed, again after a 4 KiB overwrite in its
  middle, again after 100 bytes inserted at 10 MiB: how much each checkpoint grows the
  repository (bytes allocated on disk, as ``du`` counts them).
- ``sqlite``: a 100 MiB SQLite database (rows of random bytes) checkpointed, then again after
  each of three rounds of a few transactions (updates, inserts, deletes): the growth per
  checkpoint.
- ``big``: a 1 GiB incompressible file's first checkpoint and its restore into an empty
  directory: throughput (MiB/s) and peak RSS.

restic and borg run when installed (``apt-get install restic borgbackup``), else they are
skipped. ``--avg-kib`` runs snapstore once per average chunk size (min = avg/4, max = 4 x avg,
the FastCDC defaults), to compare them; the first is the one the targets are checked with.
The result is printed and written as JSON (``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tools import disk_bytes

MIB = 1 << 20
SNAPSTORE_CHILD = """
import sys
from snapstore.format.extents import ChunkParams
import snapstore.worktree.ingest as ingest
avg = int(sys.argv.pop(1))
if avg:
    ingest.CHUNK_PARAMS = ChunkParams(avg // 4, avg, avg * 4)
from snapstore.cli import main
main()
"""


@dataclass
class Run:
    """One process: wall seconds and peak resident set size."""

    seconds: float
    peak_rss_mb: float


def _high_water_kb(pid: int) -> int:
    """The process's peak resident set size so far (``VmHWM``), or 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def run(command: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None) -> Run:
    """Run ``command`` to completion (failing loudly), measuring it alone: its peak RSS is
    its own memory's high-water mark, sampled every 20 ms (``ru_maxrss`` would count the
    benchmark's own pages, inherited by the fork before ``exec``)."""
    started = time.perf_counter()
    process = subprocess.Popen(
        command, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    peak = 0
    while process.poll() is None:
        peak = max(peak, _high_water_kb(process.pid))
        time.sleep(0.02)
    elapsed = time.perf_counter() - started
    assert process.stderr is not None
    errors = process.stderr.read()
    if process.returncode != 0:
        raise RuntimeError(f"{command[:3]} failed: {errors.decode(errors='replace')[-2000:]}")
    return Run(elapsed, peak / 1024)


@dataclass
class Tool:
    """One tool's repository under ``work``: ``backup`` a directory, ``restore`` the latest
    checkpoint into an empty directory."""

    name: str
    work: Path
    counter: int = field(default=0)

    @property
    def repo(self) -> Path:
        return self.work / "repo"

    def available(self) -> bool:
        raise NotImplementedError

    def init(self) -> None:
        raise NotImplementedError

    def backup(self, source: Path) -> Run:
        raise NotImplementedError

    def restore(self, dest: Path) -> Run:
        raise NotImplementedError


class Snapstore(Tool):
    def __init__(self, name: str, work: Path, avg: int) -> None:
        super().__init__(name, work)
        self.avg = avg

    def available(self) -> bool:
        return True

    def _command(self) -> list[str]:
        return [sys.executable, "-c", SNAPSTORE_CHILD, str(self.avg), "--root", str(self.repo)]

    def init(self) -> None:
        self.work.mkdir(parents=True, exist_ok=True)

    def backup(self, source: Path) -> Run:
        self.counter += 1
        command = [*self._command(), "-q", "create", "bench", ".", "--name", f"c{self.counter}"]
        return run([*command, "--base", str(source)])

    def restore(self, dest: Path) -> Run:
        command = [*self._command(), "-q", "restore", "bench", "latest", "--no-backup"]
        return run([*command, "--target", str(dest)])


class Restic(Tool):
    def available(self) -> bool:
        return shutil.which("restic") is not None

    def _env(self) -> dict[str, str]:
        return dict(
            os.environ,
            RESTIC_REPOSITORY=str(self.repo),
            RESTIC_PASSWORD="bench",
            RESTIC_CACHE_DIR=str(self.work / "cache"),
        )

    def init(self) -> None:
        self.work.mkdir(parents=True, exist_ok=True)
        run(["restic", "init", "-q"], env=self._env())

    def backup(self, source: Path) -> Run:
        return run(["restic", "backup", "-q", "."], env=self._env(), cwd=source)

    def restore(self, dest: Path) -> Run:
        return run(["restic", "restore", "-q", "latest", "--target", str(dest)], env=self._env())


class Borg(Tool):
    def available(self) -> bool:
        return shutil.which("borg") is not None

    def _env(self) -> dict[str, str]:
        return dict(
            os.environ,
            BORG_REPO=str(self.repo),
            BORG_BASE_DIR=str(self.work / "home"),
            BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK="yes",
        )

    def init(self) -> None:
        self.work.mkdir(parents=True, exist_ok=True)
        run(["borg", "init", "-e", "none"], env=self._env())

    def backup(self, source: Path) -> Run:
        self.counter += 1
        return run(["borg", "create", f"::c{self.counter}", "."], env=self._env(), cwd=source)

    def restore(self, dest: Path) -> Run:
        dest.mkdir(parents=True, exist_ok=True)
        return run(["borg", "extract", f"::c{self.counter}"], env=self._env(), cwd=dest)


def tools(work: Path, averages: list[int]) -> list[Tool]:
    """snapstore once per average chunk size, then restic and borg where installed."""
    found: list[Tool] = [
        Snapstore(f"snapstore-{avg // 1024}k", work / f"snapstore-{avg // 1024}k", avg)
        for avg in averages
    ]
    for peer in (Restic("restic", work / "restic"), Borg("borg", work / "borg")):
        if peer.available():
            found.append(peer)
        else:
            print(f"{peer.name} is not installed: skipped", file=sys.stderr)
    return found


def _growth_series(tool: Tool, source: Path, steps: list[Any]) -> list[int]:
    """Repository growth in bytes for each checkpoint, each after ``steps[i]`` ran."""
    tool.init()
    grown = []
    for step in steps:
        step()
        before = disk_bytes(tool.repo)
        tool.backup(source)
        grown.append(disk_bytes(tool.repo) - before)
    return grown


def edits_series(work: Path, found: list[Tool], seed: int, mib: int) -> dict[str, list[int]]:
    """A file of ``mib`` MiB: first checkpoint, after a 4 KiB overwrite in its middle, after
    a 100-byte insertion at a quarter of it (10 MiB of 40)."""
    rng = random.Random(seed)
    original = rng.randbytes(mib * MIB)
    overwrite = rng.randbytes(4096)
    insertion = rng.randbytes(100)
    results = {}
    for tool in found:
        source = work / f"edits-src-{tool.name}"
        source.mkdir(parents=True)
        path = source / "data.bin"

        def write_original(path: Path = path) -> None:
            path.write_bytes(original)

        def overwrite_middle(path: Path = path) -> None:
            with open(path, "r+b") as handle:
                handle.seek(mib * MIB // 2)
                handle.write(overwrite)

        def insert_at_a_quarter(path: Path = path) -> None:
            data = path.read_bytes()
            at = mib * MIB // 4
            path.write_bytes(data[:at] + insertion + data[at:])

        steps = [write_original, overwrite_middle, insert_at_a_quarter]
        results[tool.name] = _growth_series(tool, source, steps)
        shutil.rmtree(source)
    return results


def _make_database(path: Path, mib: int, rng: random.Random) -> int:
    """A SQLite database of about ``mib`` MiB of rows of random bytes; the row count."""
    rows = mib * MIB // 1000
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, body BLOB, note TEXT)")
        db.executemany(
            "INSERT INTO items (id, body, note) VALUES (?, ?, ?)",
            ((i, rng.randbytes(900), f"row {i}") for i in range(rows)),
        )
    return rows


def _transactions(path: Path, rows: int, rng: random.Random) -> None:
    """A few transactions: 200 rows updated, 100 inserted, 50 deleted, in five commits."""
    with sqlite3.connect(path) as db:
        for _ in range(5):
            for _ in range(40):
                db.execute(
                    "UPDATE items SET body = ? WHERE id = ?",
                    (rng.randbytes(900), rng.randrange(rows)),
                )
            db.executemany(
                "INSERT INTO items (body, note) VALUES (?, 'new')",
                ((rng.randbytes(900),) for _ in range(20)),
            )
            db.execute(
                "DELETE FROM items WHERE id IN (SELECT id FROM items ORDER BY random() LIMIT 10)"
            )
            db.commit()


def sqlite_series(work: Path, found: list[Tool], seed: int, mib: int) -> dict[str, list[int]]:
    """The database's first checkpoint, then one after each of three rounds of transactions
    (every tool sees the same bytes: the database is built and changed once, copied)."""
    rng = random.Random(seed)
    versions = work / "sqlite-versions"
    versions.mkdir(parents=True)
    database = versions / "db.sqlite"
    rows = _make_database(database, mib, rng)
    copies = [versions / "v0.sqlite"]
    shutil.copyfile(database, copies[0])
    for round_number in range(1, 4):
        _transactions(database, rows, rng)
        copies.append(versions / f"v{round_number}.sqlite")
        shutil.copyfile(database, copies[-1])
    results = {}
    for tool in found:
        source = work / f"sqlite-src-{tool.name}"
        source.mkdir(parents=True)

        def put(copy: Path, source: Path = source) -> None:
            shutil.copyfile(copy, source / "app.sqlite")

        steps = [lambda copy=copy: put(copy) for copy in copies]
        results[tool.name] = _growth_series(tool, source, steps)
        shutil.rmtree(source)
    shutil.rmtree(versions)
    return results


def big_series(work: Path, found: list[Tool], gib: float) -> dict[str, dict[str, float]]:
    """A large incompressible file's first checkpoint and restore: MiB/s and peak RSS."""
    source = work / "big-src"
    source.mkdir(parents=True)
    size = int(gib * 1024) * MIB
    with open(source / "big.bin", "wb") as handle:
        for start in range(0, size, 64 * MIB):
            handle.write(os.urandom(min(64 * MIB, size - start)))
    results = {}
    for tool in found:
        tool.init()
        backup = tool.backup(source)
        dest = work / f"big-restored-{tool.name}"
        restore = tool.restore(dest)
        restored = next(dest.rglob("big.bin"))
        if restored.stat().st_size != size:
            raise RuntimeError(f"{tool.name} restored {restored.stat().st_size} bytes")
        results[tool.name] = {
            "checkpoint_mib_s": size / MIB / backup.seconds,
            "checkpoint_peak_rss_mb": backup.peak_rss_mb,
            "restore_mib_s": size / MIB / restore.seconds,
            "restore_peak_rss_mb": restore.peak_rss_mb,
            "repo_mb": disk_bytes(tool.repo) / 1e6,
        }
        shutil.rmtree(dest)
    shutil.rmtree(source)
    return results


def _mb(values: list[int]) -> str:
    return "  ".join(f"{value / 1e6:8.2f}" for value in values)


def report(result: dict[str, Any]) -> None:
    """Print the series as tables, and the targets against the first snapstore variant."""
    for series in ("edits", "sqlite"):
        if series in result:
            print(f"\n{series}: repository growth per checkpoint (MB)")
            for name, values in result[series].items():
                print(f"  {name:16} {_mb(values)}")
    if "big" in result:
        print("\nbig: first checkpoint and restore")
        for name, figures in result["big"].items():
            cells = "  ".join(f"{key} {value:8.1f}" for key, value in figures.items())
            print(f"  {name:16} {cells}")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--series", nargs="+", default=["edits", "sqlite", "big"])
    parser.add_argument("--avg-kib", type=int, nargs="+", default=[256])
    parser.add_argument("--edit-mib", type=int, default=40)
    parser.add_argument("--gib", type=float, default=1.0)
    parser.add_argument("--sqlite-mib", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="snapstore-largefiles-", dir=args.work))
    averages = [kib * 1024 for kib in args.avg_kib]
    result: dict[str, Any] = {"meta": {"avg_kib": args.avg_kib, "gib": args.gib}}
    try:
        if "edits" in args.series:
            result["edits"] = edits_series(
                work / "edits", tools(work / "edits", averages), args.seed, args.edit_mib
            )
        if "sqlite" in args.series:
            found = tools(work / "sqlite", averages)
            result["sqlite"] = sqlite_series(work / "sqlite", found, args.seed, args.sqlite_mib)
        if "big" in args.series:
            result["big"] = big_series(work / "big", tools(work / "big", averages[:1]), args.gib)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report(result)
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
