"""A JSON-RPC client for the tests: spawns ``snapstore serve`` as a subprocess on real pipes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def snapstore_command() -> list[str]:
    """How to run this checkout's command line: the venv's ``snapstore`` script when it is
    beside the interpreter, else ``python -m snapstore``."""
    script = Path(sys.executable).parent / "snapstore"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "snapstore"]


def service_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """An environment where this checkout's snapstore is importable and no root is preset."""
    env = {key: value for key, value in os.environ.items() if key != "SNAPSTORE_ROOT"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.update(extra or {})
    return env


class RpcFailed(Exception):
    """The server answered with an error object."""

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(error["message"])
        self.error = error
        self.code: int = error["code"]
        self.data: dict[str, Any] = error.get("data") or {}


class Server:
    """One ``snapstore --root ROOT serve`` process and the lines it sent."""

    def __init__(
        self, root: Path, cwd: Path | None = None, *args: str, serve_args: tuple[str, ...] = ()
    ) -> None:
        self.process = subprocess.Popen(
            [*snapstore_command(), "--root", str(root), *args, "serve", *serve_args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=service_env(),
        )
        self.next_id = 0
        self.notifications: list[dict[str, Any]] = []

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send_line(self, line: bytes) -> None:
        """Write raw bytes plus a newline."""
        assert self.process.stdin is not None
        self.process.stdin.write(line + b"\n")
        self.process.stdin.flush()

    def send(self, method: str, params: dict[str, Any] | None = None, **envelope: Any) -> int:
        """Send a request; its id."""
        self.next_id += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            message["params"] = params
        message.update(envelope)
        self.send_line(json.dumps(message).encode())
        return self.next_id

    def receive(self) -> dict[str, Any]:
        """The next message that is not a notification (notifications are kept)."""
        while True:
            message = self.read_message()
            if "id" in message:
                return message
            self.notifications.append(message)

    def read_message(self) -> dict[str, Any]:
        """The next line, decoded; fails the test at end of output."""
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line, f"server closed its stdout; stderr: {self.stderr_text()}"
        assert line.endswith(b"\n")
        line.decode("ascii")
        message: dict[str, Any] = json.loads(line)
        assert message["jsonrpc"] == "2.0"
        return message

    def call(self, method: str, params: dict[str, Any] | None = None, **envelope: Any) -> Any:
        """Send a request and return its result (RpcFailed for an error)."""
        request_id = self.send(method, params, **envelope)
        reply = self.receive()
        assert reply["id"] == request_id
        if "error" in reply:
            raise RpcFailed(reply["error"])
        return reply["result"]

    def stderr_text(self) -> str:
        if self.process.poll() is None or self.process.stderr is None:
            return "(running)"
        return self.process.stderr.read().decode(errors="replace")

    def finish(self, timeout: float = 30) -> int:
        """Close stdin and wait for the exit code."""
        assert self.process.stdin is not None
        if not self.process.stdin.closed:
            self.process.stdin.close()
        return self.process.wait(timeout)

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                self.finish(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()


def with_mcp_server(root: Path, cwd: Path, body: Any, *args: str) -> None:
    """Run the coroutine function ``body(session)`` against a fresh
    ``snapstore --root ROOT mcp ARGS`` subprocess started in ``cwd``, through the official
    MCP SDK's stdio client (imported here: the ``mcp`` extra is optional)."""
    import anyio
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    command = snapstore_command()

    async def main() -> None:
        params = StdioServerParameters(
            command=command[0],
            args=[*command[1:], "--root", str(root), "mcp", *args],
            env=service_env(),
            cwd=cwd,
        )
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await body(session)

    anyio.run(main)
