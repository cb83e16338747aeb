"""``snapstore serve`` never answers "internal error" (-32603, a bug) to hostile parameters, and
bounds the length of one request line.

Every method is called with hostile strings in each string parameter (NUL bytes, lone
surrogates, ``..``, very long) and with values of every JSON type in every parameter, in
process (``Server.handle``, one line at a time) so that thousands of calls take a second; a
few are sent to a real server too."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from helpers.service import RpcFailed, Server
from helpers.trees import write_tree

from snapstore.service import params as checks
from snapstore.service.context import Service
from snapstore.service.methods import METHODS
from snapstore.service.protocol import INTERNAL_ERROR
from snapstore.service.server import Connection, LineTooLong
from snapstore.service.server import Server as RpcServer

HOSTILE_TEXT = ["\x00", "a\x00b", "\ud800", "x\udfff", "", "..", "../x", "/", "\n", "a" * 5000]
"""Strings no path or name can be, or that try to leave the base directory."""

ANY_TYPE: list[Any] = [None, True, 0, -1, 2**70, 1.5, [], ["\ud800"], {}, {"\ud800": 1}, "x"]


class _Discard:
    def send(self, message: dict[str, Any]) -> None:
        pass


@pytest.fixture
def handle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.chdir(tmp_path)  # relative targets and base dirs land here
    project = tmp_path / "p"
    write_tree(project, {"a.txt": "x"})
    service = Service(tmp_path / "store")
    server = RpcServer(service, _Discard())  # type: ignore[arg-type]

    def call(method: str, params: dict[str, Any]) -> dict[str, Any] | None:
        line = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
        return server.handle(line.encode())

    created = {"session": "s", "name": "n", "paths": ["a.txt"], "base_dir": str(project)}
    reply = call("create", created)
    assert reply is not None and "result" in reply
    call.project = str(project)  # type: ignore[attr-defined]
    yield call
    service.close()


def _base_params(project: str) -> dict[str, Any]:
    return {
        "session": "s",
        "name": "n",
        "paths": ["a.txt"],
        "base_dir": project,
        "path": "a.txt",
        "value": 1,
    }


def _hostile_values(check: Any) -> list[Any]:
    if check in (checks.text, checks.optional_text, checks.moment):
        return list(HOSTILE_TEXT)
    if check in (checks.texts, checks.optional_texts, checks.paths):
        return [[value] for value in HOSTILE_TEXT]
    if check in (checks.mapping, checks.anything):
        return [{value: value} for value in HOSTILE_TEXT]
    return []


def _internal_errors(handle: Any, cases: list[tuple[str, dict[str, Any]]]) -> list[str]:
    found = []
    for method, params in cases:
        reply = handle(method, params)
        if reply is not None and reply.get("error", {}).get("code") == INTERNAL_ERROR:
            found.append(f"{method} {params!r:.120}: {reply['error']['message']}")
    return found


def test_hostile_strings_in_any_parameter_are_typed_errors(handle: Any) -> None:
    base = _base_params(handle.project)
    cases = []
    for method, declared in METHODS.items():
        if method == "shutdown":
            continue
        watched = [{}, {"watch": True}] if method == "create" else [{}]
        for key, param in declared.params.items():
            for value in _hostile_values(param.check):
                for extra in watched:
                    params = {k: v for k, v in base.items() if k in declared.params}
                    cases.append((method, {**params, key: value, **extra}))
    assert len(cases) > 300
    assert _internal_errors(handle, cases) == []


def test_values_of_every_json_type_in_any_parameter_are_typed_errors(handle: Any) -> None:
    base = _base_params(handle.project)
    cases = []
    for method, declared in METHODS.items():
        if method == "shutdown":
            continue
        for key in declared.params:
            for value in ANY_TYPE:
                params = {k: v for k, v in base.items() if k in declared.params}
                cases.append((method, {**params, key: value}))
    assert _internal_errors(handle, cases) == []


@pytest.mark.parametrize("base_dir", ["a\x00b", "\ud800", "/tmp/\udfff"])
def test_watch_of_a_base_dir_no_file_name_can_be_is_an_unsafe_path(
    tmp_path: Path, base_dir: str
) -> None:
    with Server(tmp_path / "store") as server:
        for method, params in (
            ("watch", {"paths": ["."], "base_dir": base_dir}),
            ("unwatch", {"paths": ["."], "base_dir": base_dir}),
            ("create", {"session": "s", "paths": ["."], "base_dir": base_dir, "watch": True}),
        ):
            with pytest.raises(RpcFailed) as failed:
                server.call(method, params)
            assert failed.value.code == 1003, failed.value.error
            assert failed.value.data["type"] == "UnsafePathError"
        assert server.call("get_state", {"session": "s", "name": "n"})["found"] is False


def test_a_request_line_over_the_limit_is_refused_and_the_server_lives(tmp_path: Path) -> None:
    with Server(tmp_path / "store") as server:
        huge = b'{"jsonrpc":"2.0","id":1,"method":"get_state","params":{"session":"' + (
            b"a" * (33 << 20)
        )
        server.send_line(huge + b'","name":"n"}}')
        reply = server.receive()
        assert reply["id"] is None
        assert reply["error"]["code"] == -32600
        assert reply["error"]["data"] == {"type": "RequestTooLarge", "limit": 32 << 20}
        assert "32" in reply["error"]["message"] or str(32 << 20) in reply["error"]["message"]
        assert server.call("get_state", {"session": "s", "name": "n"})["found"] is False
        assert server.finish() == 0


def test_a_long_line_is_skipped_to_its_end_and_the_next_line_is_read() -> None:
    reader = io.BufferedReader(io.BytesIO(b"x" * 100 + b"\n" + b"next\r\n" + b"y" * 10))
    connection = Connection(reader, out_fd=-1, max_line=16)  # type: ignore[arg-type]
    too_long = connection.read_line()
    assert isinstance(too_long, LineTooLong) and too_long.length == 101
    assert connection.read_line() == b"next"
    assert connection.read_line() == b"y" * 10
    assert connection.read_line() is None


def test_a_line_of_exactly_the_limit_is_read() -> None:
    reader = io.BufferedReader(io.BytesIO(b"z" * 15 + b"\n"))
    connection = Connection(reader, out_fd=-1, max_line=16)  # type: ignore[arg-type]
    assert connection.read_line() == b"z" * 15
