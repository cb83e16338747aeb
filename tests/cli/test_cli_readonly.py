"""The command line on a store the user can read but not write: reads work, writes say why."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers.readonly import ReadOnlyAccess, read_only_access

from snapstore import SnapStore
from snapstore.checkpoint import FileCheckpointStore
from snapstore.frontend.exitcodes import ExitCode

FILES = {"README.md": b"# project\n", "src/app.py": b"print('hello')\n"}


@dataclass
class ReadOnlyStore:
    reader: ReadOnlyAccess
    root: Path
    project: Path

    def run(self, *args: str) -> tuple[int, str, str]:
        """Run ``snapstore --root ROOT ARGS`` as the reader: exit code, stdout, stderr."""
        done = self.reader.snapstore(self.root, *args)
        return done.returncode, done.stdout.decode(), done.stderr.decode()


def picture(tree: Path) -> dict[str, tuple[int, int, int]]:
    """Every path under ``tree`` with its mode, size and mtime, to see that nothing changed."""
    return {
        path.relative_to(tree).as_posix(): (info.st_mode, info.st_size, info.st_mtime_ns)
        for path in sorted(tree.rglob("*"))
        for info in [path.lstat()]
    }


@pytest.fixture
def ro() -> Iterator[ReadOnlyStore]:
    """A store (and the project it snapshots) that the reader can read but not write."""
    with read_only_access() as access:
        if isinstance(access, str):
            pytest.skip(access)
        project = access.base / "project"
        for relative, content in FILES.items():
            (project / relative).parent.mkdir(parents=True, exist_ok=True)
            (project / relative).write_bytes(content)
        root = access.base / "store"
        store = SnapStore(root, lock_timeout=5)
        store.create("s1", "n1", ["."], base_dir=project)
        store.put_state("etl", "cursor", {"page": 2})
        FileCheckpointStore(store).save("feed", 7)
        access.lock_down(root)
        access.share(project)
        yield ReadOnlyStore(access, root, project)


def test_reads_work_and_change_nothing(ro: ReadOnlyStore) -> None:
    before = picture(ro.root)
    code, out, err = ro.run("list")
    assert (code, err) == (0, ""), err
    assert "s1" in out and "cursor" in out
    code, out, err = ro.run("show", "s1", "n1")
    assert code == 0 and "src/app.py" in out, err
    code, out, err = ro.run("cat", "s1", "n1", "src/app.py")
    assert (code, out) == (0, "print('hello')\n"), err
    code, out, err = ro.run("diff", "s1", "n1")
    assert (code, out.strip()) == (0, f"{ro.project} matches s1/n1"), err
    code, out, err = ro.run("diff", "s1", "n", "latest")
    assert (code, out) == (0, "s1/n1 matches s1/n1\n"), err
    code, out, err = ro.run("log", "s1", "src/app.py")
    assert code == 0 and out.splitlines()[1].startswith("n1 "), err
    code, out, err = ro.run("verify", "--deep")
    assert code == 0 and out.endswith("(deep): ok\n"), err
    code, out, err = ro.run("restore", "s1", "n1", "--dry-run")
    assert code == 0 and "would write 0, would remove 0" in out, err
    code, out, err = ro.run("state", "get", "etl", "cursor", "--json")
    assert code == 0 and json.loads(out)["value"] == {"page": 2}, err
    code, out, err = ro.run("checkpoint", "list")
    assert code == 0 and "feed" in out, err
    assert picture(ro.root) == before


@pytest.mark.parametrize(
    "args",
    [
        ("create", "s1", "--name", "n2", "README.md", "--base", "project"),
        ("state", "set", "etl", "cursor", "3"),
        ("delete", "s1", "n1", "--yes"),
        ("delete-session", "s1", "--yes"),
        ("sweep", "--keep-last", "0"),
        ("gc",),
        ("restore", "s1", "n1"),
        ("checkpoint", "reset", "feed", "--yes"),
    ],
)
def test_writes_fail_with_the_permission_code_and_change_nothing(
    ro: ReadOnlyStore, args: tuple[str, ...]
) -> None:
    before = picture(ro.root)
    code, out, err = ro.run("--json", *args)
    assert code == ExitCode.PERMISSION, (code, out, err)
    error = json.loads(out)["error"]
    assert error["type"] == "ReadOnlyStoreError", error
    assert "read-only" in error["message"]
    assert err.startswith("error: ") and "read-only" in err and "Traceback" not in err
    assert picture(ro.root) == before


def test_restore_without_backup_into_a_writable_directory(ro: ReadOnlyStore) -> None:
    target = ro.reader.writable_dir(ro.reader.base / "target")
    code, out, err = ro.run("restore", "s1", "n1", "--no-backup", "--target", str(target))
    assert code == 0, err
    assert out.startswith(f"restore of s1/n1 into {target}: wrote 3")
    assert (target / "src" / "app.py").read_bytes() == FILES["src/app.py"]


def test_without_a_lock_file_reads_go_on_without_the_lock_and_say_so(
    ro: ReadOnlyStore,
) -> None:
    locks = ro.root / "locks"
    ro.reader.unlock(locks)
    locks.chmod(0o755)
    (locks / "gc").unlink()
    ro.reader.lock_down(locks)
    code, out, err = ro.run("cat", "s1", "n1", "README.md")
    assert (code, out) == (0, "# project\n"), err
    assert err.startswith("warning: reading without the 'gc' lock: ")
    assert not (locks / "gc").exists()


def test_a_new_store_cannot_be_made_in_a_read_only_directory(ro: ReadOnlyStore) -> None:
    parent = ro.reader.base / "locked-parent"
    parent.mkdir()
    ro.reader.lock_down(parent)
    done = ro.reader.snapstore(
        parent / "store",
        "--json",
        "create",
        "s",
        "--name",
        "n",
        "README.md",
        "--base",
        str(ro.project),
    )
    assert done.returncode == ExitCode.PERMISSION, done
    assert json.loads(done.stdout)["error"]["type"] == "ReadOnlyStoreError"
    assert os.listdir(parent) == []
