"""``snapstore mcp``, driven by the MCP SDK's own stdio client against a real subprocess."""

from __future__ import annotations

import base64
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from helpers.service import service_env, with_mcp_server

pytest.importorskip("mcp")

from mcp import ClientSession

TOOLS = {
    "checkpoint",
    "list_checkpoints",
    "diff_checkpoint",
    "restore_checkpoint",
    "read_checkpoint_file",
    "undo_restore",
}

Session = Callable[[ClientSession], Awaitable[None]]


def with_server(root: Path, cwd: Path, body: Session, *args: str) -> None:
    """Run ``body`` against a fresh ``snapstore --root ROOT mcp ARGS`` subprocess."""
    with_mcp_server(root, cwd, body, *args)


async def call(session: ClientSession, tool: str, arguments: dict[str, Any]) -> Any:
    """A tool's structured result; fails the test on a tool error."""
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, result.content
    return result.structured_content


def test_the_tools_are_listed_with_descriptions_for_a_model(tmp_path: Path):
    async def body(session: ClientSession) -> None:
        listed = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert set(listed) == TOOLS
        assert "before" in (listed["checkpoint"].description or "").lower()
        restore = listed["restore_checkpoint"].description or ""
        assert "OVERWRITES" in restore and "undo_restore" in restore
        checkpoint_schema = listed["checkpoint"].input_schema
        assert set(checkpoint_schema["required"]) == {"session", "paths"}
        assert {"name", "base_dir", "gitignore"} <= set(checkpoint_schema["properties"])
        assert checkpoint_schema["properties"]["gitignore"]["default"] is True
        assert "dry_run" in listed["restore_checkpoint"].input_schema["properties"]

    with_server(tmp_path / "store", tmp_path, body)


def test_checkpoint_diff_restore_undo_through_the_sdk_client(tmp_path: Path, project: Path):
    (project / "data/blob.bin").write_bytes(bytes(range(256)))
    progress: list[tuple[float, float | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total))

    async def body(session: ClientSession) -> None:
        result = await session.call_tool(
            "checkpoint",
            {"session": "task", "paths": ["src", "data", "NEW.md"], "name": "before-edit"},
            progress_callback=on_progress,
        )
        assert not result.is_error, result.content
        created = result.structured_content
        assert created is not None
        assert created["snapshot"]["name"] == "before-edit"
        assert created["snapshot"]["base_dir"] == str(project)
        (project / "src/app.py").write_text("broken(\n")
        (project / "NEW.md").write_text("new\n")
        (project / "src/util.py").unlink()

        listed = await call(session, "list_checkpoints", {"session": "task"})
        assert [s["name"] for s in listed["snapshots"]] == ["before-edit"]
        diff = await call(session, "diff_checkpoint", {"session": "task"})
        assert diff["changed"] is True
        assert diff["added"] == ["NEW.md"]  # from the checkpoint to the directory
        assert diff["modified"] == ["src/app.py"]
        assert diff["removed"] == ["src/util.py"]

        text = await call(
            session, "read_checkpoint_file", {"session": "task", "path": "src/app.py"}
        )
        assert text["encoding"] == "utf-8" and text["content"] == "print('hello')\n"
        binary = await call(
            session, "read_checkpoint_file", {"session": "task", "path": "data/blob.bin"}
        )
        assert binary["binary"] is True and binary["content"] is None
        binary = await call(
            session,
            "read_checkpoint_file",
            {"session": "task", "path": "data/blob.bin", "base64": True},
        )
        assert binary["encoding"] == "base64"
        assert base64.b64decode(binary["content"]) == bytes(range(256))

        dry = await call(session, "restore_checkpoint", {"session": "task", "dry_run": True})
        assert dry["dry_run"] is True and (project / "NEW.md").exists()
        restored = await call(session, "restore_checkpoint", {"session": "task"})
        assert sorted(restored["written"]) == ["src/app.py", "src/util.py"]
        assert restored["removed"] == ["NEW.md"] and restored["backup"]
        assert (project / "src/app.py").read_text() == "print('hello')\n"
        assert not (project / "NEW.md").exists()

        undone = await call(session, "undo_restore", {"session": "task"})
        assert "src/app.py" in undone["written"]
        assert (project / "src/app.py").read_text() == "broken(\n"
        assert (project / "NEW.md").read_text() == "new\n"

    with_server(project.parent / "store", project, body)
    assert progress and progress[-1][0] == progress[-1][1]


def test_failures_are_tool_errors_naming_the_error_type(tmp_path: Path, project: Path):
    async def body(session: ClientSession) -> None:
        listed = await call(session, "list_checkpoints", {})
        assert listed == {"snapshots": [], "count": 0}
        missing = await session.call_tool("diff_checkpoint", {"session": "none"})
        assert missing.is_error
        assert "StoreNotFound" in missing.content[0].text  # type: ignore[union-attr]
        await call(session, "checkpoint", {"session": "s", "paths": ["src"]})
        missing = await session.call_tool("restore_checkpoint", {"session": "s", "name": "x"})
        assert missing.is_error
        assert "SnapshotNotFound" in missing.content[0].text  # type: ignore[union-attr]
        outside = await session.call_tool("checkpoint", {"session": "s", "paths": ["../x"]})
        assert outside.is_error
        assert "UnsafePathError" in outside.content[0].text  # type: ignore[union-attr]

    with_server(tmp_path / "store", project, body)


def test_without_the_extra_mcp_prints_one_line_and_exits_1(tmp_path: Path):
    code = (
        "import sys\n"
        "sys.modules['mcp'] = None\n"
        "from snapstore.cli import main\n"
        f"main(['--root', {str(tmp_path / 'store')!r}, 'mcp'])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, env=service_env(), timeout=60
    )
    assert done.returncode == 1
    lines = done.stderr.decode().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("error: ") and "pip install 'snapstore[mcp]'" in lines[0]
    assert done.stdout == b""


def test_checkpoint_leaves_out_what_git_ignores_unless_gitignore_is_false(
    tmp_path: Path, git_project: Path
):
    async def body(session: ClientSession) -> None:
        ignoring = await call(session, "checkpoint", {"session": "s", "paths": ["."]})
        assert ignoring["snapshot"]["file_count"] == 2  # a.txt and .gitignore
        failed = await session.call_tool("checkpoint", {"session": "s", "paths": ["a.log"]})
        assert failed.is_error and "gitignore=False" in str(failed.content)
        arguments = {"session": "s", "paths": ["a.log"], "gitignore": False}
        everything = await call(session, "checkpoint", arguments)
        assert everything["snapshot"]["file_count"] == 1

    with_server(tmp_path / "store", git_project, body)
