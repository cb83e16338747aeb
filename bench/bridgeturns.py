"""Bridges taking turns in one process: each its own session and project (the loop of
``bench/commits.py``), all into one root or one root each, one create of each bridge in turn.
No other process runs, so what a shared root adds to a create is only the work of the
creates themselves (loading the segments the other bridges appended): counted exactly by an
instruction counter, whatever the machine's load.

    valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \\
        .venv/bin/python bench/bridgeturns.py --bridges 4 --creates 60 --shared
    (the same without --shared, and with --creates 0 for the cost of starting)

Run it from outside the checkout, with ``PYTHONPATH`` naming the code to measure.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from commits import make_project

from snapstore import SnapStore


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bridges", type=int, default=4)
    parser.add_argument("--creates", type=int, default=60, help="creates per bridge")
    parser.add_argument("--shared", action="store_true", help="all bridges in one root")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bridge-turns-"))
    try:
        projects = [work / f"project-{n}" for n in range(args.bridges)]
        stores = []
        for number, project in enumerate(projects):
            make_project(project)
            root = work / ("root" if args.shared else f"root-{number}")
            stores.append(SnapStore(str(root)))
        for n in range(args.creates):
            for number, (store, project) in enumerate(zip(stores, projects, strict=True)):
                paths = [f"d{i % 5}/f{i}.py" for i in ((n * 5 + k) % 50 for k in range(5))]
                (project / paths[0]).write_text(f"# bridge {number} edit {n}\n" + "x = 2\n" * 40)
                store.create(f"bridge-{number}", None, paths, base_dir=project)
        for store in stores:
            store.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
