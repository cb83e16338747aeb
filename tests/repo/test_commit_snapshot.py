"""``Repository.commit_snapshot`` is the one place a new manifest is written: checkpoints,
incremental creates, undo backups and state values all commit through it, and it keeps the
last committed state intact when it refuses."""

from __future__ import annotations

import inspect
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from snapstore import SnapStore
from snapstore.backend.seam import Handle, Kind
from snapstore.errors import MissingBlobError, SnapshotExistsError
from snapstore.internals import repository
from snapstore.repo.commits import Draft
from snapstore.repo.repository import Repository


@pytest.fixture
def committing(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The names of the snapshots committed through ``Repository.commit_snapshot``."""
    names: list[str] = []
    real_commit = Repository.commit_snapshot

    def commit_snapshot(self: Repository, draft: Draft, **kwargs: Any) -> Any:
        result = real_commit(self, draft, **kwargs)
        names.append(draft.name)
        return result

    monkeypatch.setattr(Repository, "commit_snapshot", commit_snapshot)
    yield names


def _guard_manifest_writes(store: SnapStore, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record every manifest the store's backend writes, failing one written with no
    ``commit_snapshot`` on the stack."""
    backend = repository(store).backend
    written: list[str] = []
    real_write = backend.write

    def write(handle: Handle, data: bytes, **kwargs: Any) -> Any:
        if handle.kind is Kind.MANIFEST:
            callers = {frame.function for frame in inspect.stack()}
            assert "commit_snapshot" in callers, f"manifest {handle.name} written outside a commit"
            written.append(handle.name)
        return real_write(handle, data, **kwargs)

    monkeypatch.setattr(backend, "write", write)
    return written


def test_every_new_manifest_is_written_by_commit_snapshot(
    store: SnapStore, project: Path, committing: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    written = _guard_manifest_writes(store, monkeypatch)
    first = store.create("s", "first", ["."], base_dir=project)
    (project / "README.md").write_text("changed\n")
    report = store.create_incremental(
        "s",
        "second",
        ["."],
        base_dir=project,
        parent=None,
        changes=lambda: None,
    )
    store.restore("s", "first")  # commits an undo backup
    store.put_state("s", "position", {"offset": 3})
    backup = store.backups("s")[0].name
    assert committing == ["first", report.info.name, backup, "position"]
    assert len(written) == 4
    assert first.name == "first" and store.get_state("s", "position") == {"offset": 3}


def test_a_refused_commit_leaves_the_committed_snapshot_as_it_was(
    store: SnapStore, project: Path
) -> None:
    repo = repository(store)
    old = store.create("s", "n", ["README.md"], base_dir=project)
    with repo.blobs_in_use(), pytest.raises(SnapshotExistsError):
        repo.commit_snapshot(Draft("s", "n", "state", value=1), if_exists="error")
    assert store.get("s", "n").info == old
    assert store.latest("s") == old


def test_a_commit_whose_blob_vanished_commits_nothing(store: SnapStore, project: Path) -> None:
    repo = repository(store)
    store.create("s", "a", ["."], base_dir=project)
    entry = next(e for e in store.get("s", "a").entries if e.kind == "file")
    missing_row = (entry.path, "file", entry.mode, entry.size, 0, b"\x07" * 32, None)
    with repo.blobs_in_use(), pytest.raises(MissingBlobError, match="vanished before commit"):
        repo.commit_snapshot(Draft("s", "b", "state", value=1), unverified=[missing_row])
    assert [info.name for info in store.list("s")] == ["a"]


def test_a_commit_numbers_its_snapshot_and_times_it_under_the_session_lock(
    store: SnapStore,
) -> None:
    repo = repository(store)
    seen: list[Any] = []

    def committed(info: Any) -> None:
        seen.append((info, repo.catalog.read("s", info.name).info))
        other = threading.Thread(target=lambda: seen.append(_try_lock(repo, "s")), daemon=True)
        other.start()
        other.join()

    with repo.blobs_in_use():
        info, replaced = repo.commit_snapshot(
            Draft("s", "v", "state", ttl=60.0, value=[1, 2]), committed=committed
        )
    assert not replaced
    assert seen[0] == (info, info)
    assert seen[1] is False  # the session's lock was held while ``committed`` ran
    assert info.expires_at is not None
    assert (info.expires_at - info.created_at).total_seconds() == pytest.approx(60.0)
    assert store.get_state("s", "v") == [1, 2]


def _try_lock(repo: Repository, session: str) -> bool:
    """Whether another thread could take the session's lock at once."""
    with repo.sessions.lock(session).exclusive_if_free() as free:
        return free
