"""A restore killed part-way is rolled back (or finished) by whoever comes next, and the undo
history stays as if the killed restore never happened; nothing the user had is lost."""

from __future__ import annotations

import errno
import os
import shutil
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers.fork import in_a_killed_child
from helpers.seam import KILLED_EXIT, CountingFileSystem, KillingFileSystem
from helpers.trees import read_tree, write_tree

import snapstore.restore.writer as writer
from snapstore import SnapStore
from snapstore.backend.local import LocalBackend
from snapstore.backend.seam import Handle, Kind
from snapstore.errors import InterruptedRestoreWarning, RestoreError, SourceChangedError
from snapstore.internals import journals, repository, target_locks
from snapstore.restore.actions import Plan
from snapstore.restore.backups import UndoBackups


def _killed_during_apply(fraction: float) -> Callable[..., None]:
    """An ``apply_plan`` that carries out the first ``fraction`` of the plan, then dies."""
    real = writer.apply_plan

    def dying(plan: Plan, *args: Any, **kwargs: Any) -> None:
        changes = plan.changes
        plan.actions = changes[: int(len(changes) * fraction)]
        real(plan, *args, **kwargs)
        os._exit(KILLED_EXIT)

    return dying


def _in_a_child_killed_during_apply(fraction: float, work: Callable[[], object]) -> None:
    """Run ``work`` in a child whose restore dies ``fraction`` of the way through its plan."""

    def dying() -> None:
        writer.apply_plan = _killed_during_apply(fraction)  # type: ignore[assignment]

    in_a_killed_child(work, before=dying)


@pytest.fixture
def edited(store: SnapStore, project: Path) -> dict[str, object]:
    """A checkpoint ``cp`` of the project, then the user's edits on top (the state to keep)."""
    write_tree(project, {f"many/f{i}.txt": f"original {i}\n" for i in range(40)})
    store.create("s", "cp", ["."], base_dir=project)
    write_tree(project, {f"many/f{i}.txt": f"my edit {i}\n" for i in range(40)})
    write_tree(project, {"notes.txt": "new work"})
    (project / "README.md").unlink()
    return read_tree(project)


def test_a_restore_killed_halfway_is_rolled_back_at_the_next_open(
    store: SnapStore, project: Path, edited: dict[str, object]
) -> None:
    _in_a_child_killed_during_apply(0.5, lambda: SnapStore(store.root).restore("s", "cp"))
    assert read_tree(project) != edited  # half restored
    assert journals(store).pending()
    reopened = SnapStore(store.root)
    assert read_tree(project) == edited
    assert not journals(reopened).pending()
    assert reopened.backups("s") == []  # as if the killed restore never happened
    assert not [p for p in project.rglob("*") if p.name.startswith(".snapstore-tmp")]


def test_rerunning_a_killed_restore_keeps_the_edits(
    store: SnapStore, project: Path, edited: dict[str, object]
) -> None:
    _in_a_child_killed_during_apply(0.5, lambda: SnapStore(store.root).restore("s", "cp"))
    store.restore("s", "cp")  # the same long-lived store object: recovers first
    assert store.restore("s", "cp").written == []
    store.undo("s")
    assert read_tree(project) == edited
    assert store.verify(deep=True).ok


def test_an_undo_killed_before_it_changed_anything_can_be_run_again(
    store: SnapStore, project: Path, edited: dict[str, object]
) -> None:
    store.restore("s", "cp")
    restored = read_tree(project)
    _in_a_child_killed_during_apply(0.0, lambda: SnapStore(store.root).undo("s"))
    assert read_tree(project) == restored
    reopened = SnapStore(store.root)
    assert len(reopened.backups("s")) == 1
    reopened.undo("s")
    assert read_tree(project) == edited


def test_changes_made_after_the_kill_are_kept_before_rolling_back(
    store: SnapStore, project: Path, edited: dict[str, object]
) -> None:
    _in_a_child_killed_during_apply(0.5, lambda: SnapStore(store.root).restore("s", "cp"))
    (project / "many" / "f0.txt").write_text("typed after the crash")
    after_crash = read_tree(project)
    reopened = SnapStore(store.root)
    assert read_tree(project) == edited
    (kept,) = reopened.backups("s")
    reopened.undo("s", backup=kept.name)
    assert read_tree(project) == after_crash


def test_a_killed_restore_into_a_new_directory_is_finished(
    store: SnapStore, project: Path, tmp_path: Path, edited: dict[str, object]
) -> None:
    target = tmp_path / "fresh"
    _in_a_child_killed_during_apply(0.5, lambda: SnapStore(store.root).restore("s", "cp", target))
    SnapStore(store.root)
    store.restore("s", "cp", tmp_path / "reference")
    assert read_tree(target) == read_tree(tmp_path / "reference")


def test_a_killed_restore_without_backup_is_finished(
    store: SnapStore, project: Path, tmp_path: Path, edited: dict[str, object]
) -> None:
    _in_a_child_killed_during_apply(
        0.5, lambda: SnapStore(store.root).restore("s", "cp", backup=False)
    )
    SnapStore(store.root)
    assert SnapStore(store.root).restore("s", "cp").written == []
    assert store.backups("s") == []


def test_a_damaged_journal_is_reported_and_dropped(store: SnapStore, project: Path) -> None:
    store.create("s", "cp", ["."], base_dir=project)
    journal_dir = Path(store.root) / "journal"
    journal_dir.mkdir(exist_ok=True)
    (journal_dir / ("0" * 32)).write_bytes(b"garbage")
    with pytest.warns(InterruptedRestoreWarning, match="damaged journal"):
        SnapStore(store.root)
    assert not (journal_dir / ("0" * 32)).exists()


def test_a_recovery_that_fails_warns_at_open_and_blocks_only_its_target(
    store: SnapStore, project: Path, tmp_path: Path, edited: dict[str, object]
) -> None:
    _in_a_child_killed_during_apply(0.5, lambda: SnapStore(store.root).restore("s", "cp"))
    (backup,) = [
        p for p in (Path(store.root) / "sessions").rglob("*.manifest") if "cp-" not in str(p)
    ]
    saved = backup.read_bytes()
    backup.chmod(0o644)
    backup.write_bytes(b"damaged")
    with pytest.warns(InterruptedRestoreWarning, match="could not be finished or rolled back"):
        reopened = SnapStore(store.root)
    with pytest.raises(RestoreError, match="interrupted"):
        reopened.restore("s", "cp")
    reopened.restore("s", "cp", tmp_path / "elsewhere")  # other targets are not blocked
    backup.write_bytes(saved)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        SnapStore(store.root)
    assert read_tree(project) == edited


def test_a_restore_killed_before_setting_directory_modes_rolls_back_without_an_extra_backup(
    store: SnapStore, project: Path, tmp_path: Path
) -> None:
    write_tree(project, {f"new/d{i}/f.txt": f"checkpointed {i}\n" for i in range(4)})
    store.create("s", "cp", ["."], base_dir=project)
    shutil.rmtree(project / "new")
    write_tree(project, {"README.md": "my edit\n"})
    edited = read_tree(project)
    shutil.copytree(store.root, tmp_path / "scratch-store")
    shutil.copytree(project, tmp_path / "scratch", symlinks=True)
    counting = CountingFileSystem()
    SnapStore(tmp_path / "scratch-store", fs=counting).restore("s", "cp", tmp_path / "scratch")
    trace = list(enumerate(counting.trace, 1))
    last_rename = max(i for i, op in trace if op == "replace")
    first_mode = min(i for i, op in trace if op == "fchmod" and i > last_rename)
    in_a_killed_child(
        lambda: SnapStore(store.root, fs=KillingFileSystem(first_mode)).restore("s", "cp")
    )
    assert (project / "new" / "d0" / "f.txt").exists()  # killed after writing the files
    reopened = SnapStore(store.root)
    assert read_tree(project) == edited
    assert reopened.backups("s") == []


def test_a_journal_that_cannot_be_read_for_now_is_kept(
    store: SnapStore, project: Path, edited: dict[str, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    _in_a_child_killed_during_apply(0.5, lambda: SnapStore(store.root).restore("s", "cp"))
    real_read = LocalBackend.read

    def emfile_on_journals(self: LocalBackend, handle: Handle, **kwargs: Any) -> Any:
        if handle.kind is Kind.JOURNAL:
            raise OSError(errno.EMFILE, "Too many open files")
        return real_read(self, handle, **kwargs)

    monkeypatch.setattr(LocalBackend, "read", emfile_on_journals)
    with pytest.warns(InterruptedRestoreWarning, match="could not read the journal"):
        SnapStore(store.root)
    with pytest.raises(RestoreError, match="could not read the journal"):
        store.restore("s", "cp")
    assert journals(store).pending()
    monkeypatch.setattr(LocalBackend, "read", real_read)
    SnapStore(store.root)
    assert read_tree(project) == edited


def test_an_open_does_not_recover_under_a_restore_into_a_directory_holding_the_target(
    store: SnapStore, project: Path, edited: dict[str, object]
) -> None:
    _in_a_child_killed_during_apply(0.5, lambda: SnapStore(store.root).restore("s", "cp"))
    half_restored = read_tree(project)
    with target_locks(store).restoring(os.path.realpath(project.parent)):
        SnapStore(store.root)
        assert journals(store).pending()
        assert read_tree(project) == half_restored
    SnapStore(store.root)
    assert read_tree(project) == edited


def test_the_backup_a_pending_journal_needs_survives_later_restores(
    root: Path, project: Path, tmp_path: Path, edited: dict[str, object]
) -> None:
    long_lived = SnapStore(root, undo_depth=1)
    _in_a_child_killed_during_apply(0.5, lambda: SnapStore(root).restore("s", "cp"))
    other = tmp_path / "other"
    other.mkdir()
    for round_ in range(3):
        (other / "scratch.txt").write_text(f"round {round_}")
        long_lived.restore("s", "cp", other)
    SnapStore(root)
    assert read_tree(project) == edited


def test_a_backup_that_cannot_be_kept_is_a_restore_error_and_changes_nothing(
    store: SnapStore, project: Path, edited: dict[str, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    def changing(*args: Any, **kwargs: Any) -> None:
        raise SourceChangedError("'many/f0.txt' kept changing while it was read")

    monkeypatch.setattr(UndoBackups, "commit", changing)
    with pytest.raises(RestoreError, match="nothing was changed") as failed:
        store.restore("s", "cp")
    assert failed.value.rolled_back
    assert read_tree(project) == edited
    assert not journals(store).pending()


def test_a_restore_that_cannot_trim_the_undo_history_still_succeeds(
    store: SnapStore,
    project: Path,
    edited: dict[str, object],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def failing(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.EIO, "injected")

    monkeypatch.setattr(repository(store), "trim_backups", failing)
    report = store.restore("s", "cp")
    assert report.written and report.backup
    assert "could not trim the undo backups" in caplog.text
    store.undo("s")
    assert read_tree(project) == edited


def _killed_while_making_a_directory(tmp_path: Path, fraction: float) -> tuple[Path, Path]:
    """A project whose checkpoint holds ``new/`` (20 files and a subdirectory), restored after
    ``new/`` was removed and ``keep.txt`` edited, the restore killed ``fraction`` of the way
    through: (base, store root)."""
    base, root = tmp_path / "p", tmp_path / "store"
    files = {f"new/f{i:02}.txt": f"{i}\n" for i in range(20)}
    write_tree(base, {"keep.txt": "k\n", "new/sub/g.txt": "g\n", **files})
    SnapStore(root).create("s", "one", ["."], base_dir=base)
    shutil.rmtree(base / "new")
    (base / "keep.txt").write_text("my edit\n")
    _in_a_child_killed_during_apply(fraction, lambda: SnapStore(root).restore("s", "one"))
    return base, root


def test_edits_made_after_a_kill_inside_a_directory_the_restore_created_are_kept(
    tmp_path: Path,
) -> None:
    """The rollback removes a directory the killed restore created: whatever was changed or
    added in it since is kept first, in a new backup, like any other later edit."""
    base, root = _killed_while_making_a_directory(tmp_path, 1.0)
    assert (base / "new/f00.txt").read_text() == "0\n"
    (base / "new/f00.txt").write_text("typed after the crash\n")
    (base / "new/sub/mine.txt").write_text("created after the crash\n")
    reopened = SnapStore(root)
    assert (base / "keep.txt").read_text() == "my edit\n"
    assert not (base / "new").exists()
    (kept,) = reopened.backups("s")
    assert reopened.read("s", kept.name, "new/f00.txt") == b"typed after the crash\n"
    assert reopened.read("s", kept.name, "new/sub/mine.txt") == b"created after the crash\n"


def test_a_directory_the_killed_restore_created_and_nobody_touched_needs_no_backup(
    tmp_path: Path,
) -> None:
    base, root = _killed_while_making_a_directory(tmp_path, 1.0)
    reopened = SnapStore(root)
    assert (base / "keep.txt").read_text() == "my edit\n"
    assert not (base / "new").exists()
    assert reopened.backups("s") == []


def test_a_directory_the_killed_restore_had_half_filled_needs_no_backup(tmp_path: Path) -> None:
    """What the killed restore had not written yet is simply missing: no later edit."""
    base, root = _killed_while_making_a_directory(tmp_path, 0.5)
    assert 0 < len(list((base / "new").iterdir())) < 20
    reopened = SnapStore(root)
    assert (base / "keep.txt").read_text() == "my edit\n"
    assert not (base / "new").exists()
    assert reopened.backups("s") == []


def test_the_backup_an_interrupted_undo_was_restoring_is_not_trimmed(tmp_path: Path) -> None:
    """An undo into a new directory, killed part-way, is finished by whoever comes next: the
    backup it was restoring must survive other restores' trimming of the undo history."""
    base, root, elsewhere = tmp_path / "p", tmp_path / "store", tmp_path / "new"
    write_tree(base, {f"f{i}.txt": f"{i}\n" for i in range(10)})
    store = SnapStore(root, undo_depth=1)
    store.create("s", "one", ["."], base_dir=base)
    write_tree(base, {f"f{i}.txt": f"edited {i}\n" for i in range(10)})
    store.restore("s", "one")
    (first,) = store.backups("s")
    _in_a_child_killed_during_apply(
        0.5, lambda: SnapStore(root, undo_depth=1).undo("s", target=elsewhere)
    )
    write_tree(base, {"f0.txt": "edited again\n"})
    store.restore("s", "one")  # keeps a second backup, trims to one
    store.gc()
    SnapStore(root, undo_depth=1)  # finishes the undo
    assert {p.name: p.read_text() for p in elsewhere.iterdir()} == {
        f"f{i}.txt": f"edited {i}\n" for i in range(10)
    }
    assert first.name in {b.name for b in store.backups("s")}


def test_undo_takes_only_the_full_name_of_an_undo_backup(tmp_path: Path) -> None:
    """A selector (``latest``) or a checkpoint's name names no undo backup: undoing to it
    would be a restore under another name."""
    from snapstore.errors import SnapshotNotFound

    base = tmp_path / "p"
    write_tree(base, {"a.txt": "one"})
    store = SnapStore(tmp_path / "store")
    with pytest.raises(SnapshotNotFound, match="no undo backup in session 's'"):
        store.undo("s")
    store.create("s", "cp", ["."], base_dir=base)
    write_tree(base, {"a.txt": "two"})
    store.restore("s", "cp")
    (kept,) = store.backups("s")
    for wrong in ("latest", "latest~1", "cp", kept.name[:8]):
        with pytest.raises(SnapshotNotFound, match="no undo backup"):
            store.undo("s", backup=wrong, dry_run=True)
    assert store.undo("s", backup=kept.name).written == ["a.txt"]
    assert (base / "a.txt").read_text() == "two"


def test_a_command_that_recovers_an_interrupted_restore_says_so(tmp_path: Path) -> None:
    """Opening the store rolls a killed restore back, whatever the command: the command line
    says it changed the target, as a warning."""
    from helpers.cli import Cli

    cli = Cli(tmp_path)
    base = tmp_path / "p"
    write_tree(base, {f"f{i}.txt": f"{i}\n" for i in range(20)})
    SnapStore(cli.root).create("s", "cp", ["."], base_dir=base)
    write_tree(base, {f"f{i}.txt": f"edited {i}\n" for i in range(20)})
    _in_a_child_killed_during_apply(0.5, lambda: SnapStore(cli.root).restore("s", "cp"))
    result = cli.run("list")
    assert result.code == 0
    assert f"warning: put {base} back as it was before an interrupted restore" in result.stderr


def test_a_create_in_a_process_opened_before_the_kill_records_the_tree_rolled_back(
    store: SnapStore, project: Path, edited: dict[str, object], tmp_path: Path
) -> None:
    """The guard recovers a killed restore of a directory before a create records it, also
    in a process whose open came before the kill (a server): the checkpoint holds the user's
    edits, never the half-restored tree, and the killed restore leaves no backup behind."""
    _in_a_child_killed_during_apply(0.5, lambda: SnapStore(store.root).restore("s", "cp"))
    assert read_tree(project) != edited
    store.create("s", "after", ["."], base_dir=project)
    assert read_tree(project) == edited
    assert not journals(store).pending() and store.backups("s") == []
    store.restore("s", "after", tmp_path / "out")
    assert read_tree(tmp_path / "out") == edited
