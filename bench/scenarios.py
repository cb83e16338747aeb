"""Store-only measurements: listing and opening big catalogs, peak memory, space over a
series of snapshots, concurrent writers, and the cost of durability."""

from __future__ import annotations

import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tools import SnapstoreLibrary, disk_bytes, timed
from trees import TreeSize, change_files, generate

from snapstore import SnapStore

SNAPSHOTS_PER_SESSION = 100
PEAK_RSS_KB = """
def peak_rss_kb():
    # ru_maxrss survives execve (it starts at the parent's size): read this image's own
    # high-water mark where /proc has it.
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
"""
CHILD_MEMORY = (
    PEAK_RSS_KB
    + """
import json, sys
from snapstore import SnapStore
root, op, tree = sys.argv[1:4]
store = SnapStore(root)
if op == "create":
    store.create("mem", "snap", ["."], base_dir=tree)
elif op == "restore":
    store.restore("mem", "snap", tree)
print(json.dumps(peak_rss_kb()))
"""
)
CHILD_LIST = """
import sys, time
from snapstore import SnapStore
store = SnapStore(sys.argv[1])
started = time.perf_counter()
store.list()
print(time.perf_counter() - started)
"""
CHILD_CLI_LIST = """
import contextlib, io, sys, time
from snapstore.cli.app import run
started = time.perf_counter()
with contextlib.redirect_stdout(io.StringIO()):
    code = run(["--root", sys.argv[1], "list", "--json"])
assert code == 0, code
print(time.perf_counter() - started)
"""
CHILD_WALK = """
import sys, time
sys.path.insert(0, sys.argv[2])
from pathlib import Path
from scenarios import bare_walk
started = time.perf_counter()
bare_walk(Path(sys.argv[1]))
print(time.perf_counter() - started)
"""
CHILD_CREATE = """
import sys
from snapstore import SnapStore
SnapStore(sys.argv[1]).create(sys.argv[2], "snap", ["."], base_dir=sys.argv[3])
"""


def build_catalog(root: Path, count: int, work: Path) -> None:
    """A store holding ``count`` small file snapshots spread over sessions of 100 each."""
    source = work / f"catalog-source-{count}"
    source.mkdir(parents=True, exist_ok=True)
    (source / "note.txt").write_text("one small file\n")
    store = SnapStore(root, durable=False)
    for index in range(count):
        session = f"session-{index // SNAPSHOTS_PER_SESSION:04d}"
        store.create(session, f"snap-{index:05d}", ["."], base_dir=source)


def bare_walk(root: Path) -> int:
    """The floor for listing: list every session directory and stat each manifest in it
    (format 4: the file ``<name-dir>.manifest``; formats 1-3: ``<name-dir>/manifest``)."""
    found = 0
    with os.scandir(root / "sessions") as sessions:
        for session in sessions:
            with os.scandir(session.path) as names:
                for name in names:
                    if name.name.endswith(".manifest"):
                        os.stat(name.path)
                    else:
                        os.stat(os.path.join(name.path, "manifest"))
                    found += 1
    return found


def list_and_open(work: Path, many: int, reps: int) -> dict[str, float]:
    """Medians of ``list()`` over ``many`` snapshots vs a bare walk, and of opening a store
    with 10 vs ``many`` snapshots. ``list``: a new ``SnapStore`` in this process (headers
    this process decoded are reused while their files are unchanged); ``list_warm``: the same
    ``SnapStore`` again; ``list_new_process``: the list() call alone in a new process (headers
    from the header cache file), against ``bare_walk_new_process``, the walk alone in a new
    process; ``cli_list_new_process``: ``snapstore list --json`` run in a new process (its
    command alone, output discarded); ``list_first``: the same as ``list_new_process`` with no
    header cache at all."""
    results: dict[str, float] = {}
    roots = {}
    for count in (10, many):
        roots[count] = work / f"catalog-{count}"
        if roots[count].exists():
            shutil.rmtree(roots[count])
        build_catalog(roots[count], count, work)
    big = roots[many]
    (big / "cache" / "headers").unlink(missing_ok=True)
    results["list_first"] = float(_child(CHILD_LIST, str(big)))
    results["list_new_process"] = statistics.median(
        float(_child(CHILD_LIST, str(big))) for _ in range(reps)
    )
    results["cli_list_new_process"] = statistics.median(
        float(_child(CHILD_CLI_LIST, str(big))) for _ in range(reps)
    )
    bench_dir = str(Path(__file__).resolve().parent)
    results["bare_walk_new_process"] = statistics.median(
        float(_child(CHILD_WALK, str(big), bench_dir)) for _ in range(reps)
    )
    assert len(SnapStore(big).list()) == many
    results["list"] = _median(reps, lambda: SnapStore(big).list())
    store = SnapStore(big)
    results["list_warm"] = _median(reps + 1, lambda: store.list())
    results["bare_walk"] = _median(reps, lambda: bare_walk(big))
    for count, root in roots.items():
        key = "open_10" if count == 10 else "open_many"
        results[key] = _median(max(reps, 10), functools.partial(SnapStore, root))
    results["snapshots"] = many
    return results


def _median(reps: int, action: Callable[[], object]) -> float:
    return statistics.median(timed(action) for _ in range(reps))


def _child(code: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code, *args], check=True, capture_output=True, text=True
    )
    return done.stdout


def peak_memory(tree: Path, work: Path) -> dict[str, float]:
    """Peak resident memory (MB) of a fresh process snapshotting ``tree``, and of one
    restoring it into an empty directory."""
    root = work / "memory-store"
    target = work / "memory-restore"
    for path in (root, target):
        if path.exists():
            shutil.rmtree(path)
    create_kb = json.loads(_child(CHILD_MEMORY, str(root), "create", str(tree)))
    restore_kb = json.loads(_child(CHILD_MEMORY, str(root), "restore", str(target)))
    baseline_kb = json.loads(_child(CHILD_MEMORY, str(root), "import", str(target)))
    shutil.rmtree(target)
    return {
        "create_mb": create_kb / 1024,
        "restore_mb": restore_kb / 1024,
        "import_mb": baseline_kb / 1024,
    }


def space_series(tree: Path, paths: list[str], work: Path, seed: int) -> dict[str, float]:
    """Disk space of one snapshot vs ten, with 1% of files changed between them."""
    subject = SnapstoreLibrary()
    subject.first(tree, work / "space")
    one = disk_bytes(subject.root)
    for step in range(9):
        change_files(tree, paths, 0.01, seed * 1000 + 500 + step)
        subject.again()
    ten = disk_bytes(subject.root)
    return {"one_bytes": one, "ten_bytes": ten, "ratio": ten / one}


def concurrent_writers(work: Path, size: TreeSize, seed: int, reps: int) -> dict[str, float]:
    """Four processes each snapshotting their own quarter-size tree into one store, as a
    sequence and all at once; throughput ratio = sequential time / concurrent time."""
    quarter = TreeSize(max(1, size.files // 4), max(1, size.total_bytes // 4))
    trees = []
    for index in range(4):
        tree = work / "concurrent-trees" / f"tree{index}"
        if not tree.exists():
            generate(tree, quarter, seed * 100 + index)
        trees.append(tree)
    sequential, concurrent = [], []
    for rep in range(reps):
        root = work / f"concurrent-seq-{rep}"
        started = time.perf_counter()
        for index, tree in enumerate(trees):
            _child(CHILD_CREATE, str(root), f"writer-{index}", str(tree))
        sequential.append(time.perf_counter() - started)
        root = work / f"concurrent-par-{rep}"
        started = time.perf_counter()
        children = [
            subprocess.Popen([sys.executable, "-c", CHILD_CREATE, str(root), f"w{i}", str(t)])
            for i, t in enumerate(trees)
        ]
        codes = [child.wait() for child in children]
        concurrent.append(time.perf_counter() - started)
        if any(codes):
            raise RuntimeError(f"a concurrent writer failed: exit codes {codes}")
    seq, par = statistics.median(sequential), statistics.median(concurrent)
    return {"sequential": seq, "concurrent": par, "throughput_ratio": seq / par}


def durability_cost(tree: Path, work: Path, reps: int) -> dict[str, float]:
    """First snapshot with fsync (the default) and with ``durable=False``."""
    results = {}
    for durable in (True, False):
        subject = SnapstoreLibrary(durable=durable)
        key = "durable" if durable else "not_durable"
        results[key] = statistics.median(
            subject.first(tree, work / f"durability-{key}") for _ in range(reps)
        )
    results["ratio"] = results["durable"] / results["not_durable"]
    return results
