"""Helpers for the web UI tests: ``snapstore ui`` as a subprocess, headless Chromium through
Selenium, and an in-process app for Starlette's TestClient.

Chromium and chromedriver come from Debian (``chromium``, ``chromium-driver``); ``.ci/run``
installs them when missing. Without them the browser tests skip locally, and fail in CI
(``CI`` set), where they must run.
"""

from __future__ import annotations

import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from helpers.cli import cli_env

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1280,900",
)
STARTUP_TIMEOUT = 30.0
HTML_NAME = "<script>alert(1)<.txt"
"""A file name holding HTML: every page must show it as text."""


def browser_binaries() -> tuple[str, str] | None:
    """The paths of chromium and chromedriver, or None when either is missing."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (chromium, driver) if chromium and driver else None


def require_browser() -> tuple[str, str]:
    """The browser binaries; skips the test when absent, except in CI where they must be."""
    found = browser_binaries()
    if found is not None:
        return found
    reason = (
        "chromium and chromedriver are not installed (apt-get install chromium chromium-driver)"
    )
    if os.environ.get("CI"):
        pytest.fail(f"{reason}; CI must run the browser tests (.ci/run installs them)")
    pytest.skip(reason)


@contextmanager
def chromium(width: int = 1280, height: int = 900) -> Iterator[Any]:
    """A headless Chromium driven by Selenium, with a fresh empty profile."""
    binary, driver_path = require_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="snapstore-ui-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--window-size={width},{height}")
    options.add_argument(f"--user-data-dir={profile}")
    driver = webdriver.Chrome(options=options, service=Service(driver_path))
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@contextmanager
def ui_server(root: Path, *extra: str) -> Iterator[str]:
    """``snapstore --root ROOT ui --port 0 --no-browser`` running; yields the URL it printed
    first. Stopped (SIGTERM, then SIGKILL) on exit."""
    command = [sys.executable, "-m", "snapstore", "--root", str(root), "ui", "--port", "0"]
    process = subprocess.Popen(
        [*command, "--no-browser", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=cli_env(),
        text=True,
    )
    try:
        yield _first_line(process)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _first_line(process: subprocess.Popen[str]) -> str:
    """The first line the server printed on stdout (its URL), within the start-up timeout."""
    lines: queue.Queue[str] = queue.Queue()
    assert process.stdout is not None
    stdout = process.stdout
    threading.Thread(target=lambda: lines.put(stdout.readline()), daemon=True).start()
    try:
        line = lines.get(timeout=STARTUP_TIMEOUT)
    except queue.Empty:
        process.kill()
        raise AssertionError("snapstore ui printed no URL") from None
    if not line:
        assert process.stderr is not None
        raise AssertionError(f"snapstore ui exited: {process.stderr.read()}")
    return line.strip()


def ui_client(store: Any, *, read_only: bool = False, port: int = 8765) -> Any:
    """A Starlette TestClient on the UI over ``store``, with the Host a browser would send
    and its cookie already exchanged; ``client.secrets`` holds the tokens."""
    from starlette.testclient import TestClient

    from snapstore.ui.app import UiState, build_app
    from snapstore.ui.security import Secrets

    secrets = Secrets(port=port, token="t0ken-for-tests", csrf="csrf-for-tests")
    app = build_app(UiState(store, secrets, read_only))
    client = TestClient(app, base_url=f"http://127.0.0.1:{port}", follow_redirects=False)
    client.cookies.set(secrets.cookie_name, secrets.token)
    client.secrets = secrets  # type: ignore[attr-defined]
    return client


@contextmanager
def ui_in_thread(store: Any, *, read_only: bool = False) -> Iterator[str]:
    """The UI over ``store`` served by uvicorn in a thread of this process (so a test can
    patch the UI's settings); yields its URL with the token."""
    import time

    import uvicorn

    from snapstore.ui.app import UiState, build_app
    from snapstore.ui.server import bind, new_secrets

    listener = bind(0)
    secrets = new_secrets(listener.getsockname()[1])
    app = build_app(UiState(store, secrets, read_only))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{secrets.port}/?token={secrets.token}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        listener.close()
