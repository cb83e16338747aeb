"""The library on a store this process can read but not write (see tests/helpers/readonly.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.readonly import ReadOnlyAccess, read_only_access

from snapstore import SnapStore

LIBRARY_USE = """
import json, sys
from snapstore import ReadOnlyStoreError, SnapStore
store = SnapStore(sys.argv[1], lock_timeout=1)
result = {"read_only": store.read_only, "names": [i.name for i in store.list()]}
result["read"] = store.read("s", "n", "a.txt").decode()
result["verify_ok"] = store.verify(deep=True).ok
for name, call in [
    ("put_state", lambda: store.put_state("s", "v", 1)),
    ("delete", lambda: store.delete("s", "n")),
    ("sweep", lambda: store.sweep(keep_last=0)),
    ("gc", lambda: store.gc()),
]:
    try:
        call()
        result[name] = "no error"
    except ReadOnlyStoreError as error:
        result[name] = ["ReadOnlyStoreError", isinstance(error, PermissionError), str(error)]
try:
    store.create("s", "new", ["a.txt"], base_dir=sys.argv[3])
    result["create"] = "no error"
except PermissionError as error:
    result["create"] = [type(error).__name__, [i.name for i in store.list()]]
try:
    SnapStore(sys.argv[2])
    result["new_store"] = "no error"
except ReadOnlyStoreError as error:
    result["new_store"] = ["ReadOnlyStoreError", str(error)]
print(json.dumps(result))
"""

HOLD_GC_SHARED = """
import sys, time
from snapstore.backend.filelock import FileLock
with FileLock(sys.argv[1], "gc", 5).shared():
    print("holding", flush=True)
    time.sleep(60)
"""


@pytest.fixture
def reader() -> Iterator[ReadOnlyAccess]:
    with read_only_access() as access:
        if isinstance(access, str):
            pytest.skip(access)
        yield access


def _store(reader: ReadOnlyAccess) -> Path:
    project = reader.base / "project"
    project.mkdir()
    (project / "a.txt").write_text("alpha\n")
    reader.share(project)
    root = reader.base / "store"
    SnapStore(root, lock_timeout=5).create("s", "n", ["a.txt"], base_dir=project)
    return root


def test_reads_work_and_writes_raise_read_only_store_error(reader: ReadOnlyAccess) -> None:
    root = _store(reader)
    project = reader.base / "project"
    parent = reader.base / "parent"
    parent.mkdir()
    reader.lock_down(root, parent)
    done = reader.run("-c", LIBRARY_USE, str(root), str(parent / "new"), str(project))
    assert done.returncode == 0, done.stderr.decode()
    result = json.loads(done.stdout)
    assert result["read_only"] is True
    assert result["names"] == ["n"] and result["read"] == "alpha\n"
    assert result["verify_ok"] is True
    for name, lock in [
        ("put_state", None),
        ("delete", None),
        ("sweep", None),
        ("gc", "gc-run"),
    ]:
        kind, is_permission_error, message = result[name]
        assert (kind, is_permission_error) == ("ReadOnlyStoreError", True), name
        if lock is None:
            assert "is read-only for this process" in message, message
        else:
            assert f"needs the {lock!r} lock exclusively" in message, message
    error_type, names_after = result["create"]
    assert error_type == "ReadOnlyStoreError"
    assert names_after == ["n"]
    assert result["new_store"][0] == "ReadOnlyStoreError"
    assert not (parent / "new").exists()
    reader.unlock(root)
    assert SnapStore(root).read_only is False


def test_a_read_only_reader_keeps_gc_away_while_it_reads(reader: ReadOnlyAccess) -> None:
    root = _store(reader)
    reader.lock_down(root)
    holder = reader.popen("-c", HOLD_GC_SHARED, str(root / "locks" / "gc"))
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == b"holding\n", holder.stderr
        reader.unlock(root)
        report = SnapStore(root, lock_timeout=0.3).gc()
        assert report.skipped is True
        assert "could not take lock 'gc'" in (report.reason or "")
    finally:
        holder.kill()
        holder.communicate(timeout=30)
    reader.unlock(root)
    assert SnapStore(root, lock_timeout=5).gc().skipped is False
