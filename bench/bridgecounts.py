"""Count what a shared root costs each create that separate roots do not: bridges each
checkpointing their own session, all in one root, then one root each, with every bridge
counting what its creates do (counts, not timings: they hold on a busy machine).

    .venv/bin/python bench/bridgecounts.py                       # 4 bridges, 200 creates
    .venv/bin/python bench/bridgecounts.py --bridges 8 --creates 100 --rounds 2

Per create, summed over the bridges: lock attempts and attempts that found the lock busy (by
lock), flushes of files and of directories (by directory: ``sessions/``, a session's own,
``packs/``), files created and renamed, listings of ``packs/``, loads of other processes'
appended segments, the index entries their merges copy (``format.segments.merge``; since
versions of a pack's index share one table, only a version that is not its table's tip is
copied) and the CPU time they take, and the CPU time of the bridges. The bridge loop is
``bench/commits.py``'s.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from commits import make_project

COUNTING_BRIDGE = r"""
import collections, json, os, sys, time
from pathlib import Path
from snapstore import SnapStore
from snapstore.backend import filelock
from snapstore.fs.seam import FileSystem
from snapstore.repo import packset, segmented

root, project, session, count, start_at = sys.argv[1:6]
counts = collections.Counter()

def where(path):
    rel = os.path.relpath(path, root)
    return "sessions/<session>" if rel.startswith("sessions/") else rel.split("/")[0]

class Counting(FileSystem):
    def fsync(self, fd):
        counts["fsync of a file"] += 1
        super().fsync(fd)
    def fsync_dir(self, path, *, dir_fd=None):
        counts[f"fsync of {where(path)}/"] += 1
        super().fsync_dir(path, dir_fd=dir_fd)
    def replace(self, src, dst, **kwargs):
        counts["rename"] += 1
        super().replace(src, dst, **kwargs)
    def open(self, path, flags, mode=0o666, *, dir_fd=None):
        if flags & os.O_CREAT:
            counts[f"file created in {where(path)}/"] += 1
        return super().open(path, flags, mode, dir_fd=dir_fd)

try_once = filelock.FileLock._try_once
def counted_try(lock, exclusive):
    held = try_once(lock, exclusive)
    name = "target" if lock.name.startswith("target") else lock.name.split(" ")[0]
    counts[f"lock attempt: {name}"] += 1
    if held is None:
        counts[f"lock busy: {name}"] += 1
    return held
filelock.FileLock._try_once = counted_try

try:  # versions of a pack's index share one table: only a version that is not its tip is copied
    from snapstore.format.packversions import PackTable
except ImportError:  # the code before: every merge copied the index so far
    PackTable = None
merge = segmented.merge
def counted_merge(pack_id, previous, segments):
    counts["segment merges"] += 1
    if PackTable is None and previous is not None:
        counts["index entries copied by merges"] += len(previous.entries)
    return merge(pack_id, previous, segments)
segmented.merge = packset.merge = counted_merge
if PackTable is not None:
    table_of = PackTable.of.__func__
    def counted_of(cls, entries, blocks):
        counts["index entries copied by merges"] += len(entries)
        return table_of(cls, entries, blocks)
    PackTable.of = classmethod(counted_of)

load_segments = packset.PackSet._load_segments
def timed_load_segments(*args, **kwargs):
    begun = time.process_time()
    try:
        return load_segments(*args, **kwargs)
    finally:
        counts["CPU ms of segment loads"] += (time.process_time() - begun) * 1000
packset.PackSet._load_segments = timed_load_segments

for attr, label in (("_list_all", "listings of packs/"), ("_load", "pack indexes loaded"),
                    ("_load_segments", "segment loads")):
    def wrap(original=getattr(packset.PackSet, attr), label=label):
        def counted(*args, **kwargs):
            counts[label] += 1
            return original(*args, **kwargs)
        return counted
    setattr(packset.PackSet, attr, wrap())

project = Path(project)
store = SnapStore(root, fs=Counting())
while time.time() < float(start_at):
    time.sleep(0.001)
counts.clear()
cpu = time.process_time()
begun = time.perf_counter()
for n in range(int(count)):
    paths = [f"d{i % 5}/f{i}.py" for i in ((n * 5 + k) % 50 for k in range(5))]
    (project / paths[0]).write_text(f"# {session} edit {n}\n" + "x = 2\n" * 40)
    store.create(session, None, paths, base_dir=project)
seconds = time.perf_counter() - begun
counts["CPU ms"] = round((time.process_time() - cpu) * 1000, 1)
store.close()
print(json.dumps({"seconds": seconds, "counts": counts}))
"""


def run(work: Path, bridges: int, creates: int, shared: bool) -> dict[str, Any]:
    """``bridges`` counting bridges into one root (``shared``) or one each: their creates
    per second and every count per create."""
    shutil.rmtree(work, ignore_errors=True)
    start_at = time.time() + 1.0 + 0.1 * bridges
    children = []
    for index in range(bridges):
        project = work / f"project-{index}"
        make_project(project)
        root = work / ("root" if shared else f"root-{index}")
        arguments = [str(root), str(project), f"bridge-{index}", str(creates), str(start_at)]
        children.append(
            subprocess.Popen(
                [sys.executable, "-c", COUNTING_BRIDGE, *arguments], stdout=subprocess.PIPE
            )
        )
    results = []
    for child in children:
        out, _ = child.communicate(timeout=900)
        if child.returncode:
            raise RuntimeError(f"a bridge failed with exit code {child.returncode}")
        results.append(json.loads(out))
    total: dict[str, float] = {}
    for result in results:
        for key, value in result["counts"].items():
            total[key] = total.get(key, 0) + value
    made = bridges * creates
    return {
        "creates_per_second": round(made / max(r["seconds"] for r in results), 1),
        "per_create": {key: round(value / made, 3) for key, value in sorted(total.items())},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bridges", type=int, default=4)
    parser.add_argument("--creates", type=int, default=200, help="creates per bridge")
    parser.add_argument("--rounds", type=int, default=1, help="one root and separate, alternated")
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bridge-counts-"))
    results: dict[str, list[dict[str, Any]]] = {"one root": [], "separate roots": []}
    try:
        for number in range(args.rounds):
            for label in results:
                shared = label == "one root"
                found = run(work / f"{number}-{shared}", args.bridges, args.creates, shared)
                results[label].append(found)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(report(results, args.bridges, args.creates))
    if args.out:
        args.out.write_text(json.dumps(results, indent=2))
    return 0


def report(results: dict[str, list[dict[str, Any]]], bridges: int, creates: int) -> str:
    one, separate = results["one root"], results["separate roots"]
    lines = [
        f"{bridges} bridges x {creates} creates; per create (rounds: one root | separate roots)",
        f"  {'creates per second':40} {[r['creates_per_second'] for r in one]} | "
        f"{[r['creates_per_second'] for r in separate]}",
    ]
    keys = sorted({key for side in (one, separate) for r in side for key in r["per_create"]})
    for key in keys:
        left = [r["per_create"].get(key, 0) for r in one]
        right = [r["per_create"].get(key, 0) for r in separate]
        lines.append(f"  {key:40} {left} | {right}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
