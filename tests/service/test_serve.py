"""``snapstore serve``: the JSON-RPC methods, their results and errors, over real pipes."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers.service import REPO, RpcFailed, Server, service_env, snapstore_command
from helpers.trees import write_tree

from snapstore import SnapStore

REQUIRED_METHODS = {
    "initialize",
    "shutdown",
    "create",
    "list",
    "latest",
    "get",
    "read",
    "diff",
    "restore",
    "undo",
    "backups",
    "history",
    "delete",
    "delete_session",
    "sweep",
    "gc",
    "verify",
    "get_state",
    "put_state",
    "watch",
    "unwatch",
}


def cli_json(root: Path, *args: str) -> Any:
    """The document ``snapstore --json ARGS`` prints."""
    done = subprocess.run(
        [*snapstore_command(), "--root", str(root), "--json", *args],
        capture_output=True,
        env=service_env(),
        timeout=60,
    )
    return json.loads(done.stdout)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def server(root: Path, tmp_path: Path) -> Any:
    with Server(root, tmp_path) as running:
        yield running


def test_initialize_names_the_protocol_the_root_and_every_method(server: Server, root: Path):
    result = server.call("initialize")
    assert result["protocol_version"] == "1.0"
    assert result["server"]["name"] == "snapstore"
    assert result["root"] == str(root)
    assert result["store_exists"] is False
    assert set(result["methods"]) >= REQUIRED_METHODS
    assert set(result["watch"]) == {"available", "reason"}


def test_results_are_the_documents_the_command_line_prints(
    server: Server, root: Path, project: Path
):
    created = server.call(
        "create",
        {
            "session": "ed",
            "name": "before",
            "paths": ["README.md", "src"],
            "base_dir": str(project),
        },
    )
    assert created["snapshot"]["file_count"] == 3
    (project / "src/app.py").write_text("print('edited')\n")
    (project / "src/new.py").write_text("x = 1\n")
    server.call("put_state", {"session": "etl", "name": "cursor", "value": {"offset": 7}})

    assert server.call("list") == cli_json(root, "list")
    assert server.call("list", {"session": "ed"}) == cli_json(root, "list", "ed")
    assert server.call("get", {"session": "ed", "name": "before"}) == cli_json(
        root, "show", "ed", "before"
    )
    assert server.call("get", {"session": "etl", "name": "cursor"}) == cli_json(
        root, "show", "etl", "cursor"
    )
    read = server.call("read", {"session": "ed", "name": "before", "path": "src/app.py"})
    assert read.items() >= cli_json(root, "cat", "ed", "before", "src/app.py").items()
    assert (read["offset"], read["length"], read["complete"]) == (0, 15, True)
    assert base64.b64decode(read["base64"]) == b"print('hello')\n"
    diff = server.call("diff", {"session": "ed", "name": "before"})
    assert diff == cli_json(root, "diff", "ed", "before")
    assert diff["modified"] == ["src/app.py"] and diff["added"] == ["src/new.py"]
    assert server.call("get_state", {"session": "etl", "name": "cursor"}) == cli_json(
        root, "state", "get", "etl", "cursor"
    )
    assert server.call("latest", {"session": "ed"}) == {"snapshot": created["snapshot"]}
    assert server.call("verify", {"deep": True}) == cli_json(root, "verify", "--deep")


def test_restore_undo_backups_and_history(server: Server, project: Path):
    base = str(project)
    server.call("create", {"session": "ed", "name": "one", "paths": ["src"], "base_dir": base})
    (project / "src/app.py").write_text("print(2)\n")
    server.call("create", {"session": "ed", "name": "two", "paths": ["src"], "base_dir": base})
    (project / "src/app.py").write_text("print(3)\n")

    dry = server.call("restore", {"session": "ed", "name": "one", "dry_run": True})
    assert dry["dry_run"] is True and dry["written"] == ["src/app.py"]
    assert (project / "src/app.py").read_text() == "print(3)\n"
    restored = server.call("restore", {"session": "ed", "name": "one"})
    assert restored["session"] == "ed" and restored["name"] == "one"
    assert restored["written"] == ["src/app.py"] and restored["target"] == base
    assert (project / "src/app.py").read_text() == "print('hello')\n"

    backups = server.call("backups", {"session": "ed"})["backups"]
    assert [b["name"] for b in backups] == [restored["backup"]]
    assert backups[0]["backup_of"] == "one"
    undone = server.call("undo", {"session": "ed"})
    assert undone["session"] == "ed" and undone["written"] == ["src/app.py"]
    assert (project / "src/app.py").read_text() == "print(3)\n"

    history = server.call("history", {"session": "ed", "path": "src/app.py"})
    assert history["session"] == "ed" and history["path"] == "src/app.py"
    assert [v["snapshot"]["name"] for v in history["history"]] == ["one", "two"]
    assert history["history"][1]["entry"]["size"] == len("print(2)\n")

    two_snapshots = server.call("diff", {"session": "ed", "name": "one", "other": "two"})
    assert two_snapshots["other"] == "two" and two_snapshots["modified"] == ["src/app.py"]


def test_deletes_sweep_gc_and_state(server: Server, project: Path):
    base = str(project)
    for name in ("a", "b", "c"):
        server.call("create", {"session": "s", "name": name, "paths": ["src"], "base_dir": base})
    swept = server.call("sweep", {"keep_last": 1, "dry_run": True})
    assert swept == {
        "deleted": [{"session": "s", "name": "a"}, {"session": "s", "name": "b"}],
        "dry_run": True,
    }
    assert server.call("delete", {"session": "s", "name": "a"}) == {
        "session": "s",
        "name": "a",
        "deleted": True,
    }
    assert server.call("delete", {"session": "s", "name": "a"})["deleted"] is False
    assert server.call("delete_session", {"session": "s"}) == {"session": "s", "deleted": 2}
    gc = server.call("gc")
    assert gc["skipped"] is False and gc["blobs_deleted"] >= 2 and gc["dry_run"] is False

    missing = server.call("get_state", {"session": "etl", "name": "x", "default": 5})
    assert missing == {"session": "etl", "name": "x", "found": False, "value": 5}
    saved = server.call("put_state", {"session": "etl", "name": "x", "value": [1, "two"]})
    assert saved["snapshot"]["kind"] == "state" and saved["value"] == [1, "two"]
    assert server.call("get_state", {"session": "etl", "name": "x"})["value"] == [1, "two"]
    assert server.call("sessions") == {"sessions": ["etl"]}


def test_a_missing_store_is_an_error_until_something_creates_it(
    server: Server, root: Path, project: Path
):
    with pytest.raises(RpcFailed) as failed:
        server.call("list")
    assert failed.value.code == 1100
    assert failed.value.data["type"] == "StoreNotFound"
    assert not root.exists()
    assert server.call("get_state", {"session": "s", "name": "n"})["found"] is False
    server.call("create", {"session": "s", "name": "n", "paths": ["src"], "base_dir": str(project)})
    assert len(server.call("list")["snapshots"]) == 1


@pytest.mark.parametrize(
    ("method", "params", "code", "error_type", "exit_code"),
    [
        ("get", {"session": "s", "name": "nope"}, 1140, "SnapshotNotFound", 14),
        ("read", {"session": "s", "name": "one", "path": "nope.txt"}, 1141, None, 14),
        ("get_state", {"session": "s", "name": "one"}, 1006, "NotAStateSnapshotError", 1),
        ("get", {"session": "", "name": "one"}, 1001, "InvalidNameError", 2),
        (
            "create",
            {"session": "s", "name": "one", "paths": ["src"], "if_exists": "error"},
            1009,
            "SnapshotExistsError",
            15,
        ),
        ("create", {"session": "s", "paths": ["src"], "if_exists": "never"}, 1002, None, 2),
        ("create", {"session": "s", "paths": ["../x"]}, 1003, "UnsafePathError", 1),
        ("undo", {"session": "none"}, 1140, "SnapshotNotFound", 14),
    ],
)
def test_library_errors_have_their_code_type_and_message(
    root: Path,
    project: Path,
    method: str,
    params: dict[str, Any],
    code: int,
    error_type: str,
    exit_code: int,
):
    SnapStore(root).create("s", "one", ["src"], base_dir=project)
    with Server(root, project) as server, pytest.raises(RpcFailed) as failed:
        server.call(method, params)
    assert failed.value.code == code
    assert failed.value.data["message"] == failed.value.error["message"]
    if error_type:
        assert failed.value.data["type"] == error_type
    assert failed.value.data["exit_code"] == exit_code


@pytest.mark.parametrize(
    ("params", "fragment"),
    [
        ({"session": 1, "paths": ["a"]}, "session must be a string"),
        ({"paths": ["a"]}, "needs the parameter 'session'"),
        ({"session": "s", "paths": [1]}, "paths must be an array of strings"),
        ({"session": "s", "paths": ["a"], "ttl": "1h"}, "ttl must be a number"),
        ({"session": "s", "paths": ["a"], "rehash": 1}, "rehash must be true or false"),
        ({"session": "s", "paths": ["a"], "colour": "red"}, "unknown parameter 'colour'"),
    ],
)
def test_bad_params_are_invalid_params_with_a_message(
    server: Server, params: dict[str, Any], fragment: str
):
    with pytest.raises(RpcFailed) as failed:
        server.call("create", params)
    assert failed.value.code == -32602
    assert fragment in failed.value.error["message"]


def test_malformed_lines_get_protocol_errors_and_the_server_keeps_serving(server: Server):
    server.send_line(b"this is not json")
    assert server.receive()["error"]["code"] == -32700
    server.send_line(b'{"jsonrpc": "2.0", "id": 1, "method": "initialize"')
    reply = server.receive()
    assert reply["id"] is None and reply["error"]["code"] == -32700
    server.send_line(b"\xff\xfe{}")
    reply = server.receive()
    assert reply["id"] is None and reply["error"]["code"] == -32700
    server.send_line(b"[]")
    assert server.receive()["error"]["code"] == -32600
    server.send_line(b"42")
    assert server.receive()["error"]["code"] == -32600
    server.send_line(b"")
    server.send_line(b"   ")
    server.send_line(b'{"id": 7, "method": "initialize"}')
    reply = server.receive()
    assert reply["id"] == 7 and reply["error"]["code"] == -32600
    server.send_line(b'{"jsonrpc": "2.0", "id": 8, "method": 3}')
    assert server.receive()["error"]["code"] == -32600
    server.send_line(b'{"jsonrpc": "2.0", "id": true, "method": "initialize"}')
    reply = server.receive()
    assert reply["id"] is None and reply["error"]["code"] == -32600
    server.send_line(b'{"jsonrpc": "2.0", "id": "x", "method": "nope"}')
    reply = server.receive()
    assert reply["id"] == "x" and reply["error"]["code"] == -32601
    assert reply["error"]["data"] == {"method": "nope"}
    server.send_line(b'{"jsonrpc": "2.0", "id": 9, "method": "list", "params": ["s"]}')
    assert server.receive()["error"]["code"] == -32602
    assert server.call("initialize")["protocol_version"] == "1.0"
    assert server.finish() == 0


def test_notifications_are_run_but_never_answered(server: Server, project: Path):
    notification = {
        "jsonrpc": "2.0",
        "method": "put_state",
        "params": {"session": "s", "name": "n", "value": 1},
    }
    server.send_line(json.dumps(notification).encode())
    server.send_line(b'{"jsonrpc": "2.0", "method": "nope"}')
    assert server.call("get_state", {"session": "s", "name": "n"})["value"] == 1
    assert server.notifications == []


def test_pipelined_requests_are_answered_in_order(server: Server, project: Path):
    server.call("put_state", {"session": "s", "name": "n", "value": 0})
    ids = []
    for index in range(60):
        if index % 3 == 0:
            ids.append(server.send("put_state", {"session": "s", "name": "n", "value": index}))
        elif index % 3 == 1:
            ids.append(server.send("get_state", {"session": "s", "name": "n"}))
        else:
            ids.append(server.send("get", {"session": "s", "name": "missing"}))
    replies = [server.receive() for _ in ids]
    assert [reply["id"] for reply in replies] == ids
    for index, reply in enumerate(replies):
        if index % 3 == 1:
            assert reply["result"]["value"] == index - 1


def test_progress_notifications_come_before_the_response_when_asked(server: Server, tmp_path: Path):
    tree = tmp_path / "tree"
    for index in range(300):
        (tree / f"d{index % 7}").mkdir(parents=True, exist_ok=True)
        (tree / f"d{index % 7}" / f"f{index}.txt").write_text(f"file {index}\n")
    request_id = server.send(
        "create",
        {"session": "s", "name": "n", "paths": ["."], "base_dir": str(tree), "progress": True},
    )
    reply = server.receive()
    assert reply["id"] == request_id and "result" in reply
    progress = [n["params"] for n in server.notifications]
    assert progress, "no progress notification"
    assert all(n["method"] == "progress" for n in server.notifications)
    assert all(p["id"] == request_id and 0 <= p["done"] <= p["total"] for p in progress)
    assert progress[-1]["done"] == progress[-1]["total"] == 300
    assert "token" not in progress[-1]

    server.notifications.clear()
    request_id = server.send("verify", {"deep": True, "_meta": {"progressToken": "tok-1"}})
    server.receive()
    assert server.notifications
    assert {n["params"]["token"] for n in server.notifications} == {"tok-1"}

    server.notifications.clear()
    server.call("create", {"session": "s", "name": "m", "paths": ["."], "base_dir": str(tree)})
    assert server.notifications == []


def test_end_of_input_ends_the_server_with_exit_code_0(server: Server):
    server.call("initialize")
    assert server.finish() == 0
    assert server.stderr_text() == ""


def test_shutdown_answers_then_exits_without_waiting_for_end_of_input(server: Server):
    assert server.call("shutdown") == {"shutdown": True}
    assert server.process.wait(30) == 0


def test_stdout_carries_only_protocol_lines_even_with_debug_logging(root: Path, project: Path):
    with Server(root, project, "-vv") as server:
        server.call("create", {"session": "s", "name": "n", "paths": ["src"]})
        server.call("gc")
        assert server.finish() == 0
        assert "debug snapstore" in server.stderr_text()


def test_help_does_not_import_the_servers():
    code = (
        "import sys\n"
        "from snapstore.cli.app import run\n"
        "run(['--help'])\n"
        "loaded = [m for m in sys.modules if m.startswith(('snapstore.service.server',"
        " 'snapstore.service.mcp', 'snapstore.service.watch', 'snapstore.cli.service', 'mcp'))]\n"
        "print(loaded, file=sys.stderr)\n"
        "sys.exit(1 if loaded else 0)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, env=service_env(), cwd=REPO, timeout=60
    )
    assert done.returncode == 0, done.stderr.decode()
    assert b"serve" in done.stdout and b"mcp" in done.stdout


def test_watched_creates_and_the_watch_methods(server: Server, project: Path):
    support = server.call("initialize")["watch"]
    watch = {"paths": ["src", "README.md"], "base_dir": str(project)}
    started = server.call("watch", watch)
    assert started["base_dir"] == str(project) and started["paths"] == ["README.md", "src"]
    assert started["active"] is support["available"]
    first = server.call("create", {"session": "s", "name": "n", **watch, "watch": True})
    assert first["snapshot"]["file_count"] == 3
    assert first["watch"]["scan"] == "full"
    (project / "src/app.py").write_text("edited\n")
    second = server.call("create", {"session": "s", "name": "n", **watch, "watch": True})
    if support["available"]:
        assert second["watch"]["scan"] == "incremental" and second["watch"]["reason"] is None
        assert second["watch"]["rescanned"] >= 1
    else:
        assert second["watch"]["scan"] == "full" and second["watch"]["reason"]
    read = server.call("read", {"session": "s", "name": "n", "path": "src/app.py"})
    assert base64.b64decode(read["base64"]) == b"edited\n"
    assert server.call("unwatch", watch) == {"stopped": True}
    assert server.call("unwatch", watch) == {"stopped": False}


def test_nan_and_infinity_are_not_json_in_either_direction(tmp_path: Path) -> None:
    """Python's parser accepts the bare tokens NaN and Infinity; the server refuses them (a
    NaN TTL compares with no age: a sweep would delete everything), and never writes them
    (a strict client could not parse the line)."""
    base = tmp_path / "proj"
    write_tree(base, {"a.txt": "a"})
    store = SnapStore(tmp_path / "store")
    store.create("s", "one", ["a.txt"], base_dir=base)
    store.put_state("s", "k", float("nan"))
    with Server(tmp_path / "store", tmp_path) as server:
        server.send_line(b'{"jsonrpc":"2.0","id":1,"method":"sweep","params":{"ttl":NaN}}')
        refused = server.receive()
        server.send_line(
            b'{"jsonrpc":"2.0","id":2,"method":"get_state","params":{"session":"s","name":"k"}}'
        )
        line = server.process.stdout.readline()
    assert refused["error"]["code"] == -32700
    assert [info.name for info in store.list("s")] == ["one", "k"]
    reply = json.loads(line, parse_constant=lambda token: pytest.fail(f"{token} in {line!r}"))
    assert reply["id"] == 2 and reply["error"]["code"] == 1002


def test_create_leaves_out_what_git_ignores_unless_gitignore_is_false(
    server: Server, git_project: Path
):
    params = {"session": "s", "name": "n", "paths": ["."], "base_dir": str(git_project)}
    ignoring = server.call("create", params)["snapshot"]
    assert ignoring["file_count"] == 2 and ignoring["excludes"][0] == "*.log"
    everything = server.call("create", {**params, "gitignore": False})["snapshot"]
    assert everything["file_count"] == 3 and "*.log" not in everything["excludes"]
