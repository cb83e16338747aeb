"""An HTTP proxy on loopback that injects faults between an S3 client and the server, the way
object storage fails in production: errors before a request is applied, answers lost after it
was applied, connections cut in either direction, and delays.

``FaultProxy(upstream)`` listens on 127.0.0.1 (a free port); give its ``endpoint`` to the
client. Each request is read whole (head and body), then the first rule of the table that
matches it and has uses left decides what happens; a request no rule takes is forwarded.

A rule matches on the request's S3 operation (``operation``: ``PutObject``, ``PutObject
If-None-Match``, ``PutObject If-Match``, ``DeleteObject If-Match``, ``UploadPart``,
``CompleteMultipartUpload``, ``GetObject Range``, ``ListObjectsV2``, ... see ``operation``),
a pattern searched in its path and one in its query, which attempt of the client it is
(botocore numbers them in ``amz-sdk-request``), a predicate, and a chance. It takes ``times``
requests (None: every one), after letting ``skip`` matching ones through.

Actions:

- ``error:<status>:<code>`` answers with that error without forwarding (500 ``InternalError``,
  503 ``SlowDown``, or what a provider answers a retry with, such as 404 ``NoSuchUpload`` or
  412 ``PreconditionFailed``): the request was not applied;
- ``after:<status>:<code>`` forwards, then answers with that error instead of the server's
  answer: the request was applied and its answer lost;
- ``drop`` closes the connection after reading half the request's body, without forwarding;
- ``drop-response`` forwards, then closes the connection without answering (applied, reset);
- ``truncate`` forwards, then sends the answer's head and half its body and closes;
- ``delay:<seconds>`` waits, then forwards if the client is still waiting (if it gave up, the
  request is lost, as one held up in the network is);
- ``delay-response:<seconds>`` forwards, then waits before answering (applied; the client
  may time out first).

Every request seen is logged (``seen``) and every fault injected (``injected``), so a test
can say which operations an operation sent and what was done to them.
"""

from __future__ import annotations

import http.client
import random
import re
import socket
import socketserver
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import parse_qs

ERROR_BODY = (
    '<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
    "<Message>injected</Message></Error>"
)
STATUS_TEXT = {
    404: "Not Found",
    409: "Conflict",
    412: "Precondition Failed",
    500: "Internal Server Error",
    501: "Not Implemented",
    503: "Slow Down",
}
ACTIONS = ("error", "after", "drop", "drop-response", "truncate", "delay", "delay-response")


@dataclass
class Request:
    """What a rule sees of a request: ``path`` is the whole target (path and query)."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def resource(self) -> str:
        """The path without the query."""
        return self.path.partition("?")[0]

    @property
    def query(self) -> str:
        """The query string."""
        return self.path.partition("?")[2]

    @property
    def attempt(self) -> int:
        """Which attempt of the client's request this is (1 for the first)."""
        found = re.search(r"attempt=(\d+)", self.headers.get("amz-sdk-request", ""))
        return int(found.group(1)) if found else 1

    @property
    def operation(self) -> str:
        """The S3 operation, with the condition it carries (``PutObject If-None-Match``)."""
        return operation(self.method, self.resource, self.query, self.headers)


def operation(method: str, resource: str, query: str, headers: dict[str, str]) -> str:
    """The S3 operation of a request (path-style addressing, as the tests' client uses)."""
    params = parse_qs(query, keep_blank_values=True)
    is_bucket = resource.strip("/").count("/") == 0
    if method == "GET" and is_bucket:
        return "ListMultipartUploads" if "uploads" in params else "ListObjectsV2"
    if method == "PUT" and is_bucket:
        return "CreateBucket"
    if method == "POST":
        if "uploads" in params:
            return "CreateMultipartUpload"
        return "CompleteMultipartUpload" if "uploadId" in params else "POST"
    if method == "PUT" and "uploadId" in params:
        return "UploadPart"
    if method == "DELETE" and "uploadId" in params:
        return "AbortMultipartUpload"
    if method == "PUT" and "x-amz-copy-source" in headers:
        return "CopyObject"
    name = {"PUT": "PutObject", "GET": "GetObject", "HEAD": "HeadObject"}.get(method)
    name = name or ("DeleteObject" if method == "DELETE" else method)
    if method == "GET" and "range" in headers:
        return name + " Range"
    for condition in ("if-none-match", "if-match"):
        if condition in headers and method in ("PUT", "DELETE"):
            return f"{name} {'If-None-Match' if condition == 'if-none-match' else 'If-Match'}"
    return name


@dataclass
class Rule:
    """Do ``action`` to matching requests: see the module docstring."""

    action: str
    operation: str | None = None
    """A regular expression the whole operation name must match."""
    path: str | None = None
    """A regular expression searched in the path (without the query)."""
    query: str | None = None
    attempt: int | None = None
    matches: Callable[[Request], bool] | None = None
    times: int | None = 1
    skip: int = 0
    chance: float = 1.0
    used: int = 0

    def __post_init__(self) -> None:
        if self.action.split(":")[0] not in ACTIONS:
            raise ValueError(f"unknown action {self.action!r}")

    def takes(self, request: Request, rng: random.Random) -> bool:
        """Whether this rule takes ``request`` (counting it if it does)."""
        if self.times is not None and self.used >= self.times:
            return False
        if self.operation is not None and not re.fullmatch(self.operation, request.operation):
            return False
        if self.path is not None and not re.search(self.path, request.resource):
            return False
        if self.query is not None and not re.search(self.query, request.query):
            return False
        if self.attempt is not None and request.attempt != self.attempt:
            return False
        if self.matches is not None and not self.matches(request):
            return False
        if self.skip > 0:
            self.skip -= 1
            return False
        if self.chance < 1.0 and rng.random() >= self.chance:
            return False
        self.used += 1
        return True


@dataclass
class Seen:
    """One request the proxy saw, and the fault it injected into it (if any)."""

    operation: str
    path: str
    attempt: int
    action: str | None = None


@dataclass
class _Answer:
    status: int
    reason: str
    headers: list[tuple[str, str]] = field(default_factory=list)
    payload: bytes = b""


class FaultProxy:
    """The proxy: ``endpoint`` is what the client is given; ``rules`` are tried in order."""

    def __init__(self, upstream: str, seed: int = 0) -> None:
        host, _, port = upstream.removeprefix("http://").partition(":")
        self.upstream = (host, int(port))
        self.rules: list[Rule] = []
        self.seen: list[Seen] = []
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        proxy = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                proxy.serve_connection(self.request)

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self.server = Server(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def injected(self) -> list[str]:
        """Every fault injected so far, as ``<action> <method-and-operation> <path>``."""
        with self._lock:
            return [f"{s.action} {s.operation} {s.path}" for s in self.seen if s.action]

    def operations(self) -> set[str]:
        """The operations of every request seen so far."""
        with self._lock:
            return {s.operation for s in self.seen}

    def faulted(self) -> set[str]:
        """The operations of every request a fault was injected into so far."""
        with self._lock:
            return {s.operation for s in self.seen if s.action}

    def add(self, matches: Callable[[Request], bool], action: str, times: int = 1) -> None:
        """Inject ``action`` into the next ``times`` requests ``matches`` accepts."""
        self.rule(action, matches=matches, times=times)

    def rule(self, action: str, **match: object) -> Rule:
        """Add a rule (``Rule``'s fields as keywords) at the end of the table."""
        made = Rule(action, **match)  # type: ignore[arg-type]
        with self._lock:
            self.rules.append(made)
        return made

    def clear(self) -> None:
        """Drop every rule: from now on everything is forwarded."""
        with self._lock:
            self.rules.clear()

    def close(self) -> None:
        """Stop accepting connections."""
        self.server.shutdown()
        self.server.server_close()

    def _decide(self, request: Request, *, before_body: bool) -> str | None:
        """The action for ``request`` (only ``drop`` is decided before its body is read)."""
        with self._lock:
            action = None
            for rule in self.rules:
                if (rule.action == "drop") != before_body:
                    continue
                if rule.takes(request, self._rng):
                    action = rule.action
                    break
            if action is not None or not before_body:
                self.seen.append(Seen(request.operation, request.path, request.attempt, action))
            return action

    # ------------------------------------------------------------------ one connection

    def serve_connection(self, conn: socket.socket) -> None:
        reader = conn.makefile("rb")
        try:
            while True:
                head = _read_head(reader)
                if head is None:
                    return
                method, path, headers = head
                length = int(headers.get("content-length", "0"))
                if headers.pop("expect", "").lower() == "100-continue":
                    conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
                if self._decide(Request(method, path, headers, b""), before_body=True):
                    reader.read(length // 2)
                    return
                body = reader.read(length) if length else b""
                request = Request(method, path, headers, body)
                if not self._serve(conn, request, self._decide(request, before_body=False)):
                    return
        except (ConnectionError, OSError):
            return
        finally:
            reader.close()
            conn.close()

    def _serve(self, conn: socket.socket, request: Request, action: str | None) -> bool:
        """Answer one request as ``action`` says; False once the connection is closed."""
        kind, _, argument = (action or "").partition(":")
        if kind == "delay":
            time.sleep(float(argument))
            if _client_gone(conn):
                return False
        if kind == "error":
            status, code = argument.split(":")
            _send(conn, request.method, _error(int(status), code))
            return True
        answer = self._forward(request)
        if kind == "after":
            status, code = argument.split(":")
            _send(conn, request.method, _error(int(status), code))
            return True
        if kind == "drop-response":
            return False
        if kind == "delay-response":
            time.sleep(float(argument))
        if kind == "truncate":
            _send(conn, request.method, answer, cut=True)
            return False
        _send(conn, request.method, answer)
        return True

    def _forward(self, request: Request) -> _Answer:
        upstream = http.client.HTTPConnection(*self.upstream, timeout=60)
        try:
            headers = {k: v for k, v in request.headers.items() if k != "connection"}
            upstream.request(request.method, request.path, body=request.body, headers=headers)
            response = upstream.getresponse()
            payload = response.read()
            dropped = {"connection", "transfer-encoding"}
            if request.method != "HEAD":
                dropped.add("content-length")
            kept = [(k, v) for k, v in response.getheaders() if k.lower() not in dropped]
            return _Answer(response.status, response.reason, kept, payload)
        finally:
            upstream.close()


def _error(status: int, code: str) -> _Answer:
    reason = STATUS_TEXT.get(status, "Error")
    return _Answer(status, reason, [], ERROR_BODY.format(code=code).encode())


def _client_gone(conn: socket.socket) -> bool:
    """True if the client closed the connection (it gave up waiting)."""
    try:
        return conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def _read_head(reader: socket.SocketIO | object) -> tuple[str, str, dict[str, str]] | None:
    line = reader.readline()  # type: ignore[attr-defined]
    if not line:
        return None
    method, path, _ = line.decode("latin-1").split(" ", 2)
    headers: dict[str, str] = {}
    while True:
        header = reader.readline()  # type: ignore[attr-defined]
        if header in (b"\r\n", b"\n", b""):
            break
        name, _, value = header.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    return method, path, headers


def _send(conn: socket.socket, method: str, answer: _Answer, *, cut: bool = False) -> None:
    """Send ``answer`` (no body to a HEAD; with ``cut``, only half the body)."""
    lines = [f"HTTP/1.1 {answer.status} {answer.reason}"]
    lines += [f"{k}: {v}" for k, v in answer.headers]
    if not any(k.lower() == "content-length" for k, _ in answer.headers):
        lines.append(f"Content-Length: {len(answer.payload)}")
    payload = b"" if method == "HEAD" else answer.payload
    if cut:
        payload = payload[: len(payload) // 2]
    conn.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + payload)


def is_put(request: Request) -> bool:
    """A PUT of an object (an upload)."""
    return request.method == "PUT" and "/locks/" not in request.path


def is_manifest_put(request: Request) -> bool:
    """The PUT that commits a snapshot (not one of a session's lease)."""
    path = request.path
    return request.method == "PUT" and "/sessions/" in path and "/locks/" not in path


def is_get(request: Request) -> bool:
    """A GET of an object or a listing."""
    return request.method == "GET"
