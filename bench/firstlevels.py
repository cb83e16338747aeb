"""What the zstd level of a create's blocks costs and saves: the first snapshot of the medium
tree through the command line (wall, CPU, packs' bytes, against ``tar cf``), and a replay of
a git history's last states through the library (CPU of the creates, packs' bytes before and
after gc).

    cd /tmp && .venv/bin/python bench/firstlevels.py --reps 6
    cd /tmp && .venv/bin/python bench/firstlevels.py --history /tmp/flask-history --states 100

Each level is a replacement of the packs' ``compress`` in the process that runs the create
(the code is not changed; ``none`` stores every block as it is, codec 0). The levels run in
alternation, ``tar cf`` first in each round, with ``sync()`` before each command, so a busy
moment of the shared machine hits each level alike. The figures to compare are ratios to
``tar cf`` in one run, and the CPU time of the command (user and system, all threads).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import trees
from replay import Replay, disk_usage, first_parent_commits

REPO = Path(__file__).resolve().parents[1]
PATCH = """
import sys
level = sys.argv.pop(1)
import snapstore.repo.packs as packs
from snapstore.format import codec
if level == "none":
    packs.compress = lambda data, level=None: (codec.CODEC_NONE, data)
else:
    chosen = int(level)
    packs.compress = lambda data, level=None: codec.compress(data, chosen)
"""
COMMAND_LINE = (
    PATCH
    + """
from snapstore.cli import app
app.main(sys.argv[1:])
"""
)
LEVELS = ("1", "-1", "-3", "-5", "-10", "none")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", choices=sorted(trees.SIZES), default="medium")
    parser.add_argument("--reps", type=int, default=6, help="rounds of the first snapshot")
    parser.add_argument("--levels", default=",".join(LEVELS))
    parser.add_argument("--history", type=Path, help="a git repository to replay")
    parser.add_argument("--states", type=int, default=100)
    return parser.parse_args(argv)


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measured(command: list[str], cwd: Path) -> tuple[float, float]:
    """Wall and CPU seconds of one run of ``command`` in ``cwd``."""
    os.sync()
    env = dict(os.environ, PYTHONPATH=str(REPO))
    cpu, started = children_cpu(), time.perf_counter()
    subprocess.run(command, env=env, cwd=cwd, check=True, capture_output=True)
    return time.perf_counter() - started, children_cpu() - cpu


def packs_bytes(root: Path) -> int:
    return disk_usage([root / "packs"])[0]


def first_snapshots(args: argparse.Namespace, levels: list[str], work: Path) -> None:
    tree = work / "tree"
    trees.generate(tree, trees.SIZES[args.size], 1)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "snapstore")], check=True)
    time.sleep(2.5)  # older than the stat cache's racy window, as in bench/run.py
    tar: list[float] = []
    found: dict[str, dict[str, list[float]]] = {
        level: {"wall": [], "cpu": [], "bytes": []} for level in levels
    }
    for step in range(args.reps):
        archive = work / "tree.tar"
        tar.append(measured(["tar", "cf", str(archive), "-C", str(tree), "."], work)[0])
        archive.unlink()
        for level in levels[step % len(levels) :] + levels[: step % len(levels)]:
            root = work / "store"
            command = [sys.executable, "-c", COMMAND_LINE, level, "--root", str(root), "-q"]
            command += ["create", "bench", ".", "--name", "s1", "--base", str(tree)]
            wall, cpu = measured(command, work)
            found[level]["wall"].append(wall)
            found[level]["cpu"].append(cpu)
            found[level]["bytes"].append(packs_bytes(root))
            shutil.rmtree(root)
    median_tar = statistics.median(tar)
    raw = disk_usage([tree])[0]
    print(f"{args.size} tree: {raw / 1e6:.1f} MB; tar cf median {median_tar * 1000:.0f} ms")
    print("| level | command line wall | / tar cf | CPU | packs | tree / packs |")
    print("|---|---|---|---|---|---|")
    for level in levels:
        wall = statistics.median(found[level]["wall"])
        cpu = statistics.median(found[level]["cpu"])
        stored = statistics.median(found[level]["bytes"])
        print(
            f"| {level} | {wall * 1000:.0f} ms | {wall / median_tar:.2f}x | "
            f"{cpu * 1000:.0f} ms | {stored / 1e6:.1f} MB | {raw / stored:.2f}x |"
        )
    print(f"load average (1 min) at the end: {os.getloadavg()[0]:.2f}")


def history(args: argparse.Namespace, levels: list[str], work: Path) -> None:
    """Replay the last ``--states`` first-parent commits once, snapshotting each state into
    one store per level (levels in a rotating order), then gc each store."""
    commits = first_parent_commits(args.history, None, args.states)
    replay = Replay(args.history, work, work / "history-tree")
    cpu: dict[str, float] = dict.fromkeys(levels, 0.0)
    first: dict[str, float] = {}
    roots = {level: work / f"history-{level.replace('-', 'm')}" for level in levels}
    for index, commit in enumerate(commits):
        replay.materialize(commit)
        for level in levels[index % len(levels) :] + levels[: index % len(levels)]:
            command = [sys.executable, "-c", COMMAND_LINE, level, "--root", str(roots[level])]
            command += ["-q", "create", "bench", ".", "--name", f"s{index + 1}"]
            command += ["--base", str(replay.tree)]
            taken = measured(command, work)[1]
            cpu[level] += taken
            if index == 0:
                first[level] = packs_bytes(roots[level])
    files, raw = replay.stats()
    print(f"\n{args.history.name}: last {len(commits)} states", end=" ")
    print(f"(the last: {files} files, {raw / 1e6:.1f} MB)")
    print("| level | first state: packs | all states: CPU of the creates | packs | after gc |")
    print("|---|---|---|---|---|")
    for level in levels:
        before = packs_bytes(roots[level])
        subprocess.run(
            [sys.executable, "-m", "snapstore", "--root", str(roots[level]), "-q", "gc"],
            env=dict(os.environ, PYTHONPATH=str(REPO)),
            cwd=work,
            check=True,
            capture_output=True,
        )
        after = packs_bytes(roots[level])
        print(
            f"| {level} | {first[level] / 1e6:.2f} MB | {cpu[level]:.2f} s | "
            f"{before / 1e6:.2f} MB | {after / 1e6:.2f} MB |"
        )


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    levels = args.levels.split(",")
    work = Path(tempfile.mkdtemp(prefix="snapstore-levels-"))
    try:
        if args.history is None:
            first_snapshots(args, levels, work)
        else:
            history(args, levels, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
