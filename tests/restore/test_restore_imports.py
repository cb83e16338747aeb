"""What the first restore of a process imports: a restore into a new directory with no
journal left behind needs neither the create pipeline (undo backups), nor the recovery of
killed restores, nor the stat cache; a restore over an existing tree imports what its undo
backup needs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from helpers.trees import write_tree

from snapstore import SnapStore

UNNEEDED = (
    "snapstore.worktree.create",
    "snapstore.worktree.ingest",
    "snapstore.worktree.scan",
    "snapstore.restore.backups",
    "snapstore.restore.recovery",
    "snapstore.worktree.statcache",
)
CHILD = """
import json, sys
from snapstore import SnapStore
store = SnapStore(sys.argv[1])
store.restore("s", "n", sys.argv[2])
print(json.dumps(sorted(name for name in sys.modules if name.startswith("snapstore."))))
"""


def _imported_by_a_restore(tmp_path: Path, target: Path) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path / "store"), str(target)],
        capture_output=True,
        text=True,
        check=True,
    )
    return set(json.loads(done.stdout))


def _checkpoint(tmp_path: Path) -> Path:
    base = tmp_path / "project"
    write_tree(base, {"a.txt": "a\n", "src/b.py": "b = 1\n"})
    SnapStore(tmp_path / "store").create("s", "n", ["."], base_dir=base)
    return base


def test_a_restore_into_a_new_directory_imports_no_create_code(tmp_path: Path) -> None:
    _checkpoint(tmp_path)
    imported = _imported_by_a_restore(tmp_path, tmp_path / "out")
    assert (tmp_path / "out" / "src" / "b.py").read_text() == "b = 1\n"
    assert "snapstore.restore.writer" in imported
    assert not imported.intersection(UNNEEDED)


def test_a_restore_over_a_tree_imports_what_its_backup_needs(tmp_path: Path) -> None:
    base = _checkpoint(tmp_path)
    (base / "a.txt").write_text("edited\n")
    imported = _imported_by_a_restore(tmp_path, base)
    assert (base / "a.txt").read_text() == "a\n"
    assert {"snapstore.restore.backups", "snapstore.worktree.create"} <= imported
