"""Who may use the web UI: token and cookie, Host header, CSRF, escaping, headers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helpers.webui import HTML_NAME, ui_client

from snapstore import SnapStore


def fresh(client: Any) -> Any:
    """The same app, without the cookie (a client that has not presented the token)."""
    client.cookies.clear()
    return client


def test_a_request_without_the_token_is_refused(client: Any) -> None:
    fresh(client)
    for url in ("/", "/session?s=agent", "/static/ui.js", "/api/head?s=agent", "/nowhere"):
        response = client.get(url)
        assert response.status_code == 403, url
        assert "agent" not in response.text


def test_a_wrong_token_or_cookie_is_refused(client: Any) -> None:
    fresh(client)
    assert client.get("/?token=wrong").status_code == 403
    client.cookies.set(client.secrets.cookie_name, "wrong")
    assert client.get("/").status_code == 403
    client.cookies.clear()
    client.cookies.set("snapstore_ui_1", client.secrets.token)  # another port's cookie name
    assert client.get("/").status_code == 403


def test_the_token_is_exchanged_for_a_strict_http_only_cookie(client: Any) -> None:
    fresh(client)
    response = client.get(f"/session?s=agent&token={client.secrets.token}")
    assert response.status_code == 303
    assert response.headers["location"] == "/session?s=agent"
    cookie = response.headers["set-cookie"]
    assert cookie.startswith(f"{client.secrets.cookie_name}={client.secrets.token};")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    page = client.get("/session?s=agent")
    assert page.status_code == 200 and "step-2" in page.text


def test_the_redirect_never_leaves_the_server(client: Any) -> None:
    fresh(client)
    response = client.get(f"//evil.example/?token={client.secrets.token}")
    assert response.status_code == 303
    assert response.headers["location"].startswith("/")
    assert not response.headers["location"].startswith("//")


def test_a_foreign_host_header_is_refused_even_with_the_cookie(client: Any) -> None:
    for host in ("evil.example", "evil.example:8765", "127.0.0.1:9999", "localhost", ""):
        response = client.get("/", headers={"Host": host})
        assert response.status_code == 403, host
    assert client.get("/", headers={"Host": "localhost:8765"}).status_code == 200
    assert client.get("/", headers={"Host": "127.0.0.1:8765"}).status_code == 200


def test_a_post_without_the_csrf_token_is_refused(client: Any, project: Path) -> None:
    before = (project / "src" / "app.py").read_text()
    body = {"session": "agent", "name": "step-1"}
    assert client.post("/api/restore", json=body).status_code == 403
    wrong = {"X-CSRF-Token": "nope"}
    assert client.post("/api/restore", json=body, headers=wrong).status_code == 403
    assert client.post("/api/delete", json=body).status_code == 403
    assert (project / "src" / "app.py").read_text() == before
    good = {"X-CSRF-Token": client.secrets.csrf}
    foreign = {**good, "Origin": "http://evil.example"}
    assert client.post("/api/restore", json=body, headers=foreign).status_code == 403
    assert (project / "src" / "app.py").read_text() == before
    assert client.post("/api/restore", json=body, headers=good).status_code == 200
    assert (project / "src" / "app.py").read_text() != before


def test_state_changing_routes_take_no_get(client: Any, two_steps: SnapStore) -> None:
    assert client.get("/api/delete?session=agent&name=step-1").status_code == 405
    assert [info.name for info in two_steps.list("agent")] == ["step-1", "step-2"]


def test_names_and_paths_holding_html_are_shown_as_text(store: SnapStore, project: Path) -> None:
    session = "<img src=x onerror=alert(2)>"
    store.create(session, "<b>bold</b>", ["."], base_dir=project)
    client = ui_client(store)
    pages = [
        client.get("/"),
        client.get("/session", params={"s": session}),
        client.get("/checkpoint", params={"s": session, "n": "<b>bold</b>"}),
        client.get("/files", params={"s": session, "n": "<b>bold</b>"}),
        client.get("/file", params={"s": session, "n": "<b>bold</b>", "path": HTML_NAME}),
        client.get("/history", params={"s": session, "path": HTML_NAME}),
    ]
    for page in pages:
        assert page.status_code == 200, page.url
        assert "<script>alert" not in page.text and "<img src=x" not in page.text
        assert "<b>bold" not in page.text
    assert "&lt;img src=x onerror=alert(2)&gt;" in pages[0].text
    assert "&lt;script&gt;alert(1)&lt;.txt" in pages[3].text
    assert "&lt;b&gt;bold&lt;/b&gt;" in pages[1].text


def test_error_pages_escape_what_they_echo(client: Any) -> None:
    page = client.get("/session", params={"s": "<script>x</script>"})
    assert page.status_code == 404
    assert "<script>x" not in page.text and "&lt;script&gt;x" in page.text


def test_every_answer_carries_the_security_headers(client: Any) -> None:
    for response in (client.get("/"), fresh(client).get("/")):
        csp = response.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["referrer-policy"] == "no-referrer"
        assert response.headers["cache-control"] == "no-store"


def test_read_only_serves_no_actions(two_steps: SnapStore, project: Path) -> None:
    client = ui_client(two_steps, read_only=True)
    headers = {"X-CSRF-Token": client.secrets.csrf}
    body = {"session": "agent", "name": "step-1"}
    for action in ("restore", "undo", "delete"):
        assert client.post(f"/api/{action}", json=body, headers=headers).status_code in (404, 405)
    for url in ("/session?s=agent", "/checkpoint?s=agent&n=step-2"):
        page = client.get(url).text
        assert ">Restore<" not in page and ">Delete<" not in page and "read-only" in page
    assert [info.name for info in two_steps.list("agent")] == ["step-1", "step-2"]


def _exchange_location(client: Any, raw_path: bytes) -> str:
    """Where the Guard redirects a request for ``raw_path`` (sent as is, as a hostile client
    would) that offers the token."""
    import asyncio

    from snapstore.ui.security import Guard

    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b""}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "method": "GET",
        "path": raw_path.decode("latin-1"),
        "raw_path": raw_path,
        "query_string": f"token={client.secrets.token}".encode(),
        "headers": [(b"host", f"127.0.0.1:{client.secrets.port}".encode())],
    }
    asyncio.run(Guard(client.app, client.secrets)(scope, receive, send))
    assert sent[0]["status"] == 303
    return dict(sent[0]["headers"])[b"location"].decode("latin-1")


def test_the_redirect_never_leaves_the_server_by_backslash(client: Any) -> None:
    for raw in (
        b"/\\evil.example",
        b"\\\\evil.example",
        b"/\\/evil.example",
        b"//\\evil.example",
        b"/\t/evil.example",
        b"/ /evil.example",
    ):
        location = _exchange_location(client, raw)
        assert location.startswith("/") and location[1:2] not in ("/", "\\"), (raw, location)
        assert "\\" not in location and "\t" not in location and " " not in location, location
    assert _exchange_location(client, b"/session") == "/session"
    assert _exchange_location(client, b"/a%5Cb/c") == "/a%5Cb/c"
