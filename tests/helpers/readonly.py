"""Processes that may read a store but not write it, for the read-only tests.

Tests run as root here, where permission bits stop nothing, so as root the reader is another
user (uid and gid 65534, "nobody") and the tree is made readable by everyone; as any other
user the reader is this user and the tree is made read-only. Either way the reader runs in a
subprocess. ``access()`` says why neither works, when it does not (the tests then skip).
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import stat
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
NOBODY = 65534
PROBE = "import snapstore.cli.app, blake3, msgpack, click"


def _python_path() -> str:
    """This checkout first, then the current interpreter's installed packages."""
    paths = sysconfig.get_paths()
    return os.pathsep.join(dict.fromkeys([str(REPO), paths["purelib"], paths["platlib"]]))


def _nobody_env(home: Path) -> dict[str, str]:
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONPATH": _python_path(),
    }


def _as_nobody() -> dict[str, Any]:
    return {"user": NOBODY, "group": NOBODY, "extra_groups": []}


@functools.cache
def _interpreter_for_nobody() -> str | None:
    """A Python interpreter that uid 65534 can run with snapstore and its dependencies."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    candidates = [
        sys.executable,
        os.path.realpath(sys.executable),
        f"/usr/bin/python{version}",
        f"/usr/local/bin/python{version}",
        shutil.which(f"python{version}", path="/usr/local/bin:/usr/bin:/bin"),
    ]
    for candidate in dict.fromkeys(c for c in candidates if c):
        try:
            probe = subprocess.run(
                [candidate, "-c", PROBE],
                env=_nobody_env(Path("/")),
                cwd="/",
                capture_output=True,
                timeout=60,
                check=False,
                **_as_nobody(),
            )
        except OSError:
            continue
        if probe.returncode == 0:
            return candidate
    return None


class ReadOnlyAccess:
    """Runs snapstore (or Python code) as a process that can read ``base`` but not write it."""

    def __init__(self, base: Path, *, as_nobody: bool, python: str) -> None:
        self.base = base
        self.as_nobody = as_nobody
        self.python = python

    def lock_down(self, *trees: Path) -> None:
        """Make ``trees`` readable, not writable, by the reader."""
        for tree in trees:
            for path in _walk(tree):
                mode = stat.S_IMODE(path.stat().st_mode)
                if self.as_nobody:
                    extra = 0o555 if path.is_dir() else 0o444
                    path.chmod((mode | extra) & ~0o022)
                else:
                    path.chmod(mode & ~0o222)

    def share(self, *trees: Path) -> None:
        """Make ``trees`` readable by the reader, leaving their modes otherwise alone."""
        if self.as_nobody:
            for tree in trees:
                for path in _walk(tree):
                    extra = 0o055 if path.is_dir() else 0o044
                    path.chmod(stat.S_IMODE(path.stat().st_mode) | extra)

    def unlock(self, *trees: Path) -> None:
        """Let this test process write ``trees`` again (it is the reader, when not root)."""
        if not self.as_nobody:
            for tree in trees:
                for path in _walk(tree):
                    path.chmod(stat.S_IMODE(path.stat().st_mode) | 0o200)

    def writable_dir(self, path: Path) -> Path:
        """A new directory the reader may write into."""
        path.mkdir(mode=0o755)
        if self.as_nobody:
            os.chown(path, NOBODY, NOBODY)
        return path

    def run(self, *argv: str, timeout: float = 60) -> subprocess.CompletedProcess[bytes]:
        """Run ``python ARGV`` as the reader, in ``base``."""
        options: dict[str, Any] = _as_nobody() if self.as_nobody else {}
        env = _nobody_env(self.base) if self.as_nobody else _own_env()
        return subprocess.run(
            [self.python, *argv],
            env=env,
            cwd=self.base,
            capture_output=True,
            stdin=subprocess.DEVNULL,
            timeout=timeout,
            check=False,
            **options,
        )

    def popen(self, *argv: str) -> subprocess.Popen[bytes]:
        """Start ``python ARGV`` as the reader, with pipes for stdout and stderr."""
        options: dict[str, Any] = _as_nobody() if self.as_nobody else {}
        env = _nobody_env(self.base) if self.as_nobody else _own_env()
        return subprocess.Popen(
            [self.python, *argv],
            env=env,
            cwd=self.base,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            **options,
        )

    def snapstore(self, root: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
        """Run ``snapstore --root ROOT ARGS`` as the reader."""
        return self.run("-m", "snapstore", "--root", str(root), *args)


def _walk(tree: Path) -> list[Path]:
    return [path for path in [tree, *tree.rglob("*")] if not path.is_symlink()]


def _own_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "SNAPSTORE_ROOT"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def _cannot_write(directory: Path) -> bool:
    """True if this process really cannot create a file in ``directory``."""
    try:
        (directory / "probe").touch()
    except PermissionError:
        return True
    (directory / "probe").unlink()
    return False


@contextlib.contextmanager
def read_only_access() -> Iterator[ReadOnlyAccess | str]:
    """A ReadOnlyAccess over a fresh base directory (removed afterwards), or why none works."""
    base = Path(tempfile.mkdtemp(prefix="snapstore-readonly-"))
    base.chmod(0o755)
    try:
        if os.geteuid() == 0:
            python = _interpreter_for_nobody()
            if python is None:
                yield (
                    "running as root, but no Python interpreter that uid 65534 can run finds "
                    "snapstore and its dependencies (is the interpreter under /root?)"
                )
            else:
                yield ReadOnlyAccess(base, as_nobody=True, python=python)
            return
        probe = base / "probe-dir"
        probe.mkdir()
        probe.chmod(0o555)
        if not _cannot_write(probe):
            yield "not root, and a directory without write permission is still writable here"
            return
        yield ReadOnlyAccess(base, as_nobody=False, python=sys.executable)
    finally:
        for path in [base, *base.rglob("*")]:
            if path.is_dir() and not path.is_symlink():
                with contextlib.suppress(OSError):
                    path.chmod(0o755)
        shutil.rmtree(base, ignore_errors=True)
