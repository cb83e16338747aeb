"""Build and read small file trees, and describe them as plain comparable values."""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Collection, Mapping
from pathlib import Path

from snapstore.fs.durable import TEMP_PREFIX

Node = tuple[object, ...]
Tree = dict[str, Node]
Spec = Mapping[str, "bytes | str | tuple[bytes, int] | None"]


def write_tree(base: Path, spec: Spec) -> None:
    """Make ``base`` hold ``spec``: bytes are files, other text too (as UTF-8),
    ``(bytes, mode)`` files with a mode, ``"->target"`` symlinks, ``None`` directories;
    existing paths not in ``spec`` stay."""
    base.mkdir(parents=True, exist_ok=True)
    for relative, value in sorted(spec.items()):
        path = base / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink() or path.is_file():
            path.unlink()
        if value is None:
            path.mkdir(exist_ok=True)
        elif isinstance(value, str) and value.startswith("->"):
            os.symlink(value.removeprefix("->"), path)
        elif isinstance(value, str):
            path.write_text(value, encoding="utf-8")
        elif isinstance(value, tuple):
            path.write_bytes(value[0])
            path.chmod(value[1])
        else:
            path.write_bytes(value)


def read_tree(base: Path, *, with_temps: bool = False, skip: Collection[str] = ()) -> Tree:
    """Every path under ``base`` (never following symlinks) as ``path -> node``.

    Files are ``("file", bytes, mode)``, symlinks ``("symlink", target)``, directories
    ``("dir", mode)`` and FIFOs ``("fifo",)`` (never opened: that would block). Restore temp
    files are left out unless ``with_temps``; so are directories named in ``skip`` (a store
    root inside the tree), with all they hold.
    """
    found: Tree = {}
    if not base.is_dir():
        return found
    for directory, dirs, files in os.walk(base):
        dirs[:] = [name for name in dirs if name not in skip]
        for name in sorted(dirs + files):
            if name.startswith(TEMP_PREFIX) and not with_temps:
                continue
            path = os.path.join(directory, name)
            relative = os.path.relpath(path, base).replace(os.sep, "/")
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                found[relative] = ("symlink", os.readlink(path))
            elif stat.S_ISDIR(info.st_mode):
                found[relative] = ("dir", stat.S_IMODE(info.st_mode))
            elif stat.S_ISFIFO(info.st_mode):
                found[relative] = ("fifo",)
            else:
                found[relative] = ("file", Path(path).read_bytes(), stat.S_IMODE(info.st_mode))
    return found


def read_files(base: Path) -> dict[str, bytes]:
    """Every regular file under ``base`` with its bytes (symlinks and directories left out)."""
    return {
        path: node[1]
        for path, node in read_tree(base).items()
        if node[0] == "file" and isinstance(node[1], bytes)
    }


def temp_leftovers(base: Path) -> list[str]:
    """Restore or staging temp files anywhere under ``base``."""
    return sorted(
        p for p in read_tree(base, with_temps=True) if Path(p).name.startswith(TEMP_PREFIX)
    )


def copy_tree(source: Path, destination: Path) -> None:
    """Copy a scenario directory, keeping symlinks as links and file modes."""
    shutil.copytree(source, destination, symlinks=True)


def remove_tree(path: Path) -> None:
    """Remove a directory tree, even where a test left read-only directories."""
    if not path.exists():
        return
    for directory, dirs, _ in os.walk(path):
        for name in dirs:
            child = os.path.join(directory, name)
            if not os.path.islink(child):
                os.chmod(child, 0o700)
    os.chmod(path, 0o700)
    shutil.rmtree(path)
