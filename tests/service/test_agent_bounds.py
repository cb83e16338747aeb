"""The checkpoint tools of ``snapstore mcp`` called directly (``CheckpointAgent``): reading a
UTF-8 file window by window gives back every character, and a diff's patch stays bounded
however many files changed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.trees import write_tree

from snapstore.service.agent import PATHS_SHOWN, CheckpointAgent
from snapstore.service.confine import AllowedDirectories, PathNotAllowedError
from snapstore.service.context import Service


def _agent(tmp_path: Path, project: Path) -> tuple[Service, CheckpointAgent]:
    service = Service(tmp_path / "store")
    return service, CheckpointAgent(service, AllowedDirectories([project]))


def test_windows_of_a_utf8_file_join_up_to_the_whole_file(tmp_path: Path):
    project = tmp_path / "project"
    text = "é€😀x" * 40  # characters of 2, 3 and 4 bytes: most windows cut one
    write_tree(project, {"f.txt": text})
    service, agent = _agent(tmp_path, project)
    try:
        agent.checkpoint("s", ["f.txt"], "c", str(project), None)
        for length in (5, 7, 64):
            pieces, offset = [], 0
            while offset is not None:
                document = agent.read("s", "f.txt", "c", offset, length, False).document
                assert document["encoding"] == "utf-8"
                pieces.append(document["content"])
                assert document["next_offset"] is None or document["next_offset"] > offset
                offset = document["next_offset"]
            assert "".join(pieces) == text, length
    finally:
        service.close()


def test_a_file_starting_with_a_stray_continuation_byte_is_not_shown_as_text(tmp_path: Path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "latin1.txt").write_bytes(b"\xa9 2026 caf\xe9")
    service, agent = _agent(tmp_path, project)
    try:
        agent.checkpoint("s", ["latin1.txt"], "c", str(project), None)
        document = agent.read("s", "latin1.txt", "c", 0, 1 << 10, False).document
        assert document["encoding"] == "base64"
    finally:
        service.close()


def test_a_diff_of_thousands_of_changed_files_stays_small(tmp_path: Path):
    project = tmp_path / "project"
    changed = 3000
    write_tree(project, {f"f{i:04}.txt": "old\n" for i in range(changed)})
    service, agent = _agent(tmp_path, project)
    try:
        agent.checkpoint("s", ["."], "c", str(project), None)
        write_tree(project, {f"f{i:04}.txt": "new\n" for i in range(changed)})
        document = agent.diff("s", "c", None, None, True, 1000).document
        patch = document["patch"]
        assert patch["truncated"]
        shown = len(patch["files"])
        assert patch["omitted"] == [f"f{i:04}.txt" for i in range(shown, shown + PATHS_SHOWN)]
        assert patch["omitted_count"] + len(patch["files"]) == changed
        assert len(json.dumps(document)) < 20_000
    finally:
        service.close()


def test_a_checkpoint_of_another_directory_cannot_be_replaced(tmp_path: Path):
    project, outside = tmp_path / "project", tmp_path / "project-old"
    write_tree(project, {"a.txt": "a\n"})
    write_tree(outside, {"secret.txt": "secret\n"})
    service, agent = _agent(tmp_path, project)
    try:
        service.store(create=True).create("other", "theirs", ["secret.txt"], base_dir=outside)
        with pytest.raises(PathNotAllowedError):
            agent.checkpoint("other", ["a.txt"], "theirs", str(project), None)
        kept = service.store().get("other", "theirs").info
        assert kept.base_dir == str(outside)
        assert service.store().read("other", "theirs", "secret.txt") == b"secret\n"
        agent.checkpoint("other", ["a.txt"], "mine", str(project), None)
        agent.checkpoint("other", ["a.txt"], "mine", str(project), None)  # its own: replaced
    finally:
        service.close()
