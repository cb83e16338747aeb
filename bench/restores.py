"""Restores into an empty directory, side by side: this checkout, an older one, and
``git archive | tar x`` of the same commits, in alternation (history replay target H5).

    .venv/bin/python bench/history.py --repo REPO --states 100 --tools snapstore,git --work W
    .venv/bin/python bench/restores.py --work W --baseline /tmp/old --rounds 10

``--work`` is a work directory kept by ``bench/history.py`` (its snapstore store and shadow
git repository); ``--baseline`` a directory holding an older ``snapstore`` package (for
example ``git archive main snapstore | tar x -C /tmp/old``), run with it on ``PYTHONPATH``.
Each round runs, for each side in turn (the order alternating), a new process that imports
snapstore, then restores each chosen state with a new ``SnapStore`` into a new directory, as
``bench/history.py`` does; and ``git archive <commit> | tar x`` of the same states, with
``sync()`` before each. It reports the medians of the restores after a process's first (and
of the first apart: it imports the restore code), in wall time, CPU time of the calling
thread and of the whole process (the steadier figures where other jobs share the cores), and
the sync calls of one restore counted with ``strace -f -c``. The ratio to compare is the
wall time over git's within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import history_tools

REPO = Path(__file__).resolve().parents[1]
SESSION = "bench"
CHILD = """
import json, os, shutil, sys, time
from snapstore import SnapStore
root, out = sys.argv[1], sys.argv[2]
found = []
for label in sys.argv[3:]:
    dest = os.path.join(out, label)
    os.sync()
    cpu, thread, started = time.process_time(), time.thread_time(), time.perf_counter()
    SnapStore(root).restore("bench", label, dest)
    found.append([time.perf_counter() - started, time.thread_time() - thread,
                  time.process_time() - cpu])
    shutil.rmtree(dest)
print(json.dumps(found))
"""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, required=True, help="kept by bench/history.py")
    parser.add_argument("--baseline", type=Path, help="a directory holding older snapstore code")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--states", type=int, default=5, help="states restored per process")
    parser.add_argument("--json", type=Path, help="write every sample here")
    return parser.parse_args(argv)


def labelled_commits(git_env: dict[str, str]) -> dict[str, str]:
    """The shadow git's commits by the label of their snapshot (their subject)."""
    log = subprocess.run(
        ["git", "log", "--format=%H %s"], env=git_env, capture_output=True, text=True, check=True
    ).stdout
    return {
        subject: commit for commit, subject in (line.split(" ", 1) for line in log.splitlines())
    }


def chosen_states(labels: dict[str, str], count: int) -> list[str]:
    """``count`` snapshot labels spread over the replay, the last first."""
    numbers = sorted(int(label[1:]) for label in labels if label[1:].isdigit())
    picks = [numbers[round(i * (len(numbers) - 1) / max(count - 1, 1))] for i in range(count)]
    return [f"s{number}" for number in sorted(set(picks), reverse=True)]


def git_restore(git_env: dict[str, str], commit: str, dest: Path) -> float:
    dest.mkdir()
    os.sync()
    started = time.perf_counter()
    archive = subprocess.Popen(["git", "archive", commit], env=git_env, stdout=subprocess.PIPE)
    subprocess.run(["tar", "x", "-C", str(dest)], stdin=archive.stdout, check=True)
    assert archive.stdout is not None
    archive.stdout.close()
    if archive.wait():
        raise RuntimeError("git archive failed")
    seconds = time.perf_counter() - started
    shutil.rmtree(dest)
    return seconds


def side_env(checkout: Path | None) -> dict[str, str]:
    """The environment that imports ``checkout``'s snapstore (None: this checkout's)."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if checkout is not None:
        env["PYTHONPATH"] = str(checkout)
    return env


def restores(store: Path, out: Path, states: list[str], env: dict[str, str]) -> list[list[float]]:
    """Run the restores of one process (outside any checkout: ``-c`` imports from the working
    directory first, which would override ``PYTHONPATH``)."""
    command = [sys.executable, "-c", CHILD, str(store), str(out), *states]
    done = subprocess.run(command, env=env, cwd=out, capture_output=True, text=True, check=True)
    samples: list[list[float]] = json.loads(done.stdout)
    return samples


def sync_calls(store: Path, out: Path, state: str, env: dict[str, str]) -> Any:
    command = history_tools.Command(
        [sys.executable, "-c", CHILD, str(store), str(out), state], env, out
    )
    return history_tools.count_sync_calls(command)


def median_ms(values: list[float]) -> float:
    return 1000 * statistics.median(values)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    work = args.work.resolve()
    store = work / "repos" / "snapstore" / "store"
    git_env = dict(os.environ, GIT_DIR=str(work / "repos" / "git" / "git"))
    git_env["GIT_WORK_TREE"] = str(work / "tree")
    commits = labelled_commits(git_env)
    states = chosen_states(commits, args.states)
    sides: dict[str, Path | None] = {"snapstore": None}
    if args.baseline is not None:
        sides["baseline"] = args.baseline.resolve()
    samples: dict[str, Any] = {name: {"first": [], "later": []} for name in sides}
    samples["git"] = []
    out = Path(tempfile.mkdtemp(prefix="snapstore-restores-"))
    try:
        for round_number in range(args.rounds):
            names = list(sides)[:: 1 if round_number % 2 == 0 else -1]
            for name in names:
                found = restores(store, out, states, side_env(sides[name]))
                samples[name]["first"].append(found[0])
                samples[name]["later"].extend(found[1:])
                for state in states[1:]:
                    samples["git"].append(git_restore(git_env, commits[state], out / "git"))
        git = statistics.median(samples["git"])
        print(f"{len(states)} states a process ({', '.join(states)}), {args.rounds} rounds")
        print(f"git archive | tar x: {1000 * git:.1f} ms")
        for name, checkout in sides.items():
            later, first = samples[name]["later"], samples[name]["first"]
            wall, thread, cpu = (median_ms([s[i] for s in later]) for i in range(3))
            calls = sync_calls(store, out, states[0], side_env(checkout))
            samples[name]["sync_calls"] = calls
            print(
                f"{name}: {wall:.1f} ms ({wall / 1000 / git:.2f}x git), calling thread "
                f"{thread:.1f} ms CPU, process {cpu:.1f} ms CPU; first of a process "
                f"{median_ms([s[0] for s in first]):.1f} ms "
                f"({median_ms([s[1] for s in first]):.1f} ms CPU); sync calls {calls}"
            )
        if args.json is not None:
            args.json.write_text(json.dumps(samples, indent=1))
        return samples
    finally:
        shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
