"""Python bytecodes and calls of a first snapshot, per file read: a count that does not move
with the machine's load, for changes that trim the per-file work of the calling thread.

    cd /tmp && .venv/bin/python /path/to/bench/ingestcount.py --size medium
    cd /tmp && PYTHONPATH=<older checkout> .venv/bin/python /path/to/bench/ingestcount.py

Builds the bench tree, scans it, then counts (``sys.settrace`` with opcode events) every
bytecode the calling thread runs in ``ingest_scan`` (reading, hashing and packing the files)
and in a whole ``SnapStore.create`` of the same tree into a new store, by function. Run it
outside a checkout (``python`` imports from the working directory before ``PYTHONPATH``).
The threads that compress or read large files aside are not traced; nor is time in C (the
system calls, BLAKE3, zstd): time those with ``bench/firstsnap.py``.
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from types import FrameType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import trees

import snapstore
from snapstore import SnapStore, internals
from snapstore.repo.batch import BlobBatch
from snapstore.worktree.ingestscan import ingest_scan
from snapstore.worktree.scan import Scanner
from snapstore.worktree.statcache import StatCache


class Counter:
    """Bytecodes and calls by function while tracing."""

    def __init__(self) -> None:
        self.opcodes: collections.Counter[str] = collections.Counter()
        self.calls: collections.Counter[str] = collections.Counter()

    def __call__(self, frame: FrameType, event: str, arg: Any) -> Counter:
        code = frame.f_code
        key = f"{os.path.basename(code.co_filename)}:{code.co_name}"
        if event == "call":
            self.calls[key] += 1
            frame.f_trace_opcodes = True
        elif event == "opcode":
            self.opcodes[key] += 1
        return self

    def traced(self, run: Any) -> None:
        sys.settrace(self)
        try:
            run()
        finally:
            sys.settrace(None)


def report(title: str, counted: Counter, files: int, top: int) -> None:
    total = sum(counted.opcodes.values())
    calls = sum(counted.calls.values())
    print(
        f"{title}: {total} bytecodes, {calls} calls; per file read {total / files:.1f}, "
        f"{calls / files:.1f}"
    )
    for key, count in counted.opcodes.most_common(top):
        print(f"  {count / files:8.1f} {counted.calls[key] / files:6.2f} calls  {key}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", choices=sorted(trees.SIZES), default="medium")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--top", type=int, default=15, help="functions shown")
    args = parser.parse_args(argv)
    print(f"snapstore from {Path(snapstore.__file__).parent}")
    work = Path(tempfile.mkdtemp(prefix="snapstore-ingestcount-"))
    try:
        tree = work / "tree"
        trees.generate(tree, trees.SIZES[args.size], args.seed)
        time.sleep(2.5)  # older than the stat cache's racy window: each file read once
        store = SnapStore(work / "store")
        repo = internals.repository(store)
        cache = StatCache(repo.backend, str(tree), time.time_ns())
        batch = BlobBatch(repo.blobs)
        scanner = Scanner(str(tree), stat_files=False)
        scanner.add(".")
        files = len(scanner.result.to_read)
        ingest = Counter()
        ingest.traced(
            lambda: ingest_scan(
                scanner.result,
                batch,
                cache,
                racy_from_ns=cache.trust_before_ns,
                skip_unreadable=False,
            )
        )
        batch.abort()
        report("ingest_scan", ingest, files, args.top)
        whole = Counter()
        fresh = SnapStore(work / "fresh")
        whole.traced(lambda: fresh.create("bench", "s1", ["."], base_dir=str(tree)))
        report("the whole create", whole, files, args.top)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
