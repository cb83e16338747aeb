"""``snapstore mcp`` as an agent meets it, through the official MCP client SDK over stdio:
confined to its directories, bounded results and reads, resolved names, missing paths said,
patches, and progress within reason."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from helpers.service import with_mcp_server as with_server
from helpers.trees import write_tree

pytest.importorskip("mcp")

from mcp import ClientSession

from snapstore import SnapStore

Body = Callable[[ClientSession], Awaitable[None]]


async def call(session: ClientSession, tool: str, arguments: dict[str, Any]) -> Any:
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, result.content
    return result


async def refused(session: ClientSession, tool: str, arguments: dict[str, Any]) -> str:
    result = await session.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    return result.content[0].text  # type: ignore[union-attr]


def text_of(result: Any) -> str:
    return "".join(block.text for block in result.content)


def test_the_agent_is_confined_to_its_directory_and_the_allowed_ones(tmp_path: Path):
    project, extra, outside = tmp_path / "project", tmp_path / "extra", tmp_path / "project-old"
    write_tree(project, {"a.txt": "a\n"})
    write_tree(extra, {"b.txt": "b\n"})
    write_tree(outside, {"secret.txt": "secret\n"})
    (project / "escape").symlink_to(outside)
    root = tmp_path / "store"
    with SnapStore(root) as store:  # a checkpoint someone else took of another directory
        store.create("other", "theirs", ["secret.txt"], base_dir=outside)

    async def body(session: ClientSession) -> None:
        await call(session, "checkpoint", {"session": "s", "paths": ["a.txt"]})
        await call(session, "checkpoint", {"session": "s", "paths": ["."], "base_dir": str(extra)})
        for arguments in (
            {"session": "s", "paths": ["x"], "base_dir": str(outside)},
            {"session": "s", "paths": ["x"], "base_dir": str(project / "..")},
            {"session": "s", "paths": ["../project-old/secret.txt"]},
            {"session": "s", "paths": ["escape/secret.txt"]},
            {"session": "s", "paths": ["."], "base_dir": str(project / "escape")},
        ):
            message = await refused(session, "checkpoint", arguments)
            assert "UnsafePathError" in message or "PathNotAllowedError" in message, message
        message = await refused(
            session, "checkpoint", {"session": "s", "paths": ["x"], "base_dir": str(outside)}
        )
        assert "PathNotAllowedError" in message
        assert str(project) in message and str(extra) in message  # names the allowed ones
        for tool, arguments in (
            ("read_checkpoint_file", {"session": "other", "path": "secret.txt"}),
            ("restore_checkpoint", {"session": "other"}),
            ("restore_checkpoint", {"session": "other", "dry_run": True}),
            ("diff_checkpoint", {"session": "other"}),
        ):
            message = await refused(session, tool, arguments)
            assert "PathNotAllowedError" in message, (tool, message)
            assert "secret" not in message.replace("secret.txt", "")
        listed = (await call(session, "list_checkpoints", {})).structured_content
        assert {item["session"] for item in listed["snapshots"]} == {"s"}

    with_server(root, project, body, "--allow", str(extra))
    assert (outside / "secret.txt").read_text() == "secret\n"


def test_reads_are_bounded_paged_and_binary_says_so(tmp_path: Path):
    project = tmp_path / "p"
    text = "".join(f"line {number:06} \u00e9\u4e2d\n" for number in range(40_000))
    write_tree(project, {"big.txt": text, "blob.bin": os.urandom(3 << 20) + b"\x00"})
    (project / "blob.bin").write_bytes(b"\x00" + os.urandom(3 << 20))

    async def body(session: ClientSession) -> None:
        await call(session, "checkpoint", {"session": "s", "paths": ["."]})
        started = time.monotonic()
        result = await call(session, "read_checkpoint_file", {"session": "s", "path": "blob.bin"})
        assert time.monotonic() - started < 30
        document = result.structured_content
        assert document["binary"] is True and document["content"] is None
        assert document["size"] == (3 << 20) + 1
        assert len(json.dumps(document)) < 2000 and "binary" in text_of(result)
        pieces, offset = [], 0
        while offset is not None:
            result = await call(
                session,
                "read_checkpoint_file",
                {"session": "s", "path": "big.txt", "offset": offset},
            )
            document = result.structured_content
            assert document["length"] <= 256 << 10 and document["encoding"] == "utf-8"
            pieces.append(document["content"])
            offset = document["next_offset"]
        assert "".join(pieces) == text
        assert len(pieces) >= 3
        page = await call(
            session,
            "read_checkpoint_file",
            {"session": "s", "path": "blob.bin", "base64": True, "length": 1000},
        )
        assert page.structured_content["encoding"] == "base64"
        assert page.structured_content["next_offset"] == 1000

    with_server(tmp_path / "store", project, body)


def test_results_on_a_2500_file_project_are_small_and_name_what_was_used(tmp_path: Path):
    project = tmp_path / "p"
    write_tree(project, {f"src/m{index:04}.py": f"x = {index}\n" for index in range(2500)})

    async def body(session: ClientSession) -> None:
        first = await call(
            session, "checkpoint", {"session": "s", "paths": ["src"], "name": "first"}
        )
        assert first.structured_content["snapshot"]["file_count"] == 2500
        await call(session, "checkpoint", {"session": "s", "paths": ["src"], "name": "second"})
        for index in range(3):
            (project / f"src/m{index:04}.py").write_text("changed\n")
        for tool, arguments in (
            ("restore_checkpoint", {"session": "s", "name": "latest~1", "dry_run": True}),
            ("diff_checkpoint", {"session": "s", "name": "latest~1"}),
            ("restore_checkpoint", {"session": "s", "name": "latest~1"}),
            ("undo_restore", {"session": "s"}),
        ):
            result = await call(session, tool, arguments)
            document = result.structured_content
            assert len(json.dumps(document)) < 6000, (tool, len(json.dumps(document)))
            assert len(text_of(result)) < 6000, tool
            if tool != "undo_restore":
                assert document["name"] == "first", tool  # not "latest~1"
                assert "s/first (latest~1)" in text_of(result)
        dry = await call(
            session,
            "restore_checkpoint",
            {"session": "s", "name": "latest~1", "dry_run": True},
        )
        document = dry.structured_content
        assert document["counts"] == {"written": 3, "removed": 0, "unchanged": 2498, "kept": 0}
        assert "unchanged" not in document
        full = await call(
            session,
            "restore_checkpoint",
            {"session": "s", "dry_run": True, "include_unchanged": True},
        )
        assert len(full.structured_content["unchanged"]) == 50
        assert full.structured_content["truncated"] is True

    with_server(tmp_path / "store", project, body)


def test_a_checkpoint_of_missing_paths_says_so(tmp_path: Path):
    project = tmp_path / "p"
    write_tree(project, {"real.txt": "r\n"})

    async def body(session: ClientSession) -> None:
        result = await call(
            session, "checkpoint", {"session": "s", "paths": ["real.txt", "reall.txt"]}
        )
        assert result.structured_content["absent"] == ["reall.txt"]
        assert "recorded as absent: reall.txt" in text_of(result)
        assert "reall.txt" in result.structured_content["warning"]
        quiet = await call(session, "checkpoint", {"session": "s", "paths": ["real.txt"]})
        assert quiet.structured_content["absent"] == []
        assert "absent" not in text_of(quiet)

    with_server(tmp_path / "store", project, body)


def test_diff_checkpoint_gives_a_bounded_patch(tmp_path: Path):
    project = tmp_path / "p"
    write_tree(project, {"a.py": "one\ntwo\nthree\n", "img.png": b"\x89PNG\x00\x01"})

    async def body(session: ClientSession) -> None:
        await call(session, "checkpoint", {"session": "s", "paths": ["."], "name": "before"})
        (project / "a.py").write_text("one\n2\nthree\n")
        (project / "img.png").write_bytes(b"\x89PNG\x00\x02")
        (project / "new.txt").write_text("fresh\n")
        result = await call(session, "diff_checkpoint", {"session": "s"})
        document = result.structured_content
        assert document["added"] == ["new.txt"] and document["modified"] == ["a.py", "img.png"]
        patch = document["patch"]
        assert "-two\n+2\n" in patch["text"] and "+fresh\n" in patch["text"]
        assert "Binary files a/img.png and b/img.png differ" in patch["text"]
        assert "-two\n+2" in text_of(result)
        small = await call(session, "diff_checkpoint", {"session": "s", "max_bytes": 100})
        assert small.structured_content["patch"]["truncated"] is True
        assert "[patch truncated" in text_of(small)
        await call(session, "checkpoint", {"session": "s", "paths": ["."], "name": "after"})
        between = await call(
            session, "diff_checkpoint", {"session": "s", "name": "before", "other": "after"}
        )
        assert "-two\n+2\n" in between.structured_content["patch"]["text"]

    with_server(tmp_path / "store", project, body)


def test_progress_is_throttled(tmp_path: Path):
    project = tmp_path / "p"
    write_tree(project, {f"f{index:04}.txt": str(index) for index in range(2000)})
    reports: list[float] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        reports.append(done)

    async def body(session: ClientSession) -> None:
        started = time.monotonic()
        result = await session.call_tool(
            "checkpoint", {"session": "s", "paths": ["."]}, progress_callback=on_progress
        )
        elapsed = time.monotonic() - started
        assert not result.is_error
        assert 1 <= len(reports) <= elapsed * 10 + 3, (len(reports), elapsed)
        assert reports[-1] == 2000

    with_server(tmp_path / "store", project, body)
