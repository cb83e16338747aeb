"""How long the ``snapstore`` command takes to start, against a bare Python start.

    .venv/bin/python bench/startup.py               # medians of 20 runs of each command
    .venv/bin/python bench/startup.py --max-ratio 2  # exit 1 if --version takes over 2x
    cd /tmp && .venv/bin/python bench/startup.py --baseline /tmp/old   # against older code

Runs each command in turn, round after round (so a busy moment of the machine hits all of them
alike), and prints the median wall time and CPU time of each, and their ratios to
``python -c pass`` with the same interpreter. ``snapstore`` is the console script installed
next to this Python. ``--max-ratio`` checks the wall-time ratio. A ``create`` of one small file
into a new store (what a bridge's first checkpoint costs besides its files) is timed through
``python -m snapstore``, for this checkout and, with ``--baseline``, for another checkout run
with it on ``PYTHONPATH`` (run from outside this checkout: ``python -m`` imports from the
working directory first). Modules are compiled first, as pip does at install.
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


def create_command(python: str, root: str, project: str) -> list[str]:
    """``python -m snapstore`` creating a snapshot of ``project`` in a store at ``root``."""
    return [python, "-m", "snapstore", "--root", root, "-q", "create", "s", ".", "--base", project]


def timed_create(command: list[str], root: str, checkout: Path) -> tuple[float, float]:
    """``timed_run`` of ``command`` with ``checkout`` on ``PYTHONPATH``, into a new store."""
    shutil.rmtree(root, ignore_errors=True)
    env = dict(os.environ, PYTHONPATH=str(checkout))
    started = time.perf_counter()
    process = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, env=env, cwd=os.path.dirname(root)
    )
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{command} failed with {checkout} on PYTHONPATH")
    return wall, usage.ru_utime + usage.ru_stime


def require_imported_from(python: str, checkout: Path, work: str) -> None:
    """Stop unless ``checkout`` on ``PYTHONPATH`` is the snapstore a timed create imports
    (run from ``work``: ``python -m`` puts the working directory first on the path)."""
    found = subprocess.run(
        [python, "-c", "import snapstore; print(snapstore.__file__)"],
        env=dict(os.environ, PYTHONPATH=str(checkout)),
        cwd=work,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if not Path(found).resolve().is_relative_to(checkout):
        raise SystemExit(f"a create with {checkout} on PYTHONPATH imports {found}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="runs of each command (default 20)")
    parser.add_argument("--snapstore", help="the snapstore script to time (default: installed)")
    parser.add_argument(
        "--max-ratio",
        type=float,
        help="exit 1 if snapstore --version takes longer than this many times python -c pass",
    )
    parser.add_argument("--baseline", type=Path, help="a checkout of older code to compare")
    options = parser.parse_args()
    checkouts = {"snapstore create (one file, new store)": Path(__file__).resolve().parents[1]}
    if options.baseline is not None:
        checkouts["baseline: the same create"] = options.baseline.resolve()
    for checkout in checkouts.values():
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(checkout / "snapstore")])
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
        project = os.path.join(work, "project")
        os.mkdir(project)
        with open(os.path.join(project, "notes.txt"), "w") as file:
            file.write("a small file\n")
        new_root = os.path.join(work, "new-store")
        create = create_command(python, new_root, project)
        for checkout in checkouts.values():
            require_imported_from(python, checkout, work)
        for command in commands.values():
            timed_run(command)
        labels = [*commands, *checkouts]
        walls: dict[str, list[float]] = {label: [] for label in labels}
        cpus: dict[str, list[float]] = {label: [] for label in labels}
        for _ in range(options.runs):
            for label, command in commands.items():
                wall, cpu = timed_run(command)
                walls[label].append(wall)
                cpus[label].append(cpu)
            for label, checkout in checkouts.items():
                wall, cpu = timed_create(create, new_root, checkout)
                walls[label].append(wall)
                cpus[label].append(cpu)
    wall_medians = {label: statistics.median(times) for label, times in walls.items()}
    cpu_medians = {label: statistics.median(times) for label, times in cpus.items()}
    wall_base, cpu_base = wall_medians["python -c pass"], cpu_medians["python -c pass"]
    width = max(len(label) for label in walls)
    print(f"medians of {options.runs} runs each, {python}")
    print(f"{'command':<{width}}  {'wall':>8}  {'ratio':>6}  {'cpu':>8}  {'ratio':>6}")
    for label in walls:
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
