"""Restore, undo and delete from the web UI: dry runs change nothing, confirmed actions do
what the library does, errors are JSON documents."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from snapstore import SnapStore

APP = "src/app.py"


def post(client: Any, action: str, body: dict[str, Any]) -> Any:
    return client.post(f"/api/{action}", json=body, headers={"X-CSRF-Token": client.secrets.csrf})


def test_a_dry_run_previews_and_changes_nothing(client: Any, project: Path) -> None:
    before = (project / APP).read_text()
    answer = post(client, "restore", {"session": "agent", "name": "step-1", "dry_run": True})
    assert answer.status_code == 200
    report = answer.json()
    assert report["dry_run"] is True and report["backup"] is None
    assert APP in report["written"] and "NOTES.md" in report["removed"]
    assert report["target"] == str(project)
    assert (project / APP).read_text() == before and (project / "NOTES.md").exists()


def test_restore_then_undo_puts_the_directory_back(
    client: Any, project: Path, two_steps: SnapStore
) -> None:
    report = post(client, "restore", {"session": "agent", "name": "step-1"}).json()
    assert report["counts"]["written"] >= 1 and report["backup"]
    assert "version one" in (project / APP).read_text()
    assert not (project / "NOTES.md").exists()
    undone = post(client, "undo", {"session": "agent", "backup": report["backup"]}).json()
    assert "version two" in (project / APP).read_text()
    assert (project / "NOTES.md").read_text() == "notes\n"
    assert undone["backup"]  # the undo kept its own backup: it can be undone in turn
    assert [b.name for b in two_steps.backups("agent")][-1] == undone["backup"]


def test_restore_of_selected_paths_leaves_the_rest(client: Any, project: Path) -> None:
    report = post(client, "restore", {"session": "agent", "name": "step-1", "paths": [APP]}).json()
    assert report["written"] == [APP]
    assert "version one" in (project / APP).read_text()
    assert (project / "NOTES.md").exists()


def test_undo_of_the_newest_backup_without_a_name(client: Any, project: Path) -> None:
    post(client, "restore", {"session": "agent", "name": "step-1"})
    post(client, "undo", {"session": "agent"})
    assert "version two" in (project / APP).read_text()


def test_delete_removes_one_checkpoint(client: Any, two_steps: SnapStore) -> None:
    answer = post(client, "delete", {"session": "agent", "name": "step-1"}).json()
    assert answer["deleted"] is True
    assert [info.name for info in two_steps.list("agent")] == ["step-2"]
    assert post(client, "delete", {"session": "agent", "name": "step-1"}).json()["deleted"] is False


def test_errors_are_json_documents(client: Any, project: Path) -> None:
    missing = post(client, "restore", {"session": "agent", "name": "nope"})
    assert missing.status_code == 404
    assert missing.json()["error"]["type"] == "SnapshotNotFound"
    assert post(client, "restore", {"session": "agent"}).status_code == 400
    assert (
        post(client, "restore", {"session": "agent", "name": "step-1", "paths": "x"}).status_code
        == 400
    )
    assert post(client, "undo", {"session": "agent"}).status_code == 404  # no backup yet
    bad = client.post("/api/restore", content=b"[1]", headers={"X-CSRF-Token": client.secrets.csrf})
    assert bad.status_code == 400
    assert "version two" in (project / APP).read_text()
