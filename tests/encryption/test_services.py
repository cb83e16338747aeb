"""``snapstore serve`` takes an encrypted store's password as every command does (a file, a
command, the environment), never as an argument; without it a call fails with a typed
error and the server keeps serving."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.service import RpcFailed, Server

from snapstore import SnapStore


@pytest.fixture
def store(tmp_path: Path) -> Path:
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "a.txt").write_text("alpha")
    with SnapStore(tmp_path / "store", password="served", encrypt=True) as made:
        made.create("s", "n1", base_dir=str(tmp_path / "work"), paths=["."])
    return tmp_path / "store"


def test_serve_reads_the_password_file(store: Path, tmp_path: Path) -> None:
    (tmp_path / "pw").write_text("served\n")
    with Server(store, tmp_path, "--password-file", str(tmp_path / "pw")) as server:
        listed = server.call("list", {})
        assert [item["name"] for item in listed["snapshots"]] == ["n1"]
        assert server.finish() == 0


def test_serve_without_the_password_answers_a_typed_error(store: Path, tmp_path: Path) -> None:
    with Server(store, tmp_path) as server:
        with pytest.raises(RpcFailed) as failed:
            server.call("list", {})
        assert "PasswordRequiredError" in str(failed.value.args) + str(vars(failed.value))
        assert server.finish() == 0
