"""``snapstore mcp``: checkpoint tools for an agent, as a Model Context Protocol server on stdio.

Built on the official ``mcp`` SDK (the optional ``mcp`` extra). The tools are a deliberately
small slice of the API, named and described for a model deciding what to call: checkpoint
before editing, look at what changed, restore, undo the restore. Their results are the same
JSON documents ``snapstore serve`` returns (``snapstore.service.shapes``); a failure is a tool
error whose text names the error type, so the model can tell "no such checkpoint" from "the
store is busy".
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import partial
from typing import Annotated, Any, TypeVar

import anyio
import anyio.from_thread
import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

import snapstore
from snapstore.errors import SnapstoreError
from snapstore.service import shapes
from snapstore.service.context import Service
from snapstore.service.methods import target_diff_document

T = TypeVar("T")

INSTRUCTIONS = """\
snapstore keeps checkpoints of files so that edits can be undone. Before you edit, create, \
delete or rename files in a project, call checkpoint with the files or directories you are \
about to touch (whole directories are fine) and the project directory as base_dir. If an \
edit goes wrong, or the user asks to go back, call diff_checkpoint to see what changed, then \
restore_checkpoint. Every restore can itself be undone with undo_restore. Use one session \
name per task or conversation."""

CHECKPOINT = """\
Save the current state of files before you change them. Call it before editing, creating, \
deleting or renaming files, with every file or directory you may touch: directories are \
recorded with everything in them, and a path that does not exist yet is recorded as absent \
(so a restore removes the file if you create it). Files git ignores are left out, and a \
restore leaves them alone; pass gitignore=false to checkpoint an ignored file. Cheap for files \
that did not change since the last checkpoint. Reusing a name replaces that checkpoint. \
Returns the checkpoint's header: its name (generated if you give none), file_count, \
total_bytes, base_dir, created_at."""

LIST_CHECKPOINTS = """\
List checkpoints, oldest first: of one session, or of every session when session is omitted. \
Each has session, name, created_at, file_count, total_bytes and base_dir. Use it to find the \
checkpoint to diff or restore; 'latest' also names a session's newest one."""

DIFF_CHECKPOINT = """\
Show what restoring a checkpoint would change in its directory, without changing anything: \
'added' (files the restore would put back), 'modified' (files it would overwrite) and \
'removed' (files created since the checkpoint, which it would delete), and 'changed' (false \
when the directory already matches). Call it before restore_checkpoint."""

RESTORE_CHECKPOINT = """\
Put files back as they were at a checkpoint. This OVERWRITES the current content of every \
file that differs from the checkpoint and DELETES files created since then under the \
checkpointed paths; files outside them are left alone. What it replaces is kept first, so \
undo_restore can reverse it. Use dry_run=true to see what it would do. 'paths' restores only \
those files or directories of the checkpoint. Returns 'written', 'removed' and 'unchanged' \
paths, and 'backup', the name of the undo backup kept."""

READ_CHECKPOINT_FILE = """\
Read one file as it was at a checkpoint, without restoring anything: to compare with the \
current version or recover part of it. Returns the path, its size, and its content: as text \
when it is UTF-8 ('encoding': 'utf-8'), else base64 ('encoding': 'base64')."""

UNDO_RESTORE = """\
Undo the newest restore of a session: put back the files it overwrote or deleted. An undo can \
itself be undone by calling undo_restore again. Returns what it wrote and removed, as \
restore_checkpoint does."""

Session = Annotated[
    str, Field(description="A name for the task or conversation, such as 'fix-login-bug'.")
]
Name = Annotated[
    str, Field(description="The checkpoint's name; 'latest' is the session's newest one.")
]


class CheckpointTools:
    """The tools, bound to one store (opened once, closed at exit)."""

    def __init__(self, service: Service) -> None:
        self.service = service

    async def _run(self, call: Callable[[], T]) -> T:
        """Run a blocking library call in a worker thread; library errors become tool
        errors that name their type."""
        try:
            return await anyio.to_thread.run_sync(call)
        except (SnapstoreError, OSError) as error:
            raise ToolError(f"{type(error).__name__}: {error}") from error

    @staticmethod
    def _progress(ctx: Context | None) -> Callable[[int, int], None] | None:
        """A library progress callback reporting to the client, from the worker thread."""
        if ctx is None:
            return None

        def report(done: int, total: int) -> None:
            anyio.from_thread.run(partial(ctx.report_progress, done, total))

        return report

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
    ) -> dict[str, Any]:
        """Checkpoint ``paths`` under ``base_dir``."""
        info = await self._run(
            lambda: self.service.store(create=True).create(
                session,
                name,
                paths,
                base_dir=base_dir or os.getcwd(),
                gitignore=gitignore,
                progress=self._progress(ctx),
            )
        )
        return shapes.snapshot_document(info)

    async def list_checkpoints(
        self,
        session: Annotated[
            str | None, Field(description="Only this session's checkpoints.")
        ] = None,
    ) -> dict[str, Any]:
        """Every checkpoint (of one session)."""
        if not self.service.store_exists():
            return shapes.snapshots_document([])
        infos = await self._run(lambda: self.service.store().list(session))
        return shapes.snapshots_document([info for info in infos if info.kind == "files"])

    async def diff_checkpoint(self, session: Session, name: Name = "latest") -> dict[str, Any]:
        """What a restore would change."""

        return await self._run(lambda: target_diff_document(self.service.store(), session, name))

    async def restore_checkpoint(
        self,
        session: Session,
        name: Name = "latest",
        paths: Annotated[
            list[str] | None,
            Field(description="Restore only these paths of the checkpoint (default: all)."),
        ] = None,
        dry_run: Annotated[
            bool, Field(description="Only report what would change; write nothing.")
        ] = False,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Restore a checkpoint into its directory."""
        report = await self._run(
            lambda: self.service.store().restore(
                session, name, paths=paths, dry_run=dry_run, progress=self._progress(ctx)
            )
        )
        return shapes.restore_document(session, name, report)

    async def read_checkpoint_file(
        self,
        session: Session,
        path: Annotated[str, Field(description="The file's path, relative to base_dir.")],
        name: Name = "latest",
    ) -> dict[str, Any]:
        """One file's content at a checkpoint."""
        data = await self._run(lambda: self.service.store().read(session, name, path))
        document: dict[str, Any] = {"session": session, "name": name, "path": path}
        document["size"] = len(data)
        try:
            document["encoding"], document["content"] = "utf-8", data.decode("utf-8")
        except UnicodeDecodeError:
            encoded = shapes.file_document(session, name, path, data)["base64"]
            document["encoding"], document["content"] = "base64", encoded
        return document

    async def undo_restore(
        self,
        session: Session,
        dry_run: Annotated[
            bool, Field(description="Only report what would change; write nothing.")
        ] = False,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Undo the session's newest restore."""
        report = await self._run(
            lambda: self.service.store().undo(
                session, dry_run=dry_run, progress=self._progress(ctx)
            )
        )
        return shapes.undo_document(session, report)


TOOL_DESCRIPTIONS = {
    "checkpoint": CHECKPOINT,
    "list_checkpoints": LIST_CHECKPOINTS,
    "diff_checkpoint": DIFF_CHECKPOINT,
    "restore_checkpoint": RESTORE_CHECKPOINT,
    "read_checkpoint_file": READ_CHECKPOINT_FILE,
    "undo_restore": UNDO_RESTORE,
}
"""Each tool's name and the description a model reads."""


def build_server(service: Service) -> MCPServer[Any]:
    """The MCP server exposing the checkpoint tools of ``service``'s store."""
    server: MCPServer[Any] = MCPServer(
        "snapstore", version=snapstore.__version__, instructions=INSTRUCTIONS
    )
    tools = CheckpointTools(service)
    for name, description in TOOL_DESCRIPTIONS.items():
        server.add_tool(getattr(tools, name), name=name, description=description)
    return server


def run(root: str | os.PathLike[str], *, lock_timeout: float = 30.0) -> int:
    """Serve MCP on stdin/stdout until the client disconnects; the exit code (0)."""
    service = Service(root, lock_timeout=lock_timeout)
    try:
        anyio.run(build_server(service).run_stdio_async)
    finally:
        service.close()
    return 0
