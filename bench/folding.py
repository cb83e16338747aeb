"""Benchmark small packs folding themselves: the checkpoint series of ``bench/commits.py``
(5 files of a 50-file project, one edited before each durable create) run twice side by
side, with automatic folding off and on, reporting per block of creates the p50/p99 of a
create and the packs in the store at the block's end, then how long a full ``gc`` takes.

    .venv/bin/python bench/folding.py                       # 2,000 creates per series
    .venv/bin/python bench/folding.py --creates 400 --out result.json

The fold thread runs in the process that makes the creates, so its CPU time competes with
theirs: the per-block p99 shows what that costs a bridge on this machine. Each create leaves
a small pack of its own, as one-shot commands (``snapstore create``) do: a long-lived process
appends its creates to one pack (``--appending`` runs the series so), and small packs pile up
only from processes that each write a few.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from commits import blocks, edit, make_project, ms

from snapstore import SnapStore
from snapstore.internals import autofold, repository


def pack_count(root: Path) -> int:
    return sum(1 for name in os.listdir(root / "packs") if name.endswith(".pack"))


def series(
    root: Path, project: Path, creates: int, block: int, threshold: int, *, appending: bool
) -> dict[str, Any]:
    """The series with ``fold_threshold=threshold`` (0: no folding), then a full gc; unless
    ``appending``, each create leaves a pack of its own."""
    store = SnapStore(root, fold_threshold=threshold)
    samples, packs = [], []
    for n in range(creates):
        paths = edit(project, n, f"fold-{threshold}")
        started = time.perf_counter()
        store.create("bridge", None, paths, base_dir=project)
        samples.append(time.perf_counter() - started)
        if not appending:
            repository(store).blobs.close()
        if (n + 1) % block == 0 or n + 1 == creates:
            packs.append(pack_count(root))
    autofold(store).join()
    packs_before_gc = pack_count(root)
    started = time.perf_counter()
    store.gc()
    gc_seconds = time.perf_counter() - started
    store.close()
    found = blocks(samples, block)
    for item, count in zip(found, packs, strict=True):
        item["packs"] = count
    return {
        "fold_threshold": threshold,
        "p50_ms": ms(statistics.median(samples)),
        "blocks": found,
        "fold_steps": autofold(store).steps,
        "longest_hold_ms": ms(autofold(store).longest_hold),
        "packs_before_gc": packs_before_gc,
        "gc_ms": ms(gc_seconds),
        "packs_after_gc": pack_count(root),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--creates", type=int, default=2000, help="creates per series")
    parser.add_argument("--block", type=int, default=200, help="creates per reported block")
    parser.add_argument("--threshold", type=int, default=32, help="fold threshold when on")
    parser.add_argument(
        "--appending",
        action="store_true",
        help="append every create to the process's pack (a long-lived bridge)",
    )
    parser.add_argument("--out", type=Path, help="write the result as JSON here")
    args = parser.parse_args(argv)
    results = []
    with tempfile.TemporaryDirectory(prefix="snapstore-bench-folding-") as scratch:
        work = Path(scratch)
        make_project(work / "project")
        for threshold in (0, args.threshold):
            root = work / f"store-{threshold}"
            results.append(
                series(
                    root,
                    work / "project",
                    args.creates,
                    args.block,
                    threshold,
                    appending=args.appending,
                )
            )
    for result in results:
        label = "folding off" if result["fold_threshold"] == 0 else "folding on "
        print(
            f"{label}: p50 {result['p50_ms']} ms, {result['fold_steps']} fold steps "
            f"(longest barrier {result['longest_hold_ms']} ms), "
            f"{result['packs_before_gc']} packs, gc {result['gc_ms']} ms"
        )
        for item in result["blocks"]:
            print(
                f"  {item['first']:5}-{item['last']:<5} p50 {item['p50_ms']:7.2f}  "
                f"p99 {item['p99_ms']:7.2f} ms  packs {item['packs']}"
            )
    print(f"load average at the end: {[round(x, 2) for x in os.getloadavg()]}")
    result_doc = {"meta": {"python": sys.version.split()[0]}, "series": results}
    if args.out:
        args.out.write_text(json.dumps(result_doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
