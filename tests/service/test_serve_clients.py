"""Clients that misbehave or share: one that goes away mid-call, two servers on one root."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.service import Server
from helpers.trees import read_tree, write_tree

from snapstore import SnapStore


def big_tree(base: Path, files: int, size: int = 2048) -> None:
    write_tree(
        base,
        {f"d{index % 20}/f{index}.bin": bytes([index % 251]) * size for index in range(files)},
    )


def wait_for_progress(server: Server) -> None:
    """Read until the first progress notification: the call is under way."""
    message = server.read_message()
    assert message.get("method") == "progress", message


def disappear(server: Server) -> int:
    """Close both pipes to the server, as a client process that died would; its exit code."""
    assert server.process.stdout is not None and server.process.stdin is not None
    server.process.stdout.close()
    server.process.stdin.close()
    return server.process.wait(60)


def test_a_client_gone_mid_create_leaves_a_complete_snapshot_or_none(
    tmp_path: Path,
):
    root, tree = tmp_path / "store", tmp_path / "tree"
    big_tree(tree, 1500)
    server = Server(root, tmp_path)
    server.send(
        "create",
        {"session": "s", "name": "n", "paths": ["."], "base_dir": str(tree), "progress": True},
    )
    wait_for_progress(server)
    assert disappear(server) == 0
    stderr = server.stderr_text()
    assert "Traceback" not in stderr and "Error" not in stderr
    server.close()
    store = SnapStore(root)
    found = store.list("s")
    assert [info.file_count for info in found] in ([], [1500])
    assert store.verify(deep=True).ok


def test_a_client_gone_mid_restore_leaves_the_target_restored_or_as_it_was(tmp_path: Path):
    root, tree = tmp_path / "store", tmp_path / "tree"
    big_tree(tree, 1200)
    store = SnapStore(root)
    store.create("s", "n", ["."], base_dir=tree)
    before = read_tree(tree)
    for path in sorted(tree.rglob("*.bin"))[::2]:
        path.write_bytes(b"edited")
    edited = read_tree(tree)
    server = Server(root, tmp_path)
    server.send("restore", {"session": "s", "name": "n", "progress": True})
    wait_for_progress(server)
    assert disappear(server) == 0
    assert "Traceback" not in server.stderr_text()
    server.close()
    assert read_tree(tree) in (before, edited)
    reopened = SnapStore(root)
    assert reopened.verify(deep=True).ok
    assert read_tree(tree) in (before, edited)


def test_a_client_gone_between_calls_ends_the_server_quietly(tmp_path: Path, project: Path):
    server = Server(tmp_path / "store", project)
    server.call("create", {"session": "s", "name": "n", "paths": ["src"]})
    assert disappear(server) == 0
    assert server.stderr_text() == ""
    server.close()


@pytest.mark.parametrize("rounds", [6])
def test_two_servers_share_one_root(tmp_path: Path, project: Path, rounds: int):
    root = tmp_path / "store"
    other = tmp_path / "other"
    big_tree(other, 200, size=512)
    with Server(root, project) as first, Server(root, project) as second:
        for index in range(rounds):
            a = first.send("create", {"session": "shared", "name": "same", "paths": ["src"]})
            b = second.send(
                "create",
                {"session": "shared", "name": "same", "paths": ["."], "base_dir": str(other)},
            )
            c = first.send("put_state", {"session": "state", "name": "n", "value": index})
            d = second.send("create", {"session": "b", "name": f"n{index}", "paths": ["README.md"]})
            replies = [first.receive(), second.receive(), first.receive(), second.receive()]
            assert [r["id"] for r in replies] == [a, b, c, d]
            assert all("result" in reply for reply in replies), replies
        assert first.call("get_state", {"session": "state", "name": "n"})["value"] == rounds - 1
        names = {(s["session"], s["name"]) for s in second.call("list")["snapshots"]}
        assert {("shared", "same"), ("b", f"n{rounds - 1}")} <= names
        (project / "src/app.py").write_text("changed\n")
        first.send("restore", {"session": "b", "name": "n0"})
        second.send("create", {"session": "c", "name": "during", "paths": ["src"]})
        assert "result" in first.receive() and "result" in second.receive()
        assert first.call("verify", {"deep": True})["ok"] is True
        assert first.finish() == 0 and second.finish() == 0
