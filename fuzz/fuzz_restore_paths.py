"""Fuzz target: restore path validation and planning never yield a location outside the
target, whatever entries a (hand-made) snapshot holds and whatever the target plants.

Each input line is one entry: a kind letter (``f`` file, ``d`` dir, ``l`` symlink, ``a``
absent) then the path (``l``: ``path<TAB>target``). Paths go through
``check_relative_path`` (which may only raise UnsafePathError); the accepted ones are
planned into a fixed sandbox target holding planted symlinks (a directory link and a file
link pointing outside it). ``make_plan`` may refuse with UnsafePathError; a plan must keep
every path inside the target and never pass beneath a symlink it does not first replace.
Run: ``python fuzz/fuzz_restore_paths.py fuzz/corpus/restore_paths`` (see fuzz/README.md).
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

from snapstore.errors import UnsafePathError
from snapstore.format.paths import check_relative_path, parents
from snapstore.models import FileEntry
from snapstore.restore.plan import make_plan

KINDS = {"f": "file", "d": "dir", "l": "symlink", "a": "absent"}
DIGEST = bytes(32)
_SANDBOX: Path | None = None


def sandbox() -> Path:
    """A target with planted symlinks, and an outside directory they point to (made once)."""
    global _SANDBOX
    if _SANDBOX is None:
        base = Path(tempfile.mkdtemp(prefix="snapstore-fuzz-"))
        atexit.register(shutil.rmtree, base, True)
        outside, target = base / "outside", base / "target"
        (outside / "secret").mkdir(parents=True)
        (outside / "file.txt").write_bytes(b"outside")
        (target / "dir" / "sub").mkdir(parents=True)
        (target / "dir" / "a.txt").write_bytes(b"a")
        (target / "file.txt").write_bytes(b"file")
        (target / "link_out").symlink_to(outside)
        (target / "dir" / "link_up").symlink_to("../..")
        (target / "file_link").symlink_to(outside / "file.txt")
        _SANDBOX = target
    return _SANDBOX


def to_entries(data: bytes) -> list[tuple[str, str, str | None]]:
    """(kind, path, link target) for every line of the input."""
    text = data.decode("utf-8", errors="surrogateescape")
    found = []
    for line in text.split("\n"):
        kind = KINDS.get(line[:1])
        if kind is None:
            continue
        path, _, link = line[1:].partition("\t")
        found.append((kind, path, link or "x" if kind == "symlink" else None))
    return found


def _entry(kind: str, path: str, link: str | None) -> FileEntry:
    if kind == "file":
        return FileEntry(path, "file", 0o644, 1, 0, DIGEST)
    if kind == "symlink":
        return FileEntry(path, "symlink", 0o777, 0, 0, target=link)
    return FileEntry(path, kind, 0o755 if kind == "dir" else 0)  # type: ignore[arg-type]


def test_one_input(data: bytes) -> None:
    """Validate, plan, and check every planned location."""
    target = sandbox()
    accepted: dict[str, FileEntry] = {}
    for kind, path, link in to_entries(data):
        try:
            checked = check_relative_path(path)
        except UnsafePathError:
            continue
        assert checked == path
        assert os.path.normpath(path) == path and not os.path.isabs(path), path
        assert ".." not in path.split("/") and "\\" not in path and "\x00" not in path, path
        accepted.setdefault(path, _entry(kind, path, link))
    try:
        plan = make_plan(list(accepted.values()), str(target), complete={""})
    except UnsafePathError:
        return
    replaced = {a.entry.path for a in plan.actions if a.clears_existing}
    for action in plan.actions:
        location = os.path.normpath(os.path.join(target, action.entry.path))
        assert location.startswith(str(target) + os.sep), f"{action} escapes the target"
        for parent in parents(action.entry.path):
            if parent in replaced:
                break
            assert not os.path.islink(target / parent), f"{action} passes through {parent}"


def main() -> None:
    """Run under atheris (``pip install -e '.[fuzz]'``)."""
    import atheris

    atheris.instrument_all()
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
