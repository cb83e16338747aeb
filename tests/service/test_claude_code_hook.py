"""examples/claude-code: the PreToolUse hook, fed the JSON Claude Code sends, checkpoints the
file an edit tool is about to change, and never blocks the edit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers.service import REPO, service_env
from helpers.trees import write_tree

from snapstore import SnapStore

EXAMPLE = REPO / "examples/claude-code"


def run_hook(call: dict[str, Any] | str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    data = call if isinstance(call, str) else json.dumps(call)
    return subprocess.run(
        [sys.executable, str(EXAMPLE / "snapstore_hook.py")],
        input=data,
        capture_output=True,
        text=True,
        env=service_env(env),
        timeout=60,
    )


def edit_call(project: Path, tool: str, path: str, session: str = "abc123") -> dict[str, Any]:
    field = "notebook_path" if tool == "NotebookEdit" else "file_path"
    return {
        "session_id": session,
        "transcript_path": "/tmp/transcript.jsonl",
        "cwd": str(project),
        "hook_event_name": "PreToolUse",
        "tool_name": tool,
        "tool_input": {field: path, "old_string": "a", "new_string": "b"},
    }


@pytest.fixture
def project(tmp_path: Path) -> Path:
    base = tmp_path / "project"
    write_tree(base, {"src/app.py": "print('hello')\n", "nb.ipynb": "{}\n"})
    return base


def test_each_edit_tool_checkpoints_its_file_first(project: Path) -> None:
    env = {"CLAUDE_PROJECT_DIR": str(project)}
    for tool, path in (
        ("Edit", str(project / "src/app.py")),
        ("MultiEdit", "src/app.py"),
        ("Write", str(project / "src/new.py")),
        ("NotebookEdit", str(project / "nb.ipynb")),
    ):
        done = run_hook(edit_call(project, tool, path), env)
        assert done.returncode == 0, done.stderr
        assert "snapstore: checkpointed" in done.stdout
    with SnapStore(project / ".snapstore") as store:
        infos = store.list("claude-abc123")
        assert len(infos) == 4
        assert [info.roots for info in infos] == [
            ("src/app.py",),
            ("src/app.py",),
            ("src/new.py",),
            ("nb.ipynb",),
        ]
        assert store.read("claude-abc123", infos[0].name, "src/app.py") == b"print('hello')\n"
        assert infos[0].meta == {"tool": "Edit", "hook": "claude-code"}
        assert infos[0].expires_at is not None
        (project / "src/new.py").write_text("made by the agent\n")
        store.restore("claude-abc123", infos[2].name)
    assert not (project / "src/new.py").exists()  # recorded absent: the restore removed it


def test_files_outside_the_project_and_other_tools_are_left_alone(
    project: Path, tmp_path: Path
) -> None:
    write_tree(tmp_path / "elsewhere", {"x.txt": "x"})
    (project / "escape").symlink_to(tmp_path / "elsewhere")
    env = {"CLAUDE_PROJECT_DIR": str(project)}
    for call in (
        edit_call(project, "Edit", str(tmp_path / "elsewhere/x.txt")),
        edit_call(project, "Edit", "../elsewhere/x.txt"),
        edit_call(project, "Edit", "escape/x.txt"),
        edit_call(project, "Read", str(project / "src/app.py")),
        {**edit_call(project, "Bash", ""), "tool_input": {"command": "rm -rf src"}},
    ):
        done = run_hook(call, env)
        assert done.returncode == 0, done.stderr
        assert done.stdout == ""
    assert not (project / ".snapstore").exists()


def test_a_failure_never_blocks_the_edit(project: Path, tmp_path: Path) -> None:
    (tmp_path / "not-a-dir").write_text("x")
    env = {"CLAUDE_PROJECT_DIR": str(project), "SNAPSTORE_ROOT": str(tmp_path / "not-a-dir")}
    done = run_hook(edit_call(project, "Edit", "src/app.py"), env)
    assert done.returncode == 1  # reported, not 2 (which blocks the tool call)
    assert done.stderr.startswith("snapstore hook: no checkpoint taken: ")
    for garbage in ("not json", "[1, 2]"):
        done = run_hook(garbage, {"CLAUDE_PROJECT_DIR": str(project)})
        assert done.returncode == 1 and "no checkpoint taken" in done.stderr


def test_the_settings_run_the_hook_before_every_edit_tool() -> None:
    settings = json.loads((EXAMPLE / "settings.json").read_text())
    (entry,) = settings["hooks"]["PreToolUse"]
    assert set(entry["matcher"].split("|")) == {"Edit", "MultiEdit", "Write", "NotebookEdit"}
    (hook,) = entry["hooks"]
    assert hook["type"] == "command" and "snapstore_hook.py" in hook["command"]
