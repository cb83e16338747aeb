"""What an unprivileged user sees: a restore can replace files inside a read-only directory
the user owns, and the directory keeps its mode; a restore into a new directory below an
ancestor the user may only search (mode 0711) makes it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.as_user import give_to_nobody, run_as_nobody, shared_scratch
from helpers.trees import write_tree


@pytest.fixture
def scratch_for_all() -> Iterator[Path]:
    yield from shared_scratch()


def test_a_file_in_a_read_only_directory_is_restored(scratch_for_all: Path) -> None:
    project = scratch_for_all / "proj"
    write_tree(project, {"ro/config.txt": "original", "ro/gone.txt": "restore me"})
    give_to_nobody(scratch_for_all)
    result = run_as_nobody(
        """
        import os
        from snapstore import SnapStore
        store = SnapStore(root)
        store.create("s", "n", ["."], base_dir=project)
        os.chmod(project + "/ro/config.txt", 0o644)
        with open(project + "/ro/config.txt", "w") as file:
            file.write("edited")
        os.unlink(project + "/ro/gone.txt")
        os.chmod(project + "/ro", 0o555)
        report = store.restore("s", "n")
        print(sorted(report.written))
        print(open(project + "/ro/config.txt").read(), open(project + "/ro/gone.txt").read())
        print(oct(os.stat(project + "/ro").st_mode & 0o777))
        store.undo("s")
        print(open(project + "/ro/config.txt").read(), os.path.exists(project + "/ro/gone.txt"))
        print(oct(os.stat(project + "/ro").st_mode & 0o777))
        """,
        root=str(scratch_for_all / "store"),
        project=str(project),
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.splitlines() == [
        "['ro', 'ro/config.txt', 'ro/gone.txt']",
        "original restore me",
        "0o755",
        "edited False",
        "0o555",
    ]


@pytest.mark.parametrize("target", ["out", "deep/er/out"])
def test_a_new_target_below_a_search_only_ancestor_is_made(
    scratch_for_all: Path, target: str
) -> None:
    """The target (and its missing parents) is made through the ancestors, which the user
    may pass through but not list: as a lookup by path needs, search permission is enough."""
    locked = scratch_for_all / "locked"
    home = locked / "home"
    write_tree(home / "proj", {"a.txt": "a", "sub/b.txt": "b"})
    give_to_nobody(home)
    locked.chmod(0o711)
    result = run_as_nobody(
        """
        import os
        from snapstore import SnapStore
        store = SnapStore(home + "/store")
        store.create("s", "n", ["."], base_dir=home + "/proj")
        store.restore("s", "n", home + "/" + target)
        print(sorted(os.listdir(home + "/" + target)))
        print(open(home + "/" + target + "/sub/b.txt").read())
        """,
        home=str(home),
        target=target,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.splitlines() == ["['a.txt', 'sub']", "b"]
