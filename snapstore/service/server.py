"""``snapstore serve``: the API as JSON-RPC 2.0 over stdio, for bridges that keep it running.

One server per client: the client spawns ``snapstore serve``, writes one request per line on
its stdin and reads one message per line from its stdout. Requests are handled one at a time,
in the order they arrive, so responses come back in that order (a long call's ``progress``
notifications come before its response). Any number of servers may share a root: the store's
locks make that safe, as for any processes. docs/protocol.md is the specification.

The protocol owns the real stdout: at start the server moves it to a private descriptor and
points descriptor 1 at stderr, so a stray ``print`` (or a C library's write) can never corrupt
the message stream. A client that goes away mid-call does not interrupt the call: the library
call finishes (or fails) as a unit with the guarantees it always has, the unsendable messages
are dropped, and the server exits with code 0.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, BinaryIO

from snapstore.logs import get_logger
from snapstore.service.confine import AllowedDirectories
from snapstore.service.context import Service
from snapstore.service.methods import METHODS
from snapstore.service.progress import INTERVAL, Throttle
from snapstore.service.protocol import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    RpcError,
    decode_message,
    encode_message,
    error_from_exception,
    error_response,
    notification,
    response,
)

log = get_logger("snapstore.service")

PROGRESS_INTERVAL = INTERVAL
"""Seconds between two progress notifications of one call (the first and the last are always
sent), so a 50,000-file checkpoint does not send 50,000 lines."""


MAX_REQUEST_BYTES = 32 << 20
"""The longest request line the server reads (32 MiB, its line ending included): a longer one
is skipped to its end and answered with an invalid request error, so a client cannot make the
server buffer without limit."""

_READ_PIECE = 1 << 20


class LineTooLong:
    """What ``Connection.read_line`` returns for a line over ``MAX_REQUEST_BYTES`` (skipped)."""

    def __init__(self, length: int, limit: int) -> None:
        self.length = length
        self.limit = limit


RELEASE_AFTER = 0.25
"""A call that took longer than this (seconds) probably built large structures (a 50,000-file
checkpoint holds every entry): once it is answered, the server hands the freed memory back."""


M_MMAP_THRESHOLD = -3
"""glibc's ``mallopt`` parameter: the size from which an allocation gets a mapping of its own."""

MMAP_THRESHOLD_BYTES = 256 << 10


def keep_large_buffers_apart() -> None:
    """Serve every allocation over 256 KiB from a mapping of its own, given back to the system
    as soon as it is freed. glibc otherwise raises that threshold whenever such a buffer is
    freed (up to 32 MiB) and keeps later ones in its heap, which it rarely shrinks: a watched
    checkpoint of a 50,000-file tree decodes and encodes buffers of several MB, and an idle
    server kept what they took (10 MB more after 15 such checkpoints). Linux only; elsewhere
    nothing changes."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None).mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)


def release_memory() -> None:
    """Collect garbage and return free heap pages to the system (glibc's ``malloc_trim``;
    elsewhere only the collection), so an idle server stays as small as it was before a
    large call instead of keeping the call's high-water mark."""
    gc.collect()
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None).malloc_trim(0)


class ClientGone(Exception):
    """The client closed its end of the server's stdout."""


class Connection:
    """The two pipes to one client: lines in, messages out."""

    def __init__(self, reader: BinaryIO, out_fd: int, max_line: int = MAX_REQUEST_BYTES) -> None:
        self.reader = reader
        self.out_fd = out_fd
        self.max_line = max_line
        self.open = True

    def read_line(self) -> bytes | LineTooLong | None:
        """The next line without its line ending (None at end of input); a line longer than
        ``max_line`` is read to its end without being kept, and LineTooLong stands for it."""
        line = self.reader.readline(self.max_line)
        if not line:
            return None
        if len(line) < self.max_line or line.endswith(b"\n"):
            return line.rstrip(b"\r\n")
        length = len(line)
        while line and not line.endswith(b"\n"):
            line = self.reader.readline(_READ_PIECE)
            length += len(line)
        return LineTooLong(length, self.max_line)

    def send(self, message: dict[str, Any]) -> None:
        """Write one message; ClientGone (and the connection closed) if the client left."""
        if not self.open:
            raise ClientGone()
        data = memoryview(encode_message(message))
        try:
            while data:
                written = os.write(self.out_fd, data)
                data = data[written:]
        except (BrokenPipeError, ConnectionResetError) as error:
            self.open = False
            raise ClientGone() from error


class ProgressReporter(Throttle):
    """The ``progress(done, total)`` callback of one request: sends ``progress``
    notifications at most every PROGRESS_INTERVAL seconds, and the final one. A client gone
    meanwhile only stops the notifications: the call itself runs to its end."""

    def __init__(self, connection: Connection, request_id: Any, token: Any) -> None:
        super().__init__(self._notify, PROGRESS_INTERVAL)
        self.connection = connection
        self.params: dict[str, Any] = {"id": request_id}
        if token is not None:
            self.params["token"] = token

    def _notify(self, done: int, total: int) -> None:
        with contextlib.suppress(ClientGone):
            self.connection.send(
                notification("progress", {**self.params, "done": done, "total": total})
            )


def _progress_token(params: dict[str, Any]) -> tuple[bool, Any]:
    """Whether the request asks for progress (``"progress": true``, or MCP's
    ``"_meta": {"progressToken": ...}``), and the token to echo."""
    meta = params.get("_meta")
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    return bool(params.get("progress") is True or token is not None), token


class Server:
    """Reads requests from a connection and answers them, one at a time, until end of input
    or ``shutdown``."""

    def __init__(self, service: Service, connection: Connection) -> None:
        self.service = service
        self.connection = connection
        self.stopping = False

    def serve(self) -> int:
        """Serve until the client closes stdin, calls ``shutdown``, or goes away; 0."""
        try:
            while not self.stopping:
                line = self.connection.read_line()
                if line is None:
                    break
                started = time.monotonic()
                reply = self.handle(line) if isinstance(line, bytes) else _too_long(line)
                if reply is not None:
                    self.connection.send(reply)
                if time.monotonic() - started > RELEASE_AFTER:
                    release_memory()
        except ClientGone:
            log.debug("the client closed the server's stdout; stopping")
        finally:
            self.service.close()
        return 0

    def handle(self, line: bytes) -> dict[str, Any] | None:
        """The response to one line (None for a blank line or a notification)."""
        if not line.strip():
            return None
        try:
            message = decode_message(line)
        except (UnicodeDecodeError, ValueError, RecursionError) as error:
            return error_response(None, RpcError(PARSE_ERROR, f"parse error: {error}"))
        if not isinstance(message, dict):
            what = "a batch (an array)" if isinstance(message, list) else "not an object"
            return error_response(
                None,
                RpcError(INVALID_REQUEST, f"invalid request: {what}; send one object per line"),
            )
        notify = "id" not in message
        request_id = message.get("id")
        try:
            result = self._call(message, request_id)
        except RpcError as error:
            return None if notify else error_response(_echo_id(request_id), error)
        return None if notify else response(request_id, result)

    def _call(self, message: dict[str, Any], request_id: Any) -> Any:
        """Check the request's envelope, then run its method."""
        if message.get("jsonrpc") != "2.0":
            raise RpcError(INVALID_REQUEST, 'invalid request: "jsonrpc" must be "2.0"')
        if not _valid_id(request_id):
            raise RpcError(INVALID_REQUEST, "invalid request: id must be a string or an integer")
        name = message.get("method")
        if not isinstance(name, str):
            raise RpcError(INVALID_REQUEST, 'invalid request: "method" must be a string')
        method = METHODS.get(name)
        if method is None:
            raise RpcError(METHOD_NOT_FOUND, f"method not found: {name!r}", {"method": name})
        params = message.get("params", {})
        if not isinstance(params, dict):
            raise RpcError(INVALID_PARAMS, "params must be an object of named parameters")
        try:
            arguments = method.arguments(name, params)
        except (OverflowError, RecursionError) as error:  # a number or nesting out of range
            raise RpcError(INVALID_PARAMS, f"invalid params: {error}") from None
        wanted, token = _progress_token(params)
        progress: Callable[[int, int], None] | None = None
        if method.progress and wanted and "id" in message:
            progress = ProgressReporter(self.connection, request_id, token)
        try:
            result = method.handler(self.service, arguments, progress)
        except RpcError:
            raise
        except Exception as error:
            reported = error_from_exception(error)
            if reported.code < 0:
                log.exception("%s failed", name)
            raise reported from error
        if name == "shutdown":
            self.stopping = True
        return result


def _too_long(line: LineTooLong) -> dict[str, Any]:
    """The answer to a request line over the length limit (its id was not read)."""
    limit = line.limit
    return error_response(
        None,
        RpcError(
            INVALID_REQUEST,
            f"invalid request: the line is over {limit} bytes long (at least {line.length}); "
            "the server reads lines of at most that length",
            {"type": "RequestTooLarge", "limit": limit},
        ),
    )


def _valid_id(request_id: Any) -> bool:
    """JSON-RPC ids are strings, integers or null."""
    return request_id is None or (
        isinstance(request_id, str | int) and not isinstance(request_id, bool)
    )


def _echo_id(request_id: Any) -> Any:
    """The id to answer with: the request's, unless it was not a valid id."""
    return request_id if _valid_id(request_id) else None


def run(
    root: str | os.PathLike[str],
    *,
    lock_timeout: float = 30.0,
    allow: Sequence[str | os.PathLike[str]] = (),
    password: bytes | None = None,
) -> int:
    """Serve on this process's stdin and stdout until end of input; the exit code (0).

    SIGINT is ignored: a Ctrl-C typed at the client's terminal reaches the whole process
    group, and the client, not the server, decides when to stop (by closing stdin). With
    ``allow``, every directory a call reads or writes must lie in one of those."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    keep_large_buffers_apart()
    sys.stdout.flush()
    out_fd = os.dup(1)
    os.dup2(2, 1)
    reader = open(0, "rb", closefd=False)  # noqa: SIM115 - stdin stays open until exit
    connection = Connection(reader, out_fd)
    allowed = AllowedDirectories(allow) if allow else None
    service = Service(root, lock_timeout=lock_timeout, password=password, allowed=allowed)
    try:
        return Server(service, connection).serve()
    finally:
        with contextlib.suppress(OSError):
            os.close(out_fd)
