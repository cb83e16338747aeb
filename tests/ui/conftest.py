"""Fixtures for the web UI tests: they need the 'ui' extra (Starlette, uvicorn, Jinja2)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers.trees import write_tree

pytest.importorskip("starlette", reason="the 'ui' extra is not installed")
pytest.importorskip("jinja2", reason="the 'ui' extra is not installed")

from helpers.webui import HTML_NAME, ui_client

from snapstore import SnapStore


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A small project whose first checkpoint the tests take."""
    base = tmp_path / "project"
    write_tree(
        base,
        {
            "src/app.py": "import os\nprint('version one')\n",
            "README.md": "# demo\n",
            HTML_NAME: "not a script\n",
            "data.bin": b"\x00\x01\x02binary",
        },
    )
    return base


@pytest.fixture
def two_steps(store: SnapStore, project: Path) -> SnapStore:
    """Session ``agent`` with ``step-1`` and ``step-2`` (src/app.py changed, NOTES.md new)."""
    store.create("agent", "step-1", ["."], base_dir=project)
    (project / "src" / "app.py").write_text("import os\nprint('version two')\n")
    (project / "NOTES.md").write_text("notes\n")
    store.create("agent", "step-2", ["."], base_dir=project)
    return store


@pytest.fixture
def client(two_steps: SnapStore) -> Any:
    """A TestClient on the UI over ``two_steps``, cookie exchanged."""
    return ui_client(two_steps)


@pytest.fixture
def diffs_left_for_later(
    store: SnapStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> SnapStore:
    """Session ``s``: checkpoints ``a`` and ``b`` of four files that all changed (``old N``
    to ``new N``), with the checkpoint page's time budgets at zero, so that a page shows one
    diff and leaves the others to load after it."""
    from snapstore.ui import pages

    base = tmp_path / "p"
    write_tree(base, {f"f{n}.txt": f"old {n}\n" for n in range(4)})
    store.create("s", "a", ["."], base_dir=base)
    write_tree(base, {f"f{n}.txt": f"new {n}\n" for n in range(4)})
    store.create("s", "b", ["."], base_dir=base)
    monkeypatch.setattr(pages, "PAGE_BUDGET", 0.0)
    monkeypatch.setattr(pages, "FRAGMENT_BUDGET", 0.0)
    return store
