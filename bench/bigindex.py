"""What a new process pays to look up a few digests in a store whose one pack is large.

    .venv/bin/python bench/bigindex.py                      # 200,000 blobs, 10 rounds
    .venv/bin/python bench/bigindex.py --blobs 50000 --rounds 5
    .venv/bin/python bench/bigindex.py --baseline-src /tmp/snapstore-main

Builds a store holding one pack of ``--blobs`` small blobs (what ``gc`` writes: every live
blob of a store in one pack, with one index), then, round after round, starts a new process
that opens the store and checks 5 stored digests and one that is not stored, and reports the
CPU time (user and system, of that process, from opening the store to the last lookup: not
the interpreter's start or the imports) of each way of reading the index, alternated:

- ``lookup``: this code (a large index looked up where it lies in its bytes);
- ``whole``: this code with every index decoded whole into the process's map, as before
  (its bounds set past any index);
- ``baseline``: with ``--baseline-src DIR``, the ``snapstore`` package found in ``DIR``
  (say, ``git archive main snapstore | tar -x -C DIR``), as it is.

CPU time is the figure that does not depend on the machine's load; the medians and the
ratios to ``whole`` are printed.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = "--child"


def build(root: Path, blobs: int) -> list[str]:
    """A store at ``root`` with one pack of ``blobs`` blobs; 5 of its digests and one that
    it does not hold, in hex."""
    from snapstore import SnapStore
    from snapstore.format.hashing import new_hasher
    from snapstore.internals import repository
    from snapstore.repo.packs import PackWriter

    repo = repository(SnapStore(root))
    picked: list[str] = []
    with repo.gc_lock.shared():
        writer = PackWriter(repo.backend)
        for number in range(blobs):
            data = b"blob %d " % number + os.urandom(12)
            hasher = new_hasher(len(data))
            hasher.update(data)
            writer.add(hasher.digest(), data)
            if number % (blobs // 5) == 7 and len(picked) < 5:
                picked.append(hasher.digest().hex())
        writer.publish()
    return [*picked, "ab" * 32]


def child(root: str, mode: str, digests: list[str]) -> None:
    """Open the store and look the digests up; print the CPU seconds that took and how many
    digests the process's map holds one by one."""
    if mode == "whole":
        from snapstore.format import packfile
        from snapstore.repo import packmap

        packfile.LAZY_ENTRIES = 1 << 62
        packmap.LARGE_PACK_ENTRIES = 1 << 62
    from snapstore import SnapStore
    from snapstore.internals import repository

    started = resource.getrusage(resource.RUSAGE_SELF)
    blobs = repository(SnapStore(root)).blobs
    found = [blobs.has(bytes.fromhex(digest)) for digest in digests]
    ended = resource.getrusage(resource.RUSAGE_SELF)
    if found != [True] * (len(digests) - 1) + [False]:
        raise SystemExit(f"wrong lookups: {found}")
    cpu = (ended.ru_utime - started.ru_utime) + (ended.ru_stime - started.ru_stime)
    where = blobs.packs.by_digest()
    mapped = getattr(where, "mapped", None)
    print(json.dumps({"cpu": cpu, "mapped": len(where) if mapped is None else mapped}))


def run_child(root: Path, mode: str, digests: list[str], source: str | None) -> dict[str, float]:
    env = dict(os.environ)
    if source is not None:
        env["PYTHONPATH"] = source
    output = subprocess.run(
        [sys.executable, __file__, CHILD, str(root), mode, *digests],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    result: dict[str, float] = json.loads(output)
    return result


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == CHILD:
        child(sys.argv[2], sys.argv[3], sys.argv[4:])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blobs", type=int, default=200_000, help="blobs in the pack")
    parser.add_argument("--rounds", type=int, default=10, help="runs of each way (default 10)")
    parser.add_argument("--baseline-src", help="a directory holding another snapstore package")
    options = parser.parse_args()
    modes = ["lookup", "whole"] + (["baseline"] if options.baseline_src else [])
    with tempfile.TemporaryDirectory(prefix="snapstore-bigindex-") as work:
        root = Path(work) / "store"
        started = time.perf_counter()
        digests = build(root, options.blobs)
        (index,) = (root / "packs").glob("*.idx")
        print(
            f"store: one pack of {options.blobs:,} blobs, index {index.stat().st_size:,} bytes "
            f"(built in {time.perf_counter() - started:.1f} s)"
        )
        cpu: dict[str, list[float]] = {mode: [] for mode in modes}
        mapped: dict[str, float] = {}
        for round_number in range(options.rounds):
            order = modes if round_number % 2 == 0 else modes[::-1]
            for mode in order:
                source = options.baseline_src if mode == "baseline" else None
                result = run_child(root, mode if mode != "baseline" else "as-is", digests, source)
                cpu[mode].append(result["cpu"])
                mapped[mode] = result["mapped"]
    whole = statistics.median(cpu["whole"])
    print("CPU seconds of a new process: open the store, look up 5 digests and 1 miss")
    for mode in modes:
        median = statistics.median(cpu[mode])
        print(
            f"  {mode:9} median {median:.4f} s  min {min(cpu[mode]):.4f}  "
            f"max {max(cpu[mode]):.4f}  ({median / whole:.3f}x whole; "
            f"digests mapped one by one: {int(mapped[mode]):,})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
