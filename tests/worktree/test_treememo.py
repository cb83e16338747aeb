"""A process that creates again builds only the tree objects of what changed, and commits
exactly what a new process would: the same root tree, every object stored."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers.trees import write_tree

from snapstore import SnapStore
from snapstore.format.tree import TreeRef
from snapstore.internals import repository
from snapstore.worktree import treememo


@pytest.fixture(autouse=True)
def fresh_memo() -> Iterator[None]:
    treememo.forget_all()
    yield
    treememo.forget_all()


@pytest.fixture
def full_builds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many rows each full build (not a rebuild) was given."""
    counted: list[int] = []
    real = treememo.build_trees

    def counting(rows: object, attrs: object = None) -> object:
        counted.append(len(rows))  # type: ignore[arg-type]
        return real(rows, attrs)  # type: ignore[arg-type]

    monkeypatch.setattr(treememo, "build_trees", counting)
    return counted


def root_of(store: SnapStore, name: str) -> TreeRef:
    tree = repository(store).catalog.read("s", name).tree
    assert tree is not None
    return tree


def as_new_process(store: SnapStore, base: Path, name: str) -> TreeRef:
    """The root a process that remembers nothing commits for the same tree."""
    saved = dict(treememo._BUILT)
    treememo.forget_all()
    store.create("s", name, ["."], base_dir=base)
    treememo._BUILT.update(saved)
    return root_of(store, name)


def grow(base: Path) -> None:
    write_tree(base / "new/deep/er", {"x.txt": "x", "y.txt": "y"})


def shrink(base: Path) -> None:
    shutil.rmtree(base / "src/pkg")


def file_to_dir(base: Path) -> None:
    (base / "docs/guide.md").unlink()
    write_tree(base / "docs/guide.md", {"inside.txt": "now a directory"})


def dir_to_file(base: Path) -> None:
    shutil.rmtree(base / "src")
    (base / "src").write_text("now a file")


def empty_dir(base: Path) -> None:
    (base / "src/pkg/mod.py").unlink()


def edit(base: Path) -> None:
    (base / "src/app.py").write_text("print('edited')\n")


def mode_only(base: Path) -> None:
    os.chmod(base / "src/app.py", 0o600)


@pytest.mark.parametrize(
    "change",
    [grow, shrink, file_to_dir, dir_to_file, empty_dir, edit, mode_only],
    ids=lambda change: change.__name__,
)
def test_a_create_after_a_change_commits_what_a_new_process_commits(
    tmp_path: Path, change: Callable[[Path], None], full_builds: list[int]
) -> None:
    base = tmp_path / "p"
    write_tree(
        base,
        {
            "README.md": "readme\n",
            "src/app.py": "print('app')\n",
            "src/pkg/mod.py": "x = 1\n",
            "docs/guide.md": "guide\n",
            **{f"lib/m{i}.py": f"m = {i}\n" for i in range(40)},
        },
    )
    store = SnapStore(tmp_path / "store", durable=False)
    store.create("s", "before", ["."], base_dir=base)
    change(base)
    store.create("s", "after", ["."], base_dir=base)
    assert len(full_builds) == 1  # the first create only
    assert root_of(store, "after") == as_new_process(store, base, "fresh")
    assert store.verify(deep=True).ok


def test_an_unchanged_tree_builds_nothing_again(tmp_path: Path, full_builds: list[int]):
    base = tmp_path / "p"
    write_tree(base, {f"d{i}/f{j}.txt": f"{i}-{j}" for i in range(5) for j in range(5)})
    store = SnapStore(tmp_path / "store", durable=False)
    first = store.create("s", "one", ["."], base_dir=base)
    second = store.create("s", "two", ["."], base_dir=base)
    assert len(full_builds) == 1
    assert root_of(store, "one") == root_of(store, "two")
    assert (first.file_count, first.total_bytes) == (second.file_count, second.total_bytes)


def test_remembered_objects_collected_meanwhile_are_built_again(
    tmp_path: Path, full_builds: list[int]
):
    """Another process deleted the snapshot and collected its objects: the next create
    must not name them (it finds them missing and builds everything)."""
    base = tmp_path / "p"
    write_tree(base, {"a/x.txt": "x", "b/y.txt": "y"})
    store = SnapStore(tmp_path / "store", durable=False)
    store.create("s", "one", ["."], base_dir=base)
    store.delete("s", "one")
    assert store.gc().blobs_deleted > 0
    store.create("s", "two", ["."], base_dir=base)
    assert len(full_builds) == 2
    assert store.verify(deep=True).ok
    target = tmp_path / "out"
    store.restore("s", "two", target)
    assert (target / "a/x.txt").read_text() == "x"


def test_an_undo_backup_does_not_replace_what_is_remembered(tmp_path: Path, full_builds: list[int]):
    base = tmp_path / "p"
    write_tree(base, {"a/x.txt": "x", **{f"b/m{i}.txt": str(i) for i in range(40)}})
    store = SnapStore(tmp_path / "store", durable=False)
    store.create("s", "one", ["."], base_dir=base)
    (base / "a/x.txt").write_text("edited")
    report = store.restore("s", "one")
    assert report.backup is not None
    store.create("s", "two", ["."], base_dir=base)
    assert len(full_builds) == 2  # the first create and the backup; "two" was a rebuild
    assert root_of(store, "two") == as_new_process(store, base, "fresh")


def test_the_oldest_trees_are_forgotten_beyond_the_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(treememo, "MAX_REMEMBERED_ROWS", 25)
    store = SnapStore(tmp_path / "store", durable=False)
    for name in ("a", "b", "c"):
        write_tree(tmp_path / name, {f"f{i}.txt": str(i) for i in range(10)})
        store.create("s", name, ["."], base_dir=tmp_path / name)
    remembered = [base for _, base in treememo._BUILT]
    assert remembered == [str(tmp_path / "b"), str(tmp_path / "c")]


def test_a_child_forked_while_another_thread_holds_a_memo_lock_can_create(
    tmp_path: Path,
) -> None:
    """The memo shared by every store of a process is locked by a module-level lock; a child
    forked while another thread holds it must not inherit it held (it would hang)."""
    import signal
    import threading

    base = tmp_path / "p"
    write_tree(base, {"a.txt": "a"})
    store = SnapStore(tmp_path / "store", durable=False)
    store.create("s", "one", ["."], base_dir=base)
    lock = treememo._LOCK
    inside, leave = threading.Event(), threading.Event()

    def holding() -> None:
        with lock:
            inside.set()
            leave.wait()

    thread = threading.Thread(target=holding)
    thread.start()
    inside.wait()
    pid = os.fork()
    if pid == 0:
        signal.alarm(10)
        try:
            child = SnapStore(tmp_path / "store", durable=False)
            child.create("s", "two", ["."], base_dir=base)
            child.list()
            os._exit(0)
        except BaseException:
            os._exit(1)
    leave.set()
    thread.join()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_a_create_counts_on_the_packs_of_the_trees_it_reuses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, full_builds: list[int]
) -> None:
    """Reusing a remembered tree object is counting on a stored object like any other: its
    pack's name is flushed with the create (its writer may have died before flushing it)."""
    from snapstore.backend.local import LocalBackend
    from snapstore.backend.seam import Handle, Kind

    base = tmp_path / "p"
    for directory in ("a/b", "a/c", "d"):
        (base / directory).mkdir(parents=True)
    (base / "a/link").symlink_to("b")  # no file: only tree objects are stored
    store = SnapStore(tmp_path / "store")
    store.create("s", "one", ["."], base_dir=base)
    noted: list[Handle] = []
    real = LocalBackend.note_existing

    def noting(self: LocalBackend, handle: Handle) -> None:
        noted.append(handle)
        real(self, handle)

    monkeypatch.setattr(LocalBackend, "note_existing", noting)
    store = SnapStore(tmp_path / "store")  # not the one that flushed that pack's name
    store.create("s", "two", ["."], base_dir=base)
    assert len(full_builds) == 1  # the second create reused the first one's trees
    assert root_of(store, "two") == root_of(store, "one")
    assert any(handle.kind is Kind.PACK for handle in noted)
