"""``snapstore ui`` as a command: the URL first on stdout, 127.0.0.1 only, the token."""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from helpers.cli import Cli
from helpers.webui import ui_server

from snapstore import SnapStore


def status_of(url: str, host: str | None = None) -> int:
    request = urllib.request.Request(url, headers={"Host": host} if host else {})
    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


def test_the_command_prints_its_url_and_refuses_requests_without_the_token(
    store: SnapStore, root: Path, tmp_path: Path
) -> None:
    store.create("s", "n", [], base_dir=tmp_path)
    with ui_server(root) as url:
        parts = urlsplit(url)
        assert parts.scheme == "http" and parts.hostname == "127.0.0.1"
        assert parts.port and parts.port > 0 and parts.query.startswith("token=")
        base = f"http://127.0.0.1:{parts.port}"
        assert status_of(base + "/") == 403
        assert status_of(url) == 303
        assert status_of(url, host=f"attacker.example:{parts.port}") == 403


def test_the_command_needs_an_existing_store(tmp_path: Path) -> None:
    result = Cli(tmp_path).run("ui", "--no-browser", "--port", "0")
    assert result.code == 10 and "no store" in result.stderr


def test_the_command_is_listed_in_the_help(tmp_path: Path) -> None:
    assert "ui" in Cli(tmp_path).run("--help").stdout.split()


@pytest.mark.parametrize("port", ["-1", "65536", "x"])
def test_a_bad_port_is_a_usage_error(tmp_path: Path, port: str) -> None:
    assert Cli(tmp_path).run("ui", "--no-browser", "--port", port).code == 2


def test_without_the_ui_extra_the_command_says_how_to_install_it(
    store: SnapStore, root: Path, tmp_path: Path
) -> None:
    from helpers.cli import REPO

    store.create("s", "n", [], base_dir=tmp_path)
    hidden = tmp_path / "hidden"
    (hidden / "starlette").mkdir(parents=True)
    (hidden / "starlette" / "__init__.py").write_text("raise ImportError('not installed')\n")
    cli = Cli(tmp_path)
    result = cli.run(
        "--root",
        str(root),
        "ui",
        "--no-browser",
        root=False,
        env={"PYTHONPATH": f"{hidden}:{REPO}"},
    )
    assert result.code == 1
    assert "pip install 'snapstore[ui]'" in result.stderr and result.stdout == ""
