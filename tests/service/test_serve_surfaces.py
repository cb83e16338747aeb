"""``snapstore serve`` for bridges that want what agents get: ``--allow`` confinement,
``resolve``, resolved names in results, counts and capped lists, ``absent`` paths, patches and
windowed reads; every addition leaves the earlier fields as they were."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.service import RpcFailed, Server
from helpers.trees import write_tree


def test_serve_with_allow_is_confined(tmp_path: Path) -> None:
    project, outside = tmp_path / "project", tmp_path / "project-old"
    write_tree(project, {"a.txt": "a\n"})
    write_tree(outside, {"s.txt": "s\n"})
    (project / "link").symlink_to(outside)
    with Server(tmp_path / "store", tmp_path, serve_args=("--allow", str(project))) as server:
        assert server.call("initialize")["allowed"] == [str(project)]
        server.call("create", {"session": "s", "paths": ["a.txt"], "base_dir": str(project)})
        refusals = [
            ("create", {"session": "s", "paths": ["s.txt"], "base_dir": str(outside)}),
            ("create", {"session": "s", "paths": ["link/s.txt"], "base_dir": str(project)}),
            ("create", {"session": "s", "paths": ["."], "base_dir": "."}),
            ("watch", {"paths": ["."], "base_dir": str(outside)}),
            ("restore", {"session": "s", "name": "latest", "target": str(outside)}),
            ("restore", {"session": "s", "name": "latest", "target": str(project / "link")}),
            ("diff", {"session": "s", "name": "latest", "target": str(outside)}),
            ("undo", {"session": "s", "target": str(outside)}),
        ]
        for method, params in refusals:
            with pytest.raises(RpcFailed) as failed:
                server.call(method, params)
            assert failed.value.code == 1003, (method, failed.value.error)
            assert failed.value.data["type"] == "PathNotAllowedError", method
            assert str(project) in failed.value.error["message"]
    with Server(tmp_path / "store", tmp_path) as server:  # not confined without --allow
        assert server.call("initialize")["allowed"] is None
        server.call("create", {"session": "o", "paths": ["s.txt"], "base_dir": str(outside)})
    with Server(tmp_path / "store", tmp_path, serve_args=("--allow", str(project))) as server:
        for method, params in (
            ("read", {"session": "o", "name": "latest", "path": "s.txt"}),
            ("restore", {"session": "o", "name": "latest", "dry_run": True}),
            ("diff", {"session": "o", "name": "latest"}),
        ):
            with pytest.raises(RpcFailed) as failed:
                server.call(method, params)
            assert failed.value.data["type"] == "PathNotAllowedError", method


def test_resolve_resolved_names_counts_absent_patch_and_windows(tmp_path: Path) -> None:
    project = tmp_path / "p"
    write_tree(project, {"a.txt": "one\ntwo\n", "b.txt": "b\n"})
    with Server(tmp_path / "store", tmp_path) as server:
        created = server.call(
            "create",
            {
                "session": "s",
                "name": "first",
                "paths": ["a.txt", "b.txt", "typo.txt"],
                "base_dir": str(project),
            },
        )
        assert created["absent"] == ["typo.txt"]
        server.call(
            "create",
            {
                "session": "s",
                "name": "second",
                "paths": ["a.txt", "b.txt"],
                "base_dir": str(project),
            },
        )
        assert server.call("resolve", {"session": "s", "name": "latest~1"}) == {
            "session": "s",
            "selector": "latest~1",
            "name": "first",
        }
        assert (
            server.call("resolve", {"session": "s", "name": "sec", "prefix": True})["name"]
            == "second"
        )
        (project / "a.txt").write_text("one\n2\n")
        diff = server.call("diff", {"session": "s", "name": "latest", "patch": True})
        assert diff["name"] == "second" and diff["modified"] == ["a.txt"]
        assert diff["counts"] == {"added": 0, "modified": 1, "removed": 0}
        assert "-two\n+2\n" in diff["patch"]["text"]
        assert diff["patch"]["files"][0]["hunks"][0]["lines"][-2:] == ["-two", "+2"]
        assert "patch" not in server.call("diff", {"session": "s", "name": "latest"})
        dry = server.call(
            "restore",
            {"session": "s", "name": "latest~1", "dry_run": True, "limit": 0, "unchanged": False},
        )
        assert dry["name"] == "first" and dry["written"] == [] and dry["truncated"] is True
        assert dry["counts"]["written"] == 1 and "unchanged" not in dry
        whole = server.call("restore", {"session": "s", "name": "latest", "dry_run": True})
        assert whole["written"] == ["a.txt"] and "unchanged" in whole
        part = server.call(
            "read", {"session": "s", "name": "latest", "path": "a.txt", "offset": 4, "length": 2}
        )
        assert (part["base64"], part["offset"], part["length"], part["complete"]) == (
            "dHc=",
            4,
            2,
            False,
        )
        with pytest.raises(RpcFailed) as failed:
            server.call("read", {"session": "s", "name": "latest", "path": "a.txt", "offset": -1})
        assert failed.value.code == -32602
