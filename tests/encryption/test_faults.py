"""An I/O error at any call of the filesystem while an encrypted store is made, or while it
takes a checkpoint, leaves the last committed state intact: the store opens with its
password, lists what it listed, and restores it byte for byte."""

from __future__ import annotations

import shutil
from pathlib import Path

from helpers.seam import CountingFileSystem, FailingFileSystem, FastFileSystem

from snapstore import SnapStore
from snapstore.errors import SnapstoreError

FILES = {"a.txt": b"alpha\n" * 50, "dir/b.bin": bytes(range(256)) * 800}


def _work(tmp_path: Path, version: int) -> Path:
    base = tmp_path / "work"
    for name, data in FILES.items():
        (base / name).parent.mkdir(parents=True, exist_ok=True)
        (base / name).write_bytes(data + str(version).encode())
    return base


def _restores(root: Path, target: Path, name: str, version: int) -> None:
    with SnapStore(root, password="pw", fs=FastFileSystem()) as store:
        store.restore("s", name, target=str(target), backup=False)
    for path, data in FILES.items():
        assert (target / path).read_bytes() == data + str(version).encode()


def _fail_points(total: int) -> list[int]:
    return sorted({*range(1, total + 1, max(1, total // 25)), total})


def test_a_failed_call_while_the_store_is_made_leaves_a_store_that_opens(tmp_path: Path) -> None:
    base = _work(tmp_path, 1)
    counting = CountingFileSystem()
    with SnapStore(tmp_path / "counted", password="pw", encrypt=True, fs=counting) as store:
        store.create("s", "n1", base_dir=str(base), paths=["."])
    assert counting.calls > 20
    for fail_at in _fail_points(counting.calls):
        root = tmp_path / f"store-{fail_at}"
        failing = FailingFileSystem(fail_at)
        try:
            with SnapStore(root, password="pw", encrypt=True, fs=failing) as store:
                store.create("s", "n1", base_dir=str(base), paths=["."])
        except (OSError, SnapstoreError):
            pass
        with SnapStore(root, password="pw", fs=FastFileSystem()) as store:
            names = [info.name for info in store.list()]
            if names == []:
                store.create("s", "n1", base_dir=str(base), paths=["."])
        _restores(root, tmp_path / f"target-{fail_at}", "n1", 1)
        shutil.rmtree(root)


def test_a_failed_call_in_a_create_keeps_the_last_checkpoint(tmp_path: Path) -> None:
    template = tmp_path / "template"
    with SnapStore(template, password="pw", encrypt=True, fs=FastFileSystem()) as store:
        store.create("s", "n1", base_dir=str(_work(tmp_path, 1)), paths=["."])
    base = _work(tmp_path, 2)
    counting = CountingFileSystem()
    shutil.copytree(template, tmp_path / "counted")
    with SnapStore(tmp_path / "counted", password="pw", fs=counting) as store:
        store.create("s", "n2", base_dir=str(base), paths=["."])
    assert counting.calls > 20
    for fail_at in _fail_points(counting.calls):
        root = tmp_path / f"store-{fail_at}"
        shutil.copytree(template, root)
        try:
            with SnapStore(root, password="pw", fs=FailingFileSystem(fail_at)) as store:
                store.create("s", "n2", base_dir=str(base), paths=["."])
        except (OSError, SnapstoreError):
            pass
        _restores(root, tmp_path / f"one-{fail_at}", "n1", 1)
        with SnapStore(root, password="pw", fs=FastFileSystem()) as store:
            committed = "n2" in [info.name for info in store.list("s")]
        if committed:
            _restores(root, tmp_path / f"two-{fail_at}", "n2", 2)
        shutil.rmtree(root)
