"""``snapstore serve --allow``: checkpoints of directories outside the allowed ones may be
listed, never deleted or replaced; a call that would delete several is refused whole."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.service import RpcFailed, Server
from helpers.trees import write_tree


def _refused(server: Server, method: str, params: dict[str, object]) -> None:
    with pytest.raises(RpcFailed) as failed:
        server.call(method, params)
    assert failed.value.data["type"] == "PathNotAllowedError", (method, failed.value.error)


def test_checkpoints_outside_the_allowed_directories_are_kept(tmp_path: Path) -> None:
    project, outside = tmp_path / "project", tmp_path / "project-old"
    write_tree(project, {"a.txt": "a\n"})
    write_tree(outside, {"s.txt": "s\n"})
    store = tmp_path / "store"
    with Server(store, tmp_path) as server:
        for session in ("mixed", "theirs"):
            server.call(
                "create",
                {"session": session, "name": "old", "paths": ["s.txt"], "base_dir": str(outside)},
            )
        server.call(
            "create",
            {"session": "mixed", "name": "mine", "paths": ["a.txt"], "base_dir": str(project)},
        )
        server.call(
            "create",
            {"session": "ours", "name": "mine", "paths": ["a.txt"], "base_dir": str(project)},
        )
        server.call("put_state", {"session": "theirs", "name": "cursor", "value": 1})
        (outside / "s.txt").write_text("changed\n")
        server.call("restore", {"session": "theirs", "name": "old"})  # keeps an undo backup
    with Server(store, tmp_path, serve_args=("--allow", str(project))) as server:
        _refused(server, "delete", {"session": "theirs", "name": "old"})
        _refused(server, "delete_session", {"session": "mixed"})
        backup = server.call("backups", {"session": "theirs"})["backups"][0]["name"]
        _refused(server, "delete", {"session": "theirs", "name": backup})
        _refused(server, "sweep", {"keep_last": 0})
        _refused(server, "sweep", {"keep_last": 0, "dry_run": True})
        _refused(
            server,
            "create",
            {"session": "theirs", "name": "old", "paths": ["a.txt"], "base_dir": str(project)},
        )
        names = {(row["session"], row["name"]) for row in server.call("list")["snapshots"]}
        assert {("mixed", "old"), ("mixed", "mine"), ("theirs", "old"), ("ours", "mine")} <= names
        assert server.call("delete", {"session": "mixed", "name": "mine"})["deleted"] is True
        assert server.call("delete", {"session": "theirs", "name": "cursor"})["deleted"] is True
        assert server.call("delete", {"session": "theirs", "name": "gone"})["deleted"] is False
        assert server.call("delete_session", {"session": "ours"})["deleted"] == 1
        assert server.call("sweep", {"ttl": 3600})["deleted"] == []
        for _ in range(2):  # the second replaces a checkpoint of an allowed directory
            server.call(
                "create",
                {"session": "new", "name": "n", "paths": ["a.txt"], "base_dir": str(project)},
            )
    with Server(store, tmp_path) as server:
        left = {(row["session"], row["name"]) for row in server.call("list")["snapshots"]}
        assert left == {("mixed", "old"), ("theirs", "old"), ("new", "n")}
