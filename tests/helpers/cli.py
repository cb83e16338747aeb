"""Helpers for the command-line tests: run ``python -m snapstore`` as a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from snapstore import SnapshotInfo, SnapStore

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Result:
    """What one run of the command line did."""

    code: int
    stdout_bytes: bytes
    stderr: str

    @property
    def stdout(self) -> str:
        return self.stdout_bytes.decode("utf-8")

    def json(self) -> Any:
        """The one JSON document on stdout (fails the test if there is anything else)."""
        return json.loads(self.stdout)


def cli_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """An environment where this checkout's snapstore is importable and no store is preset."""
    env = {key: value for key, value in os.environ.items() if key != "SNAPSTORE_ROOT"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.update(extra or {})
    return env


class Cli:
    """Runs ``python -m snapstore --root <tmp>/store ...`` in ``tmp_path``."""

    def __init__(self, tmp_path: Path) -> None:
        self.cwd = tmp_path
        self.root = tmp_path / "store"

    def run(
        self,
        *args: str,
        root: bool = True,
        env: dict[str, str] | None = None,
        input: bytes | None = None,
        timeout: float = 60,
    ) -> Result:
        """Run with ``args`` (after ``--root``, unless ``root=False``)."""
        command: list[str] = [sys.executable, "-m", "snapstore"]
        if root:
            command += ["--root", str(self.root)]
        completed = subprocess.run(
            [*command, *args],
            cwd=self.cwd,
            env=cli_env(env),
            input=input,
            stdin=None if input is not None else subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
        return Result(completed.returncode, completed.stdout, completed.stderr.decode())

    def store(self) -> SnapStore:
        """The same store, opened in this process to set up a test quickly."""
        return SnapStore(self.root, lock_timeout=10)

    def snapshot(
        self, project: Path, *paths: str, session: str = "s1", name: str = "n1", **options: Any
    ) -> SnapshotInfo:
        """Create ``session/name`` of ``paths`` (default: all) in ``project`` via the library."""
        return self.store().create(session, name, paths or ["."], base_dir=project, **options)

    def ok(self, *args: str) -> Result:
        """Run and insist on exit code 0."""
        result = self.run(*args)
        assert result.code == 0, result
        return result

    def json(self, *args: str, code: int = 0) -> Any:
        """Run with ``--json``, check the exit code, and return the parsed document."""
        result = self.run("--json", *args)
        assert result.code == code, result
        return result.json()

    def fails(self, *args: str, code: int = 1, error_type: str | None = None) -> dict[str, str]:
        """Run with ``--json``, expect failure, and return the ``error`` object."""
        result = self.run("--json", *args)
        assert result.code == code, result
        assert "Traceback" not in result.stderr, result.stderr
        assert result.stderr.strip().splitlines()[-1].startswith("error: "), result.stderr
        error: dict[str, str] = result.json()["error"]
        assert set(error) == {"type", "message"}
        if error_type is not None:
            assert error["type"] == error_type, error
        return error


SAMPLE_FILES: dict[str, bytes] = {
    "README.md": b"# project\n",
    "src/app.py": b"print('hello')\n",
    "src/util.py": b"def helper():\n    return 42\n",
    "data/blob.bin": bytes(range(256)) * 8,
}
