"""A ``SnapStore`` dropped without ``close`` releases its open files, as a dropped ``open()``
file does; ``close`` and ``with`` release them at once; threads still using a store never
see its files closed under them."""

from __future__ import annotations

import gc
import os
import threading
from collections.abc import Callable
from pathlib import Path

from helpers.trees import write_tree

from snapstore import SnapStore

ROUNDS = 30


def _open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def _settle() -> None:
    """Let fold threads of dropped stores finish their step, then collect what is dropped."""
    for thread in threading.enumerate():
        if thread.name == "snapstore-fold":
            thread.join()
    gc.collect()


def _use_and_drop(root: Path, project: Path, round_number: int) -> None:
    """Open a store, create, read, restore, list and store a value, then drop it unclosed.
    A fold threshold of 2 starts a fold thread after most creates, which may still be
    running when the store is dropped."""
    store = SnapStore(root, durable=False, fold_threshold=2)
    (project / f"file{round_number % 5}.txt").write_text(f"round {round_number}\n" * 50)
    info = store.create("s", None, ["."], base_dir=project)
    assert store.read("s", info.name, "README.md") == b"# sample\n"
    store.restore("s", info.name, backup=round_number % 2 == 0)
    assert store.list("s")
    store.put_state("s", "resume", round_number)
    assert store.get_state("s", "resume") == round_number


def test_dropped_stores_release_their_descriptors(root: Path, project: Path) -> None:
    for warm_up in range(3):
        _use_and_drop(root, project, warm_up)
    _settle()
    before = _open_descriptors()
    for round_number in range(ROUNDS):
        _use_and_drop(root, project, round_number)
    _settle()
    assert _open_descriptors() <= before
    with SnapStore(root) as store:
        report = store.verify(deep=True)
        assert report.ok, report


def test_close_and_with_release_descriptors_and_the_store_stays_usable(
    root: Path, project: Path
) -> None:
    with SnapStore(root, durable=False) as store:
        info = store.create("s", "one", ["."], base_dir=project)
    _settle()
    before = _open_descriptors()
    kept = []
    for _ in range(ROUNDS):
        with SnapStore(root, durable=False) as store:
            assert store.read("s", info.name, "src/app.py") == b"print('hello')\n"
        kept.append(store)  # still referenced: only the with block can have closed its files
    assert _open_descriptors() <= before
    store = kept[0]
    store.close()
    store.close()
    assert store.read("s", "one", "src/util.py").startswith(b"def add")
    store.close()
    assert _open_descriptors() <= before


def test_threads_using_a_store_its_creator_dropped_keep_reading(root: Path, project: Path) -> None:
    """The store is dropped by the thread that made it while others read through it: its
    files stay open for them until the last user lets go."""
    for i in range(20):
        write_tree(project / "many", {f"f{i}.txt": f"content {i}\n" * 100})
    store = SnapStore(root, durable=False)
    name = store.create("s", "one", ["."], base_dir=project).name
    errors: list[BaseException] = []
    started = threading.Barrier(5)

    def reader(read: Callable[[str, str, str], bytes]) -> None:
        try:
            started.wait()
            for _ in range(40):
                for i in range(20):
                    assert read("s", name, f"many/f{i}.txt") == f"content {i}\n".encode() * 100
                gc.collect()
        except BaseException as error:  # reported on the main thread
            errors.append(error)

    threads = [threading.Thread(target=reader, args=(store.read,)) for _ in range(4)]
    for thread in threads:
        thread.start()
    del store
    started.wait()
    gc.collect()
    for thread in threads:
        thread.join()
    assert not errors, errors
