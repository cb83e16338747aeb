"""How long the ``snapstore`` command takes to start, against a bare Python start.

    .venv/bin/python bench/startup.py               # medians of 20 runs of each command
    .venv/bin/python bench/startup.py --max-ratio 2  # exit 1 if --version takes over 2x

Runs each command in turn, round after round (so a busy moment of the machine hits all of them
alike), and prints the median wall time and CPU time of each, and their ratios to
``python -c pass`` with the same interpreter. ``snapstore`` is the console script installed
next to this Python. ``--max-ratio`` checks the wall-time ratio.
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


def console_script() -> str:
    """The ``snapstore`` script installed with this interpreter (or the first on PATH)."""
    found = shutil.which("snapstore", path=str(Path(sys.executable).parent)) or shutil.which(
        "snapstore"
    )
    if found is None:
        raise SystemExit("no snapstore console script: pip install -e . first")
    return found


def timed_run(command: list[str]) -> tuple[float, float]:
    """Wall seconds one run of ``command`` takes, start to exit, and the CPU seconds (user and
    system) it used; output discarded. CPU time is the steadier figure on a shared machine,
    where wall time also counts waiting for a core."""
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_utime + usage.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="runs of each command (default 20)")
    parser.add_argument("--snapstore", help="the snapstore script to time (default: installed)")
    parser.add_argument(
        "--max-ratio",
        type=float,
        help="exit 1 if snapstore --version takes longer than this many times python -c pass",
    )
    options = parser.parse_args()
    script = options.snapstore or console_script()
    python = sys.executable
    with tempfile.TemporaryDirectory(prefix="snapstore-startup-") as work:
        root = os.path.join(work, "store")
        subprocess.run(
            [python, "-c", f"import snapstore; snapstore.SnapStore({root!r})"], check=True
        )
        commands = {
            "python -c pass": [python, "-c", "pass"],
            "python -c 'import snapstore'": [python, "-c", "import snapstore"],
            "snapstore --version": [script, "--version"],
            "snapstore --help": [script, "--help"],
            "snapstore list (empty store)": [script, "--root", root, "list"],
        }
        for command in commands.values():
            timed_run(command)
        walls: dict[str, list[float]] = {label: [] for label in commands}
        cpus: dict[str, list[float]] = {label: [] for label in commands}
        for _ in range(options.runs):
            for label, command in commands.items():
                wall, cpu = timed_run(command)
                walls[label].append(wall)
                cpus[label].append(cpu)
    wall_medians = {label: statistics.median(times) for label, times in walls.items()}
    cpu_medians = {label: statistics.median(times) for label, times in cpus.items()}
    wall_base, cpu_base = wall_medians["python -c pass"], cpu_medians["python -c pass"]
    width = max(len(label) for label in commands)
    print(f"medians of {options.runs} runs each, {python}")
    print(f"{'command':<{width}}  {'wall':>8}  {'ratio':>6}  {'cpu':>8}  {'ratio':>6}")
    for label in commands:
        wall, cpu = wall_medians[label], cpu_medians[label]
        print(
            f"{label:<{width}}  {wall * 1000:5.1f} ms  {wall / wall_base:5.2f}x  "
            f"{cpu * 1000:5.1f} ms  {cpu / cpu_base:5.2f}x"
        )
    ratio = wall_medians["snapstore --version"] / wall_base
    if options.max_ratio is not None and ratio > options.max_ratio:
        print(f"snapstore --version: {ratio:.2f}x is over {options.max_ratio:g}x", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
