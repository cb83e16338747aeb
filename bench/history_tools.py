"""The tools of the history replay, built on the subjects of ``tools.py``.

On top of a ``tools.Subject`` (a repository in a work directory, ``first`` and ``again``
snapshots), each adapter here can restore any earlier snapshot by label into an empty
directory, run the tool's own maintenance, name the directories that make up its
repository, and give the command line of one snapshot, so that its sync calls can be counted
under ``strace``. Snapshot ``i`` of the replay is labelled ``s{i}``, as ``Subject`` numbers
them.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from replay import NEUTRAL_ATTRIBUTES
from tools import SESSION, Restic, ShadowGit, SnapstoreCli, SnapstoreLibrary, Subject, run, timed

from snapstore import SnapStore

SYNC_CALLS = ("fsync", "fdatasync", "syncfs", "sync_file_range")
CHILD_CREATE = """
import sys
from snapstore import SnapStore
root, session, name, base = sys.argv[1:5]
SnapStore(root).create(session, name, ["."], base_dir=base, gitignore=False)
"""


@dataclass(frozen=True)
class Command:
    """One process to run: arguments, environment (None: inherit) and directory."""

    argv: list[str]
    env: dict[str, str] | None = None
    cwd: Path | None = None

    def run(self) -> float:
        return run(self.argv, env=self.env, cwd=self.cwd)


Maintenance = list[tuple[str, Callable[[], float]]]
"""The steps of a tool's maintenance, in order: (what is run, action returning seconds)."""


class HistorySnapstore(SnapstoreLibrary):
    """snapstore called in this process (durable, the default), recording every file of the
    tree as the shadow git of the replay does (``git add -A --force``)."""

    gitignore = False

    def repo_paths(self) -> list[Path]:
        return [self.root]

    def restore_state(self, label: str, dest: Path) -> float:
        return timed(lambda: SnapStore(self.root).restore(SESSION, label, dest))

    def maintenance(self) -> Maintenance:
        def collect() -> None:
            report = SnapStore(self.root).gc()
            if report.skipped or report.reason:
                raise RuntimeError(f"snapstore gc: {report.reason}")

        return [("SnapStore.gc()", lambda: timed(collect))]

    def command(self, label: str) -> Command:
        argv = [sys.executable, "-c", CHILD_CREATE, str(self.root), SESSION, label, str(self.tree)]
        return Command(argv)


class HistorySnapstoreCli(SnapstoreCli):
    """``python -m snapstore`` for every operation, into its own store."""

    def _argv(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "snapstore", "--root", str(self.root), "-q", *args]

    def repo_paths(self) -> list[Path]:
        return [self.root]

    def snapshot(self, label: str) -> float:
        return self.command(label).run()

    def restore_state(self, label: str, dest: Path) -> float:
        return run(self._argv("restore", SESSION, label, "--target", str(dest)))

    def maintenance(self) -> Maintenance:
        return [("snapstore gc", lambda: run(self._argv("gc")))]

    def command(self, label: str) -> Command:
        return Command(
            self._argv(
                "create", SESSION, ".", "--name", label, "--base", str(self.tree), "--no-gitignore"
            )
        )


class HistoryGit(ShadowGit):
    """Shadow git that stores every file: nothing is ignored (no exclude file, ``--force``
    past any ``.gitignore`` in the tree) and no attribute rewrites bytes, so it holds the
    same files as the other tools. Restores are ``git archive | tar x``."""

    def __init__(self) -> None:
        super().__init__()
        self.commits: dict[str, str] = {}

    def setup(self) -> None:
        super().setup()
        self.commits.clear()
        git_dir = self.work / "git"
        (git_dir / "info").mkdir(exist_ok=True)
        (git_dir / "info" / "exclude").write_text("")
        (git_dir / "info" / "attributes").write_text(NEUTRAL_ATTRIBUTES)
        run(["git", "config", "core.excludesFile", os.devnull], env=self._env())

    def repo_paths(self) -> list[Path]:
        return [self.work / "git"]

    def command(self, label: str) -> Command:
        script = f"git add -A --force && git commit -q --allow-empty --no-verify -m {label}"
        return Command(["sh", "-c", script], self._env())

    def snapshot(self, label: str) -> float:
        seconds = self.command(label).run()
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"], env=self._env(), capture_output=True, check=True
        )
        self.commits[label] = done.stdout.decode().strip()
        return seconds

    def restore_state(self, label: str, dest: Path) -> float:
        dest.mkdir()
        env = self._env()
        started = time.perf_counter()
        archive = subprocess.Popen(
            ["git", "archive", self.commits[label]], env=env, stdout=subprocess.PIPE
        )
        extract = subprocess.run(["tar", "x", "-C", str(dest)], stdin=archive.stdout, check=False)
        assert archive.stdout is not None
        archive.stdout.close()
        code = archive.wait()
        seconds = time.perf_counter() - started
        if code or extract.returncode:
            raise RuntimeError(f"git archive | tar x failed: {code}, {extract.returncode}")
        return seconds

    def maintenance(self) -> Maintenance:
        def gc(*flags: str) -> Callable[[], float]:
            return lambda: run(["git", "gc", "-q", *flags, "--prune=now"], env=self._env())

        return [
            ("git gc --prune=now", gc()),
            ("git gc --aggressive --prune=now", gc("--aggressive")),
        ]


class HistoryRestic(Restic):
    """``restic backup`` tagged with the label; ``restic restore latest --tag label``. restic
    0.14 has no empty password, so the repository's is fixed (``bench``)."""

    def repo_paths(self) -> list[Path]:
        return [self.work / "repo"]

    def command(self, label: str) -> Command:
        return Command(["restic", "backup", "-q", "--tag", label, "."], self._env(), self.tree)

    def snapshot(self, label: str) -> float:
        return self.command(label).run()

    def restore_state(self, label: str, dest: Path) -> float:
        argv = ["restic", "restore", "-q", "latest", "--tag", label, "--target", str(dest)]
        return run(argv, env=self._env())

    def maintenance(self) -> Maintenance:
        return [("restic prune", lambda: run(["restic", "prune", "-q"], env=self._env()))]


class HistoryBorg(Subject):
    """``borg create repo::label .`` into an unencrypted repository; ``borg extract``."""

    name = "borg"

    def available(self) -> bool:
        return shutil.which("borg") is not None

    @property
    def repo(self) -> Path:
        return self.work / "repo"

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            BORG_BASE_DIR=str(self.work / "base"),
            BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK="yes",
            BORG_RELOCATED_REPO_ACCESS_IS_OK="yes",
        )
        return env

    def setup(self) -> None:
        run(["borg", "init", "-e", "none", str(self.repo)], env=self._env())

    def repo_paths(self) -> list[Path]:
        return [self.repo]

    def command(self, label: str) -> Command:
        return Command(["borg", "create", f"{self.repo}::{label}", "."], self._env(), self.tree)

    def snapshot(self, label: str) -> float:
        return self.command(label).run()

    def restore_state(self, label: str, dest: Path) -> float:
        dest.mkdir()
        return run(["borg", "extract", f"{self.repo}::{label}"], env=self._env(), cwd=dest)

    def maintenance(self) -> Maintenance:
        return [("borg compact", lambda: run(["borg", "compact", str(self.repo)], env=self._env()))]


HistoryTool = HistorySnapstore | HistorySnapstoreCli | HistoryGit | HistoryRestic | HistoryBorg


def history_tools() -> list[HistoryTool]:
    """Every tool of the replay, in table order (the caller drops unavailable ones)."""
    return [HistorySnapstore(), HistorySnapstoreCli(), HistoryGit(), HistoryRestic(), HistoryBorg()]


def count_sync_calls(command: Command) -> dict[str, int] | str:
    """Sync system calls of ``command`` and its children, by name, counted with
    ``strace -f -c``; a string saying why when they cannot be counted."""
    if shutil.which("strace") is None:
        return "not measured (strace not installed)"
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "strace.txt"
        argv = ["strace", "-f", "-c", "-o", str(out), "-e", f"trace={','.join(SYNC_CALLS)}"]
        done = subprocess.run(
            [*argv, *command.argv],
            env=command.env,
            cwd=command.cwd,
            capture_output=True,
            check=False,
        )
        errors = done.stderr.decode(errors="replace").strip()
        if done.returncode != 0 and "strace:" in errors:
            return f"not measured (strace failed: {errors.splitlines()[-1]})"
        if done.returncode != 0:
            raise RuntimeError(f"{command.argv[:3]} under strace failed: {errors}")
        counts = dict.fromkeys(SYNC_CALLS, 0)
        for line in out.read_text().splitlines():
            fields = re.split(r"\s+", line.strip())
            if len(fields) >= 5 and fields[-1] in counts:
                counts[fields[-1]] = int(fields[3])
    return counts
