"""Helpers shared by the test suites: sample trees, tree pictures, a failing I/O seam."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from snapstore.fs.seam import FileSystem


def write_tree(base: Path, files: dict[str, str | bytes]) -> None:
    """Create files (and their parent directories) under ``base``."""
    for relative, content in files.items():
        path = base / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        data = content.encode() if isinstance(content, str) else content
        path.write_bytes(data)


def read_tree(base: Path, *, skip: tuple[str, ...] = (".snapstore",)) -> dict[str, object]:
    """A comparable picture of a directory: file bytes, link targets, directories, modes."""
    picture: dict[str, object] = {}
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = sorted(d for d in dirnames if d not in skip)
        for name in dirnames + filenames:
            full = Path(dirpath) / name
            relative = full.relative_to(base).as_posix()
            if full.is_symlink():
                picture[relative] = ("link", os.readlink(full))
            elif full.is_dir():
                picture[relative] = ("dir", full.stat().st_mode & 0o7777)
            else:
                picture[relative] = ("file", full.read_bytes(), full.stat().st_mode & 0o7777)
    return picture


class FailingFileSystem(FileSystem):
    """Raises ``error`` on the chosen operation (optionally only its Nth call)."""

    def __init__(self, operation: str, error: OSError, nth: int = 1) -> None:
        self.operation = operation
        self.error = error
        self.nth = nth
        self.calls = 0
        self.armed = True

    def _maybe_fail(self, operation: str) -> None:
        if self.armed and operation == self.operation:
            self.calls += 1
            if self.calls == self.nth:
                raise self.error


def _wrap(name: str) -> Callable[..., object]:
    def method(self: FailingFileSystem, *args: object, **kwargs: object) -> object:
        self._maybe_fail(name)
        return getattr(FileSystem, name)(self, *args, **kwargs)

    method.__name__ = name
    return method


for _name in (
    "open",
    "write",
    "fsync",
    "fchmod",
    "ftruncate",
    "replace",
    "unlink",
    "mkdir",
    "rmdir",
    "symlink",
    "fsync_dir",
):
    setattr(FailingFileSystem, _name, _wrap(_name))
