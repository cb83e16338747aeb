#!/usr/bin/env python3
"""A Claude Code ``PreToolUse`` hook: checkpoint the file an edit tool is about to change.

Claude Code runs it before each ``Edit``, ``MultiEdit``, ``Write`` or ``NotebookEdit`` call
(see settings.json) with the call as JSON on stdin::

    {"session_id": "...", "cwd": "/project", "hook_event_name": "PreToolUse",
     "tool_name": "Edit", "tool_input": {"file_path": "/project/src/app.py", ...}}

It checkpoints that file into the store (``$SNAPSTORE_ROOT``, else ``.snapstore`` in the
project, ``$CLAUDE_PROJECT_DIR`` or the call's ``cwd``) as a checkpoint of the session
``claude-<session_id>``; a file that does not exist yet is recorded as absent, so a restore
removes it. Files outside the project are left alone. It never blocks the edit: a failure is
reported on stderr with exit code 1, which Claude Code shows and goes on (exit code 2 would
block the tool call). Restore with ``snapstore restore claude-<session_id> latest``, or
through ``snapstore mcp``.

Run it with a Python that has snapstore installed (the virtualenv's ``python``).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

EDIT_TOOLS = {
    "Edit": "file_path",
    "MultiEdit": "file_path",
    "Write": "file_path",
    "NotebookEdit": "notebook_path",
}
"""The tools that change a file, and the input field naming it."""

TTL = os.environ.get("SNAPSTORE_HOOK_TTL", "7d")
"""How long the checkpoints are kept (``snapstore sweep`` deletes them after)."""


def target_of(call: dict[str, Any]) -> tuple[str, str] | None:
    """The project directory and the edited file's path relative to it, or None when the
    call edits no file or a file outside the project."""
    field = EDIT_TOOLS.get(call.get("tool_name", ""))
    tool_input = call.get("tool_input") or {}
    path = tool_input.get(field) if field else None
    if not isinstance(path, str) or not path:
        return None
    project = os.environ.get("CLAUDE_PROJECT_DIR") or call.get("cwd") or os.getcwd()
    project = os.path.realpath(project)
    absolute = os.path.realpath(os.path.join(project, path))
    if os.path.commonpath([absolute, project]) != project or absolute == project:
        return None
    return project, os.path.relpath(absolute, project)


def checkpoint(call: dict[str, Any]) -> str | None:
    """Checkpoint the file the call is about to edit; what was saved, or None."""
    target = target_of(call)
    if target is None:
        return None
    project, relative = target
    from snapstore import SnapStore
    from snapstore.cli.params import parse_duration

    root = os.environ.get("SNAPSTORE_ROOT") or os.path.join(project, ".snapstore")
    session = f"claude-{call.get('session_id') or 'unknown'}"
    with SnapStore(root) as store:
        info = store.create(
            session,
            paths=[relative],
            base_dir=project,
            meta={"tool": str(call.get("tool_name")), "hook": "claude-code"},
            ttl=parse_duration(TTL),
        )
    return f"snapstore: checkpointed {relative} as {session}/{info.name}"


def main() -> int:
    try:
        call = json.load(sys.stdin)
        if not isinstance(call, dict):
            raise ValueError("the hook input is not a JSON object")
        saved = checkpoint(call)
    except Exception as error:  # never block the edit: say why and let it go on
        print(
            f"snapstore hook: no checkpoint taken: {type(error).__name__}: {error}", file=sys.stderr
        )
        return 1
    if saved:
        print(saved)
    return 0


if __name__ == "__main__":
    sys.exit(main())
