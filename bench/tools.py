"""The tools compared: snapstore (library and CLI), shadow git, tar, cp -a and restic.

Each subject keeps one repository in a work directory: ``first`` makes a fresh one and takes
the first snapshot, ``again`` adds a snapshot to it, ``restore_empty`` and
``restore_in_place`` put its latest snapshot back. Every method returns wall seconds; external
tools are timed as whole processes, the library as the call alone (a bridge keeps it
imported). An operation a tool has no counterpart for is simply not defined (``None``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import snapstore
from snapstore import SnapStore

SESSION = "bench"


def run(command: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None) -> float:
    """Run ``command`` to completion (failing loudly); returns its wall seconds."""
    started = time.perf_counter()
    subprocess.run(
        command,
        env=env,
        cwd=cwd,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    return time.perf_counter() - started


def timed(action: Callable[[], object]) -> float:
    """Wall seconds of one in-process call."""
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def disk_bytes(path: Path) -> int:
    """Bytes allocated on disk under ``path`` (what ``du`` reports), not following links."""
    total = 0
    for directory, _, files in os.walk(path):
        total += os.lstat(directory).st_blocks * 512
        for name in files:
            total += os.lstat(os.path.join(directory, name)).st_blocks * 512
    return total


class Subject:
    """One tool's repository and operations; subclasses define what the tool can do."""

    name = ""
    in_place = True

    def __init__(self) -> None:
        self.work = Path()
        self.tree = Path()
        self.count = 0

    def available(self) -> bool:
        """Whether the tool can run on this machine."""
        return True

    def first(self, tree: Path, work: Path) -> float:
        """Start a fresh repository in ``work`` and snapshot ``tree`` into it."""
        if work.exists():
            shutil.rmtree(work)
        work.mkdir(parents=True)
        self.work, self.tree, self.count = work, tree, 0
        self.setup()
        return self.again()

    def setup(self) -> None:
        """Untimed preparation of a fresh repository."""

    def again(self) -> float:
        """Snapshot the tree into the existing repository."""
        self.count += 1
        return self.snapshot(f"s{self.count}")

    def snapshot(self, label: str) -> float:
        raise NotImplementedError

    def restore_empty(self, dest: Path) -> float | None:
        """Restore the latest snapshot into the new directory ``dest``."""
        return None

    def restore_in_place(self) -> float | None:
        """Make the tree match the latest snapshot again."""
        return None

    def repo_bytes(self) -> int:
        """Disk space the repository takes."""
        return disk_bytes(self.work)


class SnapstoreLibrary(Subject):
    """``SnapStore.create``/``restore`` called in this process."""

    name = "snapstore"
    gitignore = True
    """Leave out what git ignores, as shadow git's ``git add -A`` does (the default)."""

    def __init__(self, *, durable: bool = True) -> None:
        super().__init__()
        self.durable = durable

    @property
    def root(self) -> Path:
        return self.work / "store"

    def snapshot(self, label: str) -> float:
        def create() -> None:
            store = SnapStore(self.root, durable=self.durable)
            store.create(SESSION, label, ["."], base_dir=self.tree, gitignore=self.gitignore)

        return timed(create)

    def restore_empty(self, dest: Path) -> float:
        def restore() -> None:
            SnapStore(self.root, durable=self.durable).restore(SESSION, f"s{self.count}", dest)

        return timed(restore)

    def restore_in_place(self) -> float:
        def restore() -> None:
            SnapStore(self.root, durable=self.durable).restore(SESSION, f"s{self.count}")

        return timed(restore)


class SnapstoreCli(SnapstoreLibrary):
    """``python -m snapstore create|restore``: a whole process, interpreter start included."""

    name = "snapstore-cli"

    def available(self) -> bool:
        """Whether the command line runs; compiles the package's bytecode first (untimed).

        An installed package has its bytecode compiled when pip installs it. A checkout
        installed in editable mode has none until Python writes it, and with
        ``PYTHONDONTWRITEBYTECODE`` set it never does: every command would then compile the
        hundred modules it imports again (about 80 ms here), which no installed copy pays."""
        package = Path(snapstore.__file__).resolve().parent
        try:
            run([sys.executable, "-m", "compileall", "-q", str(package)])
            run([sys.executable, "-m", "snapstore", "--help"])
        except (subprocess.CalledProcessError, OSError):
            return False
        return True

    def _cli(self, *args: str) -> float:
        return run([sys.executable, "-m", "snapstore", "--root", str(self.root), "-q", *args])

    def snapshot(self, label: str) -> float:
        return self._cli("create", SESSION, ".", "--name", label, "--base", str(self.tree))

    def restore_empty(self, dest: Path) -> float:
        return self._cli("restore", SESSION, f"s{self.count}", "--target", str(dest))

    def restore_in_place(self) -> float:
        return self._cli("restore", SESSION, f"s{self.count}")


class ShadowGit(Subject):
    """``git add -A && git commit`` into a separate GIT_DIR (as Cline and Gemini CLI do)."""

    name = "git"

    def available(self) -> bool:
        return shutil.which("git") is not None

    def _env(self, **extra: str) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            GIT_DIR=str(self.work / "git"),
            GIT_WORK_TREE=str(self.tree),
            GIT_AUTHOR_NAME="bench",
            GIT_AUTHOR_EMAIL="bench@example.invalid",
            GIT_COMMITTER_NAME="bench",
            GIT_COMMITTER_EMAIL="bench@example.invalid",
            GIT_CONFIG_NOSYSTEM="1",
            HOME=str(self.work),
        )
        env.update(extra)
        return env

    def setup(self) -> None:
        run(["git", "init", "-q"], env=self._env())

    def snapshot(self, label: str) -> float:
        script = f"git add -A && git commit -q --allow-empty --no-verify -m {label}"
        return run(["sh", "-c", script], env=self._env())

    def restore_empty(self, dest: Path) -> float:
        index = self.work / "restore-index"
        index.unlink(missing_ok=True)
        env = self._env(GIT_WORK_TREE=str(dest), GIT_INDEX_FILE=str(index))
        dest.mkdir()
        return run(["git", "checkout", "-f", "-q", "HEAD", "--", "."], env=env)

    def restore_in_place(self) -> float:
        return run(["git", "checkout", "-f", "-q", "HEAD", "--", "."], env=self._env())


class Tar(Subject):
    """``tar cf`` of the whole tree; ``tar xf`` into an empty directory."""

    name = "tar"
    in_place = False

    def snapshot(self, label: str) -> float:
        archive = self.work / f"{label}.tar"
        return run(["tar", "cf", str(archive), "-C", str(self.tree), "."])

    def restore_empty(self, dest: Path) -> float:
        dest.mkdir()
        return run(["tar", "xf", str(self.work / f"s{self.count}.tar"), "-C", str(dest)])


class CopyAll(Subject):
    """``cp -a`` of the whole tree, and back into an empty directory."""

    name = "cp -a"
    in_place = False

    def snapshot(self, label: str) -> float:
        return run(["cp", "-a", str(self.tree), str(self.work / label)])

    def restore_empty(self, dest: Path) -> float:
        return run(["cp", "-a", str(self.work / f"s{self.count}"), str(dest)])


class Restic(Subject):
    """``restic backup`` into a local repository, ``restic restore latest``."""

    name = "restic"

    def available(self) -> bool:
        return shutil.which("restic") is not None

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            RESTIC_REPOSITORY=str(self.work / "repo"),
            RESTIC_PASSWORD="bench",
            RESTIC_CACHE_DIR=str(self.work / "cache"),
        )
        return env

    def setup(self) -> None:
        run(["restic", "init", "-q"], env=self._env())

    def snapshot(self, label: str) -> float:
        command = ["restic", "backup", "-q", "--tag", label, "."]
        return run(command, env=self._env(), cwd=self.tree)

    def restore_empty(self, dest: Path) -> float:
        return run(["restic", "restore", "-q", "latest", "--target", str(dest)], env=self._env())


def subjects() -> list[Subject]:
    """Every subject, in table order (unavailable ones are dropped by the caller)."""
    return [SnapstoreLibrary(), SnapstoreCli(), ShadowGit(), Tar(), CopyAll(), Restic()]
