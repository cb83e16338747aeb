"""An HTTP proxy on loopback that injects faults between an S3 client and the server.

Each request is read whole (head and body), then a rule decides what happens to it:
forwarded, answered with an error status (500, 503, a throttling ``SlowDown``, a 412 as a
concurrent writer would cause), delayed past the client's timeout, or cut off by closing the
connection part-way through reading the upload. Rules are (predicate, action, times) and are
consumed in order; a request no rule takes is forwarded.
"""

from __future__ import annotations

import http.client
import socket
import socketserver
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

ERROR_BODY = (
    '<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
    "<Message>injected</Message></Error>"
)
STATUS_TEXT = {412: "Precondition Failed", 500: "Internal Server Error", 503: "Slow Down"}


@dataclass
class Request:
    """What a rule sees of a request."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Rule:
    """Do ``action`` to the next ``times`` requests ``matches`` accepts."""

    matches: Callable[[Request], bool]
    action: str
    """``error:<status>:<code>``, ``delay:<seconds>``, ``drop`` (close after half the upload),
    or ``drop-response`` (forward, then close instead of answering)."""
    times: int = 1


class FaultProxy:
    """The proxy: ``endpoint`` is what the client is given; ``rules`` are consumed in order."""

    def __init__(self, upstream: str) -> None:
        host, _, port = upstream.removeprefix("http://").partition(":")
        self.upstream = (host, int(port))
        self.rules: list[Rule] = []
        self.injected: list[str] = []
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

    def add(self, matches: Callable[[Request], bool], action: str, times: int = 1) -> None:
        """Inject ``action`` into the next ``times`` matching requests."""
        with self._lock:
            self.rules.append(Rule(matches, action, times))

    def _action(self, request: Request) -> str | None:
        with self._lock:
            for rule in self.rules:
                if rule.times > 0 and rule.matches(request):
                    rule.times -= 1
                    self.injected.append(f"{rule.action} {request.method} {request.path}")
                    return rule.action
        return None

    def close(self) -> None:
        """Stop accepting connections."""
        self.server.shutdown()
        self.server.server_close()

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
                action = self._peek_action(method, path, headers, length)
                if action == "drop":
                    reader.read(length // 2)
                    return
                body = reader.read(length) if length else b""
                request = Request(method, path, headers, body)
                action = action or self._action(request)
                if action is not None and action.startswith("delay:"):
                    time.sleep(float(action.split(":")[1]))
                    action = None
                if action is not None and action.startswith("error:"):
                    _, status, code = action.split(":")
                    _send(conn, int(status), ERROR_BODY.format(code=code).encode())
                    continue
                status, reason, response_headers, payload = self._forward(request)
                if action == "drop-response":
                    return
                _send(conn, status, payload, reason, response_headers)
        except (ConnectionError, OSError):
            return
        finally:
            reader.close()
            conn.close()

    def _peek_action(
        self, method: str, path: str, headers: dict[str, str], length: int
    ) -> str | None:
        """A ``drop`` rule is decided before the body is read (the point is not to read it)."""
        request = Request(method, path, headers, b"")
        with self._lock:
            for rule in self.rules:
                if rule.action == "drop" and rule.times > 0 and length and rule.matches(request):
                    rule.times -= 1
                    self.injected.append(f"drop {method} {path}")
                    return "drop"
        return None

    def _forward(self, request: Request) -> tuple[int, str, list[tuple[str, str]], bytes]:
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
            return response.status, response.reason, kept, payload
        finally:
            upstream.close()


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


def _send(
    conn: socket.socket,
    status: int,
    payload: bytes,
    reason: str | None = None,
    headers: list[tuple[str, str]] | None = None,
) -> None:
    lines = [f"HTTP/1.1 {status} {reason or STATUS_TEXT.get(status, 'Error')}"]
    lines += [f"{k}: {v}" for k, v in headers or []]
    if not any(k.lower() == "content-length" for k, _ in headers or []):
        lines.append(f"Content-Length: {len(payload)}")
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
