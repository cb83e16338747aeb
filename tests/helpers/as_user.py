"""Run a snippet of Python as an unprivileged user, for what root is exempt from (permission
bits). The suites usually run as root in CI containers, where a read-only directory stops
nothing, so these tests drop to ``nobody`` in a child process."""

from __future__ import annotations

import functools
import os
import shutil
import site
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import snapstore

NOBODY = 65534


def _as_nobody() -> None:
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)


def _environment() -> dict[str, str]:
    source = str(Path(snapstore.__file__).resolve().parents[1])
    paths = [source, *site.getsitepackages()]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "HOME": "/tmp"}


@functools.cache
def _interpreter() -> str | None:
    """A Python of this version that ``nobody`` may run (this one may live under /root)."""
    name = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    candidates = [sys.executable, os.path.realpath(sys.executable), shutil.which(name) or ""]
    candidates += [f"/usr/bin/{name}", f"/usr/local/bin/{name}"]
    for candidate in candidates:
        if not candidate:
            continue
        try:
            probe = subprocess.run(
                [candidate, "-c", "import snapstore, blake3, msgpack"],
                preexec_fn=_as_nobody,
                env=_environment(),
                capture_output=True,
            )
        except OSError:  # not executable by that user
            continue
        if probe.returncode == 0:
            return candidate
    return None


def require_unprivileged_runs() -> str:
    """The interpreter to use, or skip the test (not root, or no usable interpreter)."""
    if os.geteuid() != 0:
        pytest.skip("needs root, to run the snippet as another user")
    interpreter = _interpreter()
    if interpreter is None:
        pytest.skip("no Python interpreter that the unprivileged user can run")
    return interpreter


def run_as_nobody(script: str, **values: object) -> subprocess.CompletedProcess[str]:
    """Run ``script`` (with ``values`` bound as globals) as ``nobody``; return the result."""
    interpreter = require_unprivileged_runs()
    prelude = "".join(f"{name} = {value!r}\n" for name, value in values.items())
    return subprocess.run(
        [interpreter, "-c", prelude + textwrap.dedent(script)],
        preexec_fn=_as_nobody,
        env=_environment(),
        capture_output=True,
        text=True,
        timeout=120,
    )


def give_to_nobody(path: Path) -> None:
    """Make ``path`` and everything below it owned by ``nobody``."""
    for directory, dirnames, filenames in os.walk(path):
        os.chown(directory, NOBODY, NOBODY)
        for name in dirnames + filenames:
            os.lchown(os.path.join(directory, name), NOBODY, NOBODY)


def shared_scratch() -> Iterator[Path]:
    """A directory every user can reach (pytest's own temp dirs are private to root)."""
    path = Path(tempfile.mkdtemp(prefix="snapstore-user-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
