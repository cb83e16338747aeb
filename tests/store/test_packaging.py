"""The installed package as a bridge author's tools see it."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

import pytest

BRIDGE = """\
from snapstore import SnapStore

store = SnapStore(".snapstore")
reveal_type(store.list())
store.create("s", "n", ["a"], ttl="not a duration")
"""


def test_mypy_sees_the_types_of_the_installed_package(tmp_path: Path) -> None:
    """A project outside the repository, type-checked against the installed snapstore (the
    editable install of a checkout, or the wheel), gets snapstore's types, not ``Any``."""
    try:
        distribution("snapstore")
    except PackageNotFoundError:
        pytest.skip("snapstore is not installed in this interpreter (pip install -e '.[dev]')")
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed (it is in the dev extra)")
    (tmp_path / "bridge.py").write_text(BRIDGE)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MYPYPATH")}
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", os.devnull, "bridge.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    output = result.stdout + result.stderr
    assert "py.typed" not in output, output
    assert "import-not-found" not in output, output
    revealed = r'Revealed type is "(builtins\.)?list\[snapstore\.models\.SnapshotInfo\]"'
    assert re.search(revealed, output), output
    assert 'Argument "ttl" to "create" of "SnapStore" has incompatible type "str"' in output, output
