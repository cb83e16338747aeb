"""The library logs through ``logging`` under ``snapstore``, and is silent by default."""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from snapstore import SnapStore
from snapstore.backend.filelock import FileLock
from snapstore.checkpoint import Checkpointer, CountedSource, FileCheckpointStore


@pytest.mark.parametrize(
    "first_import",
    ["import snapstore", "from snapstore.maintenance import packgc", "import snapstore.checkpoint"],
)
def test_the_library_configures_no_logging_and_prints_nothing(
    tmp_path: Path, first_import: str
) -> None:
    code = (
        "import sys\n"
        f"{first_import}\n"
        "assert 'logging' not in sys.modules or 'snapstore.logs' in sys.modules\n"
        "import logging, snapstore\n"
        "assert logging.getLogger().handlers == [], logging.getLogger().handlers\n"
        "store = snapstore.SnapStore('store')\n"
        "store.put_state('s', 'n', 1)\n"
        "store.gc()\n"
        "handlers = logging.getLogger('snapstore').handlers\n"
        "assert [type(h).__name__ for h in handlers] == ['NullHandler'], handlers\n"
        "logging.getLogger('snapstore.maintenance.packgc').warning('must not be printed')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""


def test_import_snapstore_does_not_import_logging() -> None:
    code = "import sys, snapstore\nassert 'logging' not in sys.modules, 'logging imported'\n"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_gc_logs_the_packs_it_deletes_and_the_temp_files_it_removes(
    store: SnapStore, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    project = tmp_path / "many"
    project.mkdir()
    for index in range(40):
        (project / f"f{index}.txt").write_text(f"content {index}\n")
    store.create("s", "n", ["."], base_dir=project)
    store.delete("s", "n")
    (Path(store.root) / "tmp" / ".snapstore-tmp-leftover").write_bytes(b"x")
    caplog.set_level(logging.INFO, logger="snapstore")
    report = store.gc()
    assert report.packs_deleted == 1
    messages = [(r.name, r.levelno, r.getMessage()) for r in caplog.records]
    assert any(
        name == "snapstore.maintenance.gcsteps"
        and level == logging.INFO
        and "deleted pack" in message
        for name, level, message in messages
    ), messages
    assert any(
        name == "snapstore.maintenance.checks" and "stale temp file" in message
        for name, _, message in messages
    ), messages


def test_catalog_logs_commits_and_removals_at_debug(
    store: SnapStore, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="snapstore.repo.catalog")
    store.put_state("s", "n", {"cursor": 1})
    store.delete("s", "n")
    messages = [r.getMessage() for r in caplog.records if r.name == "snapstore.repo.catalog"]
    assert messages[0].startswith("committed snapshot 'n' of session 's' (")
    assert messages[1].startswith("removed manifest ")
    assert all(r.levelno == logging.DEBUG for r in caplog.records)


def test_lock_logs_waiting_and_taking_after_contention(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="snapstore.backend.filelock")
    lock = FileLock(str(tmp_path / "lock"), "demo", timeout=10)
    taken = threading.Event()
    release = threading.Event()

    def holder() -> None:
        with lock.exclusive():
            taken.set()
            release.wait(10)

    thread = threading.Thread(target=holder)
    thread.start()
    assert taken.wait(10)
    threading.Timer(0.2, release.set).start()
    with lock.shared():
        pass
    thread.join()
    messages = [r.getMessage() for r in caplog.records]
    assert messages[0].startswith("waiting for lock 'demo' (shared)")
    assert messages[1].startswith("took lock 'demo' (shared) after ")
    waited = float(messages[1].rsplit(" ", 1)[1].rstrip("s"))
    assert waited >= 0.1


def test_an_uncontended_lock_logs_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="snapstore.backend.filelock")
    with FileLock(str(tmp_path / "lock"), "demo", timeout=1).exclusive():
        pass
    assert caplog.records == []


def test_checkpointer_logs_where_it_resumes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="snapstore.checkpoint")
    checkpoints = FileCheckpointStore(tmp_path / "store", durable=False)
    records = ["a", "b", "c"]
    list(Checkpointer(checkpoints, "feed", every=1).iterate(CountedSource(records)))
    list(Checkpointer(checkpoints, "feed", every=1).iterate(CountedSource(records)))
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert messages[0] == "checkpoint 'feed': starting from the initial position None"
    assert messages[1].startswith("checkpoint 'feed': resuming from position 3 (saved ")
