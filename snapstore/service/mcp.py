"""``snapstore mcp``: checkpoint tools for an agent, as a Model Context Protocol server on stdio.

Built on the official ``mcp`` SDK (the optional ``mcp`` extra). The tools are a deliberately
small slice of the API, named and described for a model deciding what to call: checkpoint
before editing, look at what changed, restore, undo the restore. Their results are the same
JSON documents ``snapstore serve`` returns (``snapstore.frontend.shapes``); a failure is a tool
error whose text names the error type, so the model can tell "no such checkpoint" from "the
store is busy".
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from functools import partial
from typing import Annotated, Any

import anyio
import anyio.from_thread
import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent
from pydantic import Field

import snapstore
from snapstore.errors import SnapstoreError
from snapstore.logs import get_logger
from snapstore.service.agent import (
    PATCH_LIMIT,
    READ_LIMIT,
    READ_MAX,
    CheckpointAgent,
    ToolResult,
)
from snapstore.service.confine import AllowedDirectories
from snapstore.service.context import Service
from snapstore.service.progress import Throttle

log = get_logger("snapstore.service.mcp")

INSTRUCTIONS = """\
snapstore keeps checkpoints of files so that edits can be undone. Before you edit, create, \
delete or rename files in a project, call checkpoint with the files or directories you are \
about to touch (whole directories are fine) and the project directory as base_dir. If an \
edit goes wrong, or the user asks to go back, call diff_checkpoint to see what changed (a \
unified diff from the checkpoint to the files now), then restore_checkpoint. Every restore \
can itself be undone with undo_restore. Use one session name per task or conversation. \
This server works only inside these directories: {allowed}."""

CHECKPOINT = """\
Save the current state of files before you change them. Call it before editing, creating, \
deleting or renaming files, with every file or directory you may touch: directories are \
recorded with everything in them, and a path that does not exist yet is recorded as absent \
(so a restore removes the file if you create it; the result warns about such paths, since a \
typo looks the same). Files git ignores are left out, and a restore leaves them alone; pass \
gitignore=false to checkpoint an ignored file. Cheap for files that did not change since the \
last checkpoint. Reusing a name replaces that checkpoint. Returns the checkpoint's header (its \
name, generated if you give none, file_count, total_bytes, base_dir, created_at) and 'absent'."""

LIST_CHECKPOINTS = """\
List checkpoints, oldest first (the newest 100 at most; 'count' says how many there are): of \
one session, or of every session when session is omitted. Each has session, name, \
created_at, file_count, total_bytes and base_dir. 'latest' names a session's newest \
checkpoint and 'latest~1' the one before it."""

DIFF_CHECKPOINT = """\
Show what changed from a checkpoint to the files now (or, with 'other', from one checkpoint \
to another), without changing anything: 'added' (files that are new since the checkpoint: a \
restore would delete them), 'modified', 'removed' (files deleted since: a restore would put \
them back), 'counts', 'changed', and with patch=true (the default) a unified diff of the text \
files ('patch'), bounded to max_bytes; binary files are named only. Call it before \
restore_checkpoint. 'name' in the result is the checkpoint 'latest' resolved to."""

RESTORE_CHECKPOINT = """\
Put files back as they were at a checkpoint. This OVERWRITES the current content of every \
file that differs from the checkpoint and DELETES files created since then under the \
checkpointed paths; files outside them are left alone. What it replaces is kept first, so \
undo_restore can reverse it. Use dry_run=true to see what it would do. 'paths' restores only \
those files or directories of the checkpoint. Returns the resolved checkpoint 'name', \
'counts', the 'written' and 'removed' paths (the first 50 of each), and 'backup', the undo \
backup kept; unchanged paths are only counted unless include_unchanged=true."""

READ_CHECKPOINT_FILE = """\
Read one file as it was at a checkpoint, without restoring anything: to compare with the \
current version or recover part of it. Returns at most 'length' bytes (256 KiB by default) \
from 'offset', with the file's 'size' and 'next_offset' to read on. Text comes as UTF-8 \
('encoding': 'utf-8'); a binary file (a NUL byte in its first 8 KiB) is only described \
unless base64=true."""

UNDO_RESTORE = """\
Undo the newest restore of a session: put back the files it overwrote or deleted. An undo can \
itself be undone by calling undo_restore again. Returns what it wrote and removed, as \
restore_checkpoint does."""

Session = Annotated[
    str, Field(description="A name for the task or conversation, such as 'fix-login-bug'.")
]
Name = Annotated[
    str,
    Field(
        description="The checkpoint's name; 'latest' is the session's newest, 'latest~1' "
        "the one before."
    ),
]
Unchanged = Annotated[
    bool, Field(description="Also list the paths that were already as in the checkpoint.")
]
DryRun = Annotated[bool, Field(description="Only report what would change; write nothing.")]


def _result(answer: ToolResult) -> CallToolResult:
    """The SDK result: the document as structured content, its words as text."""
    return CallToolResult(
        content=[TextContent(type="text", text=answer.text)],
        structured_content=answer.document,
    )


class CheckpointTools:
    """The tools, bound to one store (opened once, closed at exit) and confined to the
    allowed directories."""

    def __init__(self, service: Service, allowed: AllowedDirectories) -> None:
        self.service = service
        self.agent = CheckpointAgent(service, allowed)

    async def _run(self, call: Callable[[], ToolResult]) -> CallToolResult:
        """Run a blocking library call in a worker thread; library errors become tool
        errors that name their type."""
        try:
            return _result(await anyio.to_thread.run_sync(call))
        except (SnapstoreError, OSError, ValueError) as error:
            raise ToolError(f"{type(error).__name__}: {error}") from error

    @staticmethod
    def _progress(ctx: Context | None) -> Callable[[int, int], None] | None:
        """A library progress callback reporting to the client from the worker thread, at
        most ten times a second (and the last report)."""
        if ctx is None:
            return None

        def report(done: int, total: int) -> None:
            anyio.from_thread.run(partial(ctx.report_progress, done, total))

        return Throttle(report)

    async def checkpoint(
        self,
        session: Session,
        paths: Annotated[
            list[str],
            Field(description="Files and directories to save, relative to base_dir."),
        ],
        name: Annotated[
            str | None,
            Field(description="A name for the checkpoint, such as 'before-refactor'."),
        ] = None,
        base_dir: Annotated[
            str | None,
            Field(description="The project directory (absolute); default: the server's."),
        ] = None,
        gitignore: Annotated[
            bool,
            Field(
                description="Leave out what git ignores (.gitignore files); false records "
                "ignored files too."
            ),
        ] = True,
        ctx: Context | None = None,
    ) -> CallToolResult:
        """Checkpoint ``paths`` under ``base_dir``."""
        progress = self._progress(ctx)
        return await self._run(
            lambda: self.agent.checkpoint(session, paths, name, base_dir, progress, gitignore)
        )

    async def list_checkpoints(
        self,
        session: Annotated[
            str | None, Field(description="Only this session's checkpoints.")
        ] = None,
    ) -> CallToolResult:
        """Every checkpoint (of one session) in the allowed directories."""
        return await self._run(lambda: self.agent.list_checkpoints(session))

    async def diff_checkpoint(
        self,
        session: Session,
        name: Name = "latest",
        other: Annotated[
            str | None,
            Field(description="Compare with this later checkpoint instead of the files now."),
        ] = None,
        paths: Annotated[
            list[str] | None,
            Field(description="Only the patch of these files or directories."),
        ] = None,
        patch: Annotated[
            bool, Field(description="Include the unified diff of the text files.")
        ] = True,
        max_bytes: Annotated[
            int, Field(description="The most bytes of patch text to return.", ge=0, le=1 << 20)
        ] = PATCH_LIMIT,
    ) -> CallToolResult:
        """What changed since a checkpoint."""
        return await self._run(
            lambda: self.agent.diff(session, name, other, paths, patch, max_bytes)
        )

    async def restore_checkpoint(
        self,
        session: Session,
        name: Name = "latest",
        paths: Annotated[
            list[str] | None,
            Field(description="Restore only these paths of the checkpoint (default: all)."),
        ] = None,
        dry_run: DryRun = False,
        include_unchanged: Unchanged = False,
        ctx: Context | None = None,
    ) -> CallToolResult:
        """Restore a checkpoint into its directory."""
        progress = self._progress(ctx)
        return await self._run(
            lambda: self.agent.restore(session, name, paths, dry_run, include_unchanged, progress)
        )

    async def read_checkpoint_file(
        self,
        session: Session,
        path: Annotated[str, Field(description="The file's path, relative to base_dir.")],
        name: Name = "latest",
        offset: Annotated[int, Field(description="Where to start, in bytes.", ge=0)] = 0,
        length: Annotated[
            int, Field(description="The most bytes to return.", ge=0, le=READ_MAX)
        ] = READ_LIMIT,
        base64: Annotated[
            bool, Field(description="Return the bytes as base64, even of a binary file.")
        ] = False,
    ) -> CallToolResult:
        """Part of one file's content at a checkpoint."""
        return await self._run(lambda: self.agent.read(session, path, name, offset, length, base64))

    async def undo_restore(
        self,
        session: Session,
        dry_run: DryRun = False,
        include_unchanged: Unchanged = False,
        ctx: Context | None = None,
    ) -> CallToolResult:
        """Undo the session's newest restore."""
        progress = self._progress(ctx)
        return await self._run(
            lambda: self.agent.undo(session, dry_run, include_unchanged, progress)
        )


TOOL_DESCRIPTIONS = {
    "checkpoint": CHECKPOINT,
    "list_checkpoints": LIST_CHECKPOINTS,
    "diff_checkpoint": DIFF_CHECKPOINT,
    "restore_checkpoint": RESTORE_CHECKPOINT,
    "read_checkpoint_file": READ_CHECKPOINT_FILE,
    "undo_restore": UNDO_RESTORE,
}
"""Each tool's name and the description a model reads."""


def build_server(service: Service, allowed: AllowedDirectories) -> MCPServer[Any]:
    """The MCP server exposing the checkpoint tools of ``service``'s store, confined to
    ``allowed``."""
    server: MCPServer[Any] = MCPServer(
        "snapstore",
        version=snapstore.__version__,
        instructions=INSTRUCTIONS.format(allowed=allowed.describe()),
    )
    tools = CheckpointTools(service, allowed)
    for name, description in TOOL_DESCRIPTIONS.items():
        server.add_tool(getattr(tools, name), name=name, description=description)
    return server


def run(
    root: str | os.PathLike[str],
    *,
    lock_timeout: float = 30.0,
    allow: Sequence[str | os.PathLike[str]] = (),
    password: bytes | None = None,
) -> int:
    """Serve MCP on stdin/stdout until the client disconnects; the exit code (0). The tools
    work only inside the working directory and the ``allow`` directories."""
    allowed = AllowedDirectories([os.getcwd(), *allow])
    if os.path.dirname(allowed.directories[0]) == allowed.directories[0]:
        log.warning(
            "snapstore mcp runs in %s, so the agent may work anywhere below it: start it in "
            "the project directory (the host's cwd setting), or in an empty one with --allow",
            allowed.directories[0],
        )
    service = Service(root, lock_timeout=lock_timeout, password=password)
    try:
        anyio.run(build_server(service, allowed).run_stdio_async)
    finally:
        service.close()
    return 0
