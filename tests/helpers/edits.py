"""Random edits of a small tree, for tests that hold incremental checkpoints against full ones.

Paths come from a small set of names three levels deep, so edits collide: a file replaces a
directory, a rename lands where another path was, a directory goes with everything in it.
Each edit that applies to the tree as it is reports the paths it changed the way
``ChangedPaths`` describes them (what a watcher that misses nothing would report).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from hypothesis import strategies as st

PATHS = ["a", "b", "c.txt", "a/a", "a/b", "a/c.txt", "b/a", "a/a/a", "a/a/c.txt", "b/a/c.txt"]
KINDS = [
    "write",
    "write",
    "append",
    "rewrite_in_one_tick",
    "delete",
    "mkdir",
    "rename",
    "chmod",
    "symlink",
    "utime",
]
INITIAL = {"a/c.txt": b"one\n", "a/a/c.txt": b"two\n", "b/a/c.txt": b"three\n", "c.txt": b"4\n"}


@dataclass(frozen=True)
class Edit:
    """One change to the tree: what, where, and its parameters."""

    kind: str
    path: str
    other: str
    data: bytes
    mode: int


def edits() -> st.SearchStrategy[Edit]:
    """Any edit (most will apply to a given tree; the others are skipped)."""
    return st.builds(
        Edit,
        kind=st.sampled_from(KINDS),
        path=st.sampled_from(PATHS),
        other=st.sampled_from(PATHS),
        data=st.binary(min_size=0, max_size=40),
        mode=st.sampled_from([0o644, 0o600, 0o755, 0o700]),
    )


def batches() -> st.SearchStrategy[list[list[Edit]]]:
    """Edits in batches: one checkpoint follows each batch."""
    return st.lists(st.lists(edits(), min_size=0, max_size=5), min_size=1, max_size=8)


def make_initial(base: Path) -> None:
    for relative, data in INITIAL.items():
        (base / relative).parent.mkdir(parents=True, exist_ok=True)
        (base / relative).write_bytes(data)


def parent_of(path: str) -> str:
    return path.rsplit("/", 1)[0] if "/" in path else "."


Changed = tuple[set[str], set[str]]
"""(rescan, refresh): paths whose entry and everything below may differ; directories whose
own entry may differ."""


def real_directory(base: Path, path: str) -> bool:
    """True if ``path`` and every directory above it are directories, not symlinks (an edit
    through a symlink would change another path than the one it names)."""
    parts = [] if path == "." else path.split("/")
    for depth in range(len(parts) + 1):
        here = base.joinpath(*parts[:depth])
        if here.is_symlink() or not here.is_dir():
            return False
    return True


def apply(base: Path, edit: Edit) -> Changed | None:
    """Make ``edit`` if it applies to the tree as it is; what it changed, or None."""
    if not real_directory(base, parent_of(edit.path)):
        return None
    target = base / edit.path
    exists = os.path.lexists(target)
    is_link = target.is_symlink()
    is_dir = target.is_dir() and not is_link
    is_file = exists and target.is_file() and not is_link
    changed_here: Changed = ({edit.path}, set())
    created: Changed = ({edit.path}, {parent_of(edit.path)})
    if edit.kind == "write" and not is_dir and not is_link:
        target.write_bytes(edit.data)
        return changed_here if exists else created
    if edit.kind == "append" and is_file:
        with target.open("ab") as handle:
            handle.write(edit.data or b"+")
        return changed_here
    if edit.kind == "rewrite_in_one_tick" and is_file:
        return _rewrite_in_one_tick(target, edit, changed_here)
    if edit.kind == "delete" and exists:
        if is_dir:
            shutil.rmtree(target)
        else:
            target.unlink()
        return created
    if edit.kind == "mkdir" and not exists:
        target.mkdir()
        return created
    if edit.kind == "symlink" and not exists:
        target.symlink_to(edit.other)
        return created
    if edit.kind == "rename":
        return _rename(base, edit)
    if edit.kind in ("chmod", "utime") and exists and not is_link:
        if edit.kind == "chmod":
            target.chmod(edit.mode | 0o700 if is_dir else edit.mode)
        else:
            os.utime(target, ns=(1_500_000_000 * 10**9, 1_500_000_000 * 10**9))
        return (set(), {edit.path}) if is_dir else changed_here
    return None


def _rewrite_in_one_tick(target: Path, edit: Edit, changed: Changed) -> Changed:
    """New bytes of the same size, and the modification time put back: as a rewrite within
    one timestamp tick leaves a file."""
    before = target.stat()
    old = target.read_bytes()
    new = bytes((byte + 1) % 256 for byte in old) if old else b""
    target.write_bytes(new)
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    return changed


def _rename(base: Path, edit: Edit) -> Changed | None:
    source, destination = base / edit.path, base / edit.other
    if not os.path.lexists(source) or os.path.lexists(destination):
        return None
    if edit.other == edit.path or edit.other.startswith(edit.path + "/"):
        return None
    if not real_directory(base, parent_of(edit.other)):
        return None
    os.rename(source, destination)
    return {edit.path, edit.other}, {parent_of(edit.path), parent_of(edit.other)}
