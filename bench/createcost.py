"""What a small create costs besides its flushes, by what does not depend on the machine's
load: the calling thread's CPU time per create (``time.thread_time``, p50), with flushes and
without (``durable=False``), Python function calls per create (cProfile), and the same for the
floor of ``bench/commits.py`` (a minimal durable write of the same shape).

    .venv/bin/python bench/createcost.py                       # this checkout, 300 creates
    .venv/bin/python bench/createcost.py --against /path/to/other/checkout --rounds 5

Each create records 5 files of a 50-file project, one of them edited just before it (what
``bench/commits.py`` does), with automatic folding off. ``--against DIR`` runs every
measurement also with the package of another checkout (``DIR/snapstore``) first on the
import path, the two alternating round after round in new processes, and prints both: the
way to compare a change with the code before it on a machine other jobs share.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PROJECT_FILES = 50


def checkpoint_paths(n: int) -> list[str]:
    """The 5 files of the ``n``-th create (as ``bench/commits.py`` picks them)."""
    return [f"d{i % 5}/f{i}.py" for i in ((n * 5 + k) % PROJECT_FILES for k in range(5))]


def floor_cpu(work: Path, calls: int) -> float:
    """The floor's p50 CPU time per call (ms): ``bench/commits.py``'s floor, timed by the
    calling thread's CPU time."""
    from commits import floor_series

    found = floor_series(work, calls, os.urandom(700), os.urandom(350), clock=time.thread_time)
    return float(found["p50_ms"])


def measure(
    creates: int, durable: bool, profile: bool, *, warm: int = 30, settle: float = 2.1
) -> dict[str, Any]:
    """One series in this process: CPU p50 per create (ms), and with ``profile`` the
    function calls per create. ``warm`` creates go first, untimed, ``settle`` seconds after
    the project is written (its files then lie outside the racy window, as a bridge's do)."""
    os.environ["SNAPSTORE_FOLD_THRESHOLD"] = "off"
    import snapstore
    from snapstore import SnapStore

    with tempfile.TemporaryDirectory(prefix="snapstore-bench-createcost-") as scratch:
        work = Path(scratch)
        project = work / "project"
        for index in range(PROJECT_FILES):
            path = project / f"d{index % 5}" / f"f{index}.py"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"# file {index}\n" + "x = 1\n" * 40)
        time.sleep(settle)
        store = SnapStore(work / "store", durable=durable)
        profiler = cProfile.Profile() if profile else None
        samples = []
        for n in range(warm + creates):
            paths = checkpoint_paths(n)
            (project / paths[0]).write_text(f"# edit {n}\n" + "x = 2\n" * 40)
            timed = n >= warm
            if timed and profiler is not None:
                profiler.enable()
            started = time.thread_time()
            store.create("bridge", None, paths, base_dir=project)
            if timed:
                samples.append(time.thread_time() - started)
                if profiler is not None:
                    profiler.disable()
        store.close()
        result: dict[str, Any] = {
            "package": str(Path(snapstore.__file__).parent),
            "cpu_p50_ms": round(statistics.median(samples) * 1000, 3),
            "floor_cpu_p50_ms": round(floor_cpu(work / "floor", creates), 3) if durable else None,
        }
    if profiler is not None:
        result["calls_per_create"] = round(pstats.Stats(profiler).total_calls / creates)  # type: ignore[attr-defined]
    return result


def run(
    package_dir: str | None, args: argparse.Namespace, durable: bool, profile: bool
) -> dict[str, Any]:
    """``measure`` in a new process, with ``package_dir`` first on the import path."""
    env = dict(os.environ)
    if package_dir is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_dir, env.get("PYTHONPATH")]))
    command = [sys.executable, __file__, "--one", "--creates", str(args.creates)]
    command += ["--warm", str(args.warm), "--settle", str(args.settle)]
    command += ["--durable"] if durable else []
    command += ["--profile"] if profile else []
    out = subprocess.run(command, env=env, capture_output=True, text=True, check=True).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--creates", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--against", help="another checkout, measured alternately")
    parser.add_argument("--warm", type=int, default=30, help="untimed creates first")
    parser.add_argument(
        "--settle",
        type=float,
        default=2.1,
        help="seconds between writing the project and the first create",
    )
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--durable", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--profile", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        found = measure(
            args.creates, args.durable, args.profile, warm=args.warm, settle=args.settle
        )
        print(json.dumps(found))
        return 0
    sources: dict[str, str | None] = {"this": None}
    if args.against:
        sources = {"against": str(Path(args.against).resolve()), **sources}
    found: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for _ in range(args.rounds):
        for label, package_dir in sources.items():
            for series, durable, profile in (
                ("durable", True, False),
                ("no flush", False, False),
                ("calls", False, True),
            ):
                result = run(package_dir, args, durable, profile)
                found.setdefault((label, series), []).append(result)
    for (label, series), results in found.items():
        if series == "calls":
            calls = [r["calls_per_create"] for r in results]
            print(f"{label:8} function calls per create: {calls}")
            continue
        cpu = [r["cpu_p50_ms"] for r in results]
        line = f"{label:8} {series:8} CPU p50 per create {statistics.median(cpu):.3f} ms {cpu}"
        if series == "durable":
            floors = [r["floor_cpu_p50_ms"] for r in results]
            line += f"; floor {statistics.median(floors):.3f} ms"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
