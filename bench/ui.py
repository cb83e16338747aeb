"""How fast the web UI's heavy pages render on a big store.

    .venv/bin/python bench/ui.py                      # 5,000 checkpoints, 2,500 files
    .venv/bin/python bench/ui.py --checkpoints 500 --files 300   # a quick run

Builds (once, in a temp directory, with durable=False) a session of N checkpoints of a small
project and a session of two checkpoints of a project of M files that all changed, then times
the pages through Starlette's TestClient (in process: the figure is the server's work, not the
network's): the session page (first page of the timeline), the change counts its script
fetches for one page, the polling request, and the checkpoint page of the big change (the file
tree of every changed path and the first page of diffs). Prints the median of 5 runs of each,
and its ratio to a baseline measured in the same run: listing the long session through the
library, which the session page cannot avoid (timings on a shared machine are noisy; the
ratio less so).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from helpers.webui import ui_client

from snapstore import SnapStore


def build(root: Path, work: Path, checkpoints: int, files: int) -> None:
    """The two sessions described above."""
    store = SnapStore(root, durable=False)
    small = work / "small"
    small.mkdir()
    for number in range(checkpoints):
        (small / "notes.txt").write_text(f"turn {number}\n")
        store.create("long", f"turn-{number:05d}", ["."], base_dir=small)
    big = work / "big"
    for version in ("one", "two"):
        for number in range(files):
            path = big / f"pkg{number % 50:02d}" / f"module{number:04d}.py"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"# module {number}\nVALUE = '{version}'\n" + "pass\n" * 20)
        store.create("wide", version, ["."], base_dir=big)


def median_seconds(call: Callable[[], object], runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoints", type=int, default=5000)
    parser.add_argument("--files", type=int, default=2500)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        started = time.perf_counter()
        build(work / "store", work, args.checkpoints, args.files)
        print(f"built the store in {time.perf_counter() - started:.1f} s")
        client = ui_client(SnapStore(work / "store"))
        names = "&".join(f"n=turn-{n:05d}" for n in range(args.checkpoints - 10, args.checkpoints))

        def get(url: str) -> Callable[[], object]:
            def fetch() -> object:
                response = client.get(url)
                assert response.status_code == 200, (url, response.status_code)
                return response

            return fetch

        figures = {
            f"session page, {args.checkpoints} checkpoints": get("/session?s=long"),
            "change counts of 10 timeline rows": get(f"/api/changes?s=long&{names}"),
            "timeline poll (/api/head)": get("/api/head?s=long"),
            f"checkpoint page, {args.files} changed files": get("/checkpoint?s=wide&n=two"),
            "sessions page": get("/"),
        }
        store = SnapStore(work / "store")
        baseline = median_seconds(lambda: store.list("long"))
        print(f"{'baseline: store.list() of the long session':45} {baseline * 1000:8.1f} ms")
        for label, call in figures.items():
            seconds = median_seconds(call)
            print(f"{label:45} {seconds * 1000:8.1f} ms  ({seconds / baseline:5.1f}x the baseline)")


if __name__ == "__main__":
    main()
