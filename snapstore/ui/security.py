"""Who may talk to the web UI: the guard every request passes before any page or action.

- The Host header must be ``127.0.0.1:PORT`` or ``localhost:PORT`` (a page on another site
  that points a name of its own at 127.0.0.1, DNS rebinding, is refused).
- A request must carry the server's secret: the token in the URL the server printed, which is
  exchanged once for a cookie (HttpOnly, SameSite=Strict, named after the port so that two
  servers on one host keep apart) and then dropped from the address bar by a redirect.
  Anything without it (another local user, a page in the browser) gets 403.
- A request that changes anything is a POST carrying the per-server CSRF token in the
  ``X-CSRF-Token`` header, and an ``Origin``, if sent, of this server.
- Every answer says: no caching, no framing, no referrer, scripts from this server only.

Secrets are compared in constant time (``hmac.compare_digest``).
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

TOKEN_PARAMETER = "token"
CSRF_HEADER = "x-csrf-token"
SAFE_METHODS = frozenset({"GET", "HEAD"})
SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (
        b"content-security-policy",
        b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        b"connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
)


@dataclass(frozen=True)
class Secrets:
    """What a server checks: its port (for Host and Origin), its token and CSRF token."""

    port: int
    token: str
    csrf: str

    @property
    def hosts(self) -> frozenset[str]:
        return frozenset({f"127.0.0.1:{self.port}", f"localhost:{self.port}"})

    @property
    def origins(self) -> frozenset[str]:
        return frozenset(f"http://{host}" for host in self.hosts)

    @property
    def cookie_name(self) -> str:
        return f"snapstore_ui_{self.port}"


def same_secret(given: str | None, expected: str) -> bool:
    """Whether ``given`` is ``expected``, compared in constant time."""
    if given is None:
        return False
    return hmac.compare_digest(given.encode("utf-8", "replace"), expected.encode("utf-8"))


def _headers(scope: Scope) -> dict[str, str]:
    """The request's headers by lower-case name (the last of repeated ones)."""
    return {
        name.decode("latin-1").lower(): value.decode("latin-1")
        for name, value in scope.get("headers", [])
    }


def _cookie(headers: dict[str, str], name: str) -> str | None:
    """The value of cookie ``name``, if the request sent it."""
    raw = headers.get("cookie")
    if not raw:
        return None
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(raw)
    except Exception:  # a malformed Cookie header is a request without our cookie
        return None
    morsel = jar.get(name)
    return None if morsel is None else morsel.value


async def _refuse(send: Send, status: int, reason: str) -> None:
    """Answer ``status`` with a one-line plain-text reason."""
    body = f"{status}: {reason}\n".encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
                *SECURITY_HEADERS,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class Guard:
    """ASGI middleware that lets through only requests that pass the checks above."""

    def __init__(self, app: ASGIApp, secrets: Secrets) -> None:
        self.app = app
        self.secrets = secrets

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        if headers.get("host") not in self.secrets.hosts:
            await _refuse(send, 403, "this server answers to 127.0.0.1 and localhost only")
            return
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        offered = dict(query).get(TOKEN_PARAMETER)
        if offered is not None and same_secret(offered, self.secrets.token):
            await self._exchange(scope, send, [(k, v) for k, v in query if k != TOKEN_PARAMETER])
            return
        if not same_secret(_cookie(headers, self.secrets.cookie_name), self.secrets.token):
            await _refuse(send, 403, "open the URL 'snapstore ui' printed (it holds the token)")
            return
        if scope["method"] not in SAFE_METHODS and not self._csrf_ok(headers):
            await _refuse(send, 403, "missing or wrong CSRF token")
            return
        await self.app(scope, receive, _with_headers(send))

    def _csrf_ok(self, headers: dict[str, str]) -> bool:
        """A state-changing request: the CSRF token, and an Origin of this server if any."""
        origin = headers.get("origin")
        if origin is not None and origin not in self.secrets.origins:
            return False
        return same_secret(headers.get(CSRF_HEADER), self.secrets.csrf)

    async def _exchange(self, scope: Scope, send: Send, rest: list[tuple[str, str]]) -> None:
        """The token in the URL becomes a cookie; redirect to the same page without it."""
        raw_path = scope.get("raw_path") or quote(scope.get("path", "/")).encode("latin-1")
        location = local_path(raw_path.decode("latin-1")) + (f"?{urlencode(rest)}" if rest else "")
        cookie = (
            f"{self.secrets.cookie_name}={self.secrets.token}; Path=/; HttpOnly; SameSite=Strict"
        )
        await send(
            {
                "type": "http.response.start",
                "status": 303,
                "headers": [
                    (b"location", location.encode("latin-1")),
                    (b"set-cookie", cookie.encode("latin-1")),
                    (b"content-length", b"0"),
                    *SECURITY_HEADERS,
                ],
            }
        )
        await send({"type": "http.response.body", "body": b""})


_PATH_SAFE = "/%:@!$&'()*+,;=-._~"
"""What a path keeps as is in a redirect; anything else (``\\``, spaces, control characters)
is percent-encoded."""


def local_path(path: str) -> str:
    """``path`` as a redirect that stays on this server: one leading ``/``, never a run of
    ``/`` and ``\\`` (browsers read ``//host`` and ``/\\host`` alike as another site), and no
    backslash, tab or newline left for a browser to reinterpret."""
    return "/" + quote(path.lstrip("/\\\t\n\r "), safe=_PATH_SAFE, encoding="latin-1")


def _with_headers(send: Send) -> Send:
    """``send`` that adds the security headers to the response's start."""

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
        await send(message)

    return sending
