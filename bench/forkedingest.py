"""A measured prototype: the first snapshot through the command line, its files split with a
forked process, against the same command reading every file itself, and ``tar cf``.

    cd /tmp && .venv/bin/python /path/to/bench/forkedingest.py --size medium --reps 12

The forked side is ``snapstore create`` with its reading step replaced (here, not in the
library): once the scan is done, the process forks; the child reads, hashes and compresses
the last ``--share`` of the files (in path order) into a pack of its own, publishes it and
sends its rows back through a pipe, while the parent reads the rest; the parent then
registers the child's pack, builds the trees and commits as always. It keeps none of the
guarantees a real design would need (a killed child, a failure in it, hard links across the
two shares): it measures whether splitting the per-file work across processes pays on this
machine before anyone builds it. Each round times ``tar cf``, then each side in a new process
with ``sync()`` before each; the figures are medians of the wall time, the CPU time (user and
system, of all processes and threads) and their ratios to ``tar cf``. ``--uncompressed``
adds both sides again with every block stored as it is (codec 0, which every reader takes):
the two levers left toward 3x ``tar cf`` together. See docs/performance.md, "Two processes
for a first snapshot".
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import firstsnap
import trees

UNCOMPRESSED = """
import snapstore.repo.packs as packs
from snapstore.format import codec
packs.compress = lambda data, level=None: (codec.CODEC_NONE, data)
"""
SERIAL = """
import sys
from snapstore.cli import app
app.main(sys.argv[1:])
"""
FORKED = """
import os, pickle, sys
import snapstore.cli.app as app
from snapstore.repo.batch import BlobBatch, PackSeries
from snapstore.repo.packs import read_index
from snapstore.worktree import create, ingestscan
from snapstore.worktree.scanned import ScanResult

SHARE = float(sys.argv.pop(1))
read_all = ingestscan.ingest_scan


def forked(scanned, batch, cache, *, racy_from_ns, skip_unreadable, progress=None, way=None):
    to_read = sorted(scanned.to_read, key=lambda found: found[0])
    split = int(len(to_read) * (1 - SHARE))
    theirs = to_read[split:]
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(reader)
        code = 1
        try:
            share = ScanResult(to_read=theirs, dirs=scanned.dirs, links=dict(scanned.links))
            own = BlobBatch(batch.storage)
            own.packs = PackSeries(batch.storage)
            rows, attrs = read_all(
                share,
                own,
                None,
                racy_from_ns=racy_from_ns,
                skip_unreadable=skip_unreadable,
                way=way,
            )
            own.finish()
            packs = [index.pack_id for index in own.packs.published]
            with os.fdopen(writer, "wb") as out:
                pickle.dump((rows, attrs, share.skipped, packs, own.counted), out)
            code = 0
        finally:
            os._exit(code)
    os.close(writer)
    scanned.to_read = to_read[:split]
    rows, attrs = read_all(
        scanned, batch, cache, racy_from_ns=racy_from_ns, skip_unreadable=skip_unreadable, way=way
    )
    with os.fdopen(reader, "rb") as got:
        their_rows, their_attrs, skipped, packs, counted = pickle.load(got)
    if os.waitpid(pid, 0)[1] != 0:
        raise SystemExit("the forked reader failed")
    for pack_id in packs:
        batch.storage.packs.register(read_index(batch.storage.backend, pack_id))
    batch.counted.extend(counted)
    scanned.skipped.extend(skipped)
    attrs.update(their_attrs)
    return sorted(rows + their_rows, key=lambda row: row[0]), attrs


create.ingest_scan = forked
app.main(sys.argv[1:])
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", choices=sorted(trees.SIZES), default="medium")
    parser.add_argument("--reps", type=int, default=12)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--share", type=float, default=0.5, help="the child's share of files")
    parser.add_argument(
        "--uncompressed",
        action="store_true",
        help="also both sides with every block stored as it is (codec 0)",
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="snapstore-forked-"))
    env = firstsnap.side_env(firstsnap.REPO)
    try:
        tree = work / "tree"
        trees.generate(tree, trees.SIZES[args.size], args.seed)
        package = firstsnap.REPO / "snapstore"
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(package)], check=True)
        firstsnap.check_imported_from(firstsnap.REPO, work)
        time.sleep(2.5)
        store = ["--root", str(work / "store"), "-q", "create", "bench", ".", "--base", str(tree)]
        sides = {
            "serial": [sys.executable, "-m", "snapstore", *store],
            "forked": [sys.executable, "-c", FORKED, str(args.share), *store],
        }
        if args.uncompressed:
            sides["serial uncompressed"] = [sys.executable, "-c", UNCOMPRESSED + SERIAL, *store]
            sides["forked uncompressed"] = [
                sys.executable,
                "-c",
                UNCOMPRESSED + FORKED,
                str(args.share),
                *store,
            ]
        walls: dict[str, list[float]] = {"tar": [], **{side: [] for side in sides}}
        cpus: dict[str, list[float]] = {side: [] for side in sides}
        loads = []
        for _ in range(args.reps):
            archive = work / "tree.tar"
            tar = ["tar", "cf", str(archive), "-C", str(tree), "."]
            walls["tar"].append(firstsnap.measured(tar, {}, work)[0])
            archive.unlink()
            for side, command in sides.items():
                wall, cpu, _out = firstsnap.measured(command, env, work)
                shutil.rmtree(work / "store")
                walls[side].append(wall)
                cpus[side].append(cpu)
            loads.append(os.getloadavg()[0])
        tar_median = statistics.median(walls["tar"])
        print(f"tar cf: median {tar_median * 1000:.0f} ms")
        for side in sides:
            wall, cpu = statistics.median(walls[side]), statistics.median(cpus[side])
            print(
                f"{side}: {wall * 1000:.0f} ms = {wall / tar_median:.2f}x tar cf "
                f"(min {min(walls[side]) * 1000:.0f} ms), CPU {cpu * 1000:.0f} ms"
            )
        print(f"load average (1 min) during the rounds: {min(loads):.2f} to {max(loads):.2f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
