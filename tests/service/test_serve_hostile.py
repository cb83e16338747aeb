"""``snapstore serve`` under hostile input and failing watches: nesting deeper than the
parser goes, numbers out of range, a base directory given through a symlink, an inotify
instance that cannot be made, and paths outside the base of a watched create."""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path

import pytest
from helpers.service import Server
from helpers.trees import write_tree

from snapstore.service.protocol import WatchError
from snapstore.service.watch import WatchSet, inotify


def test_deeply_nested_json_does_not_kill_the_server(tmp_path: Path):
    with Server(tmp_path / "store") as server:
        server.send_line(b"[" * 100_000)
        reply = server.receive()
        assert reply["error"]["code"] in (-32700, -32600)
        assert server.call("get_state", {"session": "s", "name": "n"})["found"] is False


def test_a_huge_integer_ttl_is_invalid_params_not_a_crash(tmp_path: Path):
    with Server(tmp_path / "store") as server:
        server.send_line(
            b'{"jsonrpc":"2.0","id":1,"method":"sweep","params":{"ttl":1' + b"0" * 400 + b"}}"
        )
        reply = server.receive()
        assert reply["id"] == 1 and reply["error"]["code"] == -32602


def test_a_number_no_float_holds_is_a_parse_error_and_commits_nothing(tmp_path: Path) -> None:
    """``1e400`` parses to an infinity in Python: refused as it is read, so the value is
    never stored only for its response to fail."""
    with Server(tmp_path / "store") as server:
        server.send_line(
            b'{"jsonrpc":"2.0","id":1,"method":"put_state",'
            b'"params":{"session":"s","name":"n","value":1e400}}'
        )
        assert server.receive()["error"]["code"] == -32700
    assert not (tmp_path / "store").exists()


def test_watched_base_dir_given_through_a_symlink_is_not_stale(tmp_path: Path):
    real = tmp_path / "real"
    write_tree(real, {"f.txt": "one\n"})
    os.utime(real / "f.txt", (1e9, 1e9))  # not racy
    (tmp_path / "link").symlink_to(real)
    params = {
        "session": "s",
        "name": "n",
        "paths": ["."],
        "base_dir": str(tmp_path / "link"),
        "watch": True,
    }
    with Server(tmp_path / "store") as server:
        server.call("create", params)
        time.sleep(2.5)  # out of the racy window
        (real / "f.txt").write_text("two\n")
        result = server.call("create", params)
        got = server.call("read", {"session": "s", "name": "n", "path": "f.txt"})
        assert got["base64"] == "dHdvCg==", result["watch"]


def test_a_watch_that_cannot_start_leaks_no_descriptors(tmp_path: Path, monkeypatch):
    write_tree(tmp_path / "p", {"a.txt": "x"})
    watches = WatchSet(str(tmp_path / "store"))

    def no_instances():
        raise OSError(errno.EMFILE, "Too many open files")  # fs.inotify.max_user_instances

    monkeypatch.setattr(inotify, "new_inotify", no_instances)
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(50):
        with pytest.raises((OSError, WatchError)):
            watches.start(["."], str(tmp_path / "p"))
    assert len(os.listdir("/proc/self/fd")) == before


def test_watched_create_of_a_path_outside_base_is_unsafe_path(tmp_path: Path):
    write_tree(tmp_path / "p", {"a.txt": "a"})
    with Server(tmp_path / "store") as server:
        codes = []
        for watch in (False, True):
            server.send(
                "create",
                {
                    "session": "s",
                    "paths": ["../x"],
                    "base_dir": str(tmp_path / "p"),
                    "watch": watch,
                },
            )
            codes.append(server.receive()["error"]["code"])
        assert codes == [1003, 1003]
