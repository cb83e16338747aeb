"""Make the screenshots of docs/ui.md: a demo store, ``snapstore ui``, headless Chromium.

    .venv/bin/python tests/ui/screenshots.py docs/ui

Builds a store in a temp directory (an agent's session of four turns on a small project, a
restore and its undo backup, a second session, a state value), starts ``snapstore ui`` on it,
and saves one PNG per page into the directory given. Needs chromium and chromedriver.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers.trees import write_tree
from helpers.webui import chromium, ui_server
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

from snapstore import SnapStore

TODO_V1 = """\
from dataclasses import dataclass


@dataclass
class Task:
    title: str
    done: bool = False


def add(tasks: list[Task], title: str) -> Task:
    task = Task(title)
    tasks.append(task)
    return task
"""
TODO_V2 = TODO_V1.replace(
    "    return task\n",
    "    return task\n\n\ndef complete(tasks: list[Task], title: str) -> None:\n"
    "    for task in tasks:\n        if task.title == title:\n            task.done = True\n",
)
STORAGE_V1 = """\
import json
from pathlib import Path


def save(path: Path, tasks: list[dict]) -> None:
    path.write_text(json.dumps(tasks))


def load(path: Path) -> list[dict]:
    return json.loads(path.read_text())
"""
STORAGE_V2 = STORAGE_V1.replace(
    "    path.write_text(json.dumps(tasks))\n",
    "    temporary = path.with_suffix('.tmp')\n"
    "    temporary.write_text(json.dumps(tasks, indent=2))\n"
    "    temporary.replace(path)\n",
)


def demo_store(root: Path, project: Path) -> None:
    """The store the screenshots show."""
    store = SnapStore(root)
    write_tree(
        project,
        {
            "README.md": "# todo\n\nA small task list.\n",
            "src/todo.py": TODO_V1,
            "src/storage.py": STORAGE_V1,
            "tests/test_todo.py": (
                "from todo import add\n\n\ndef test_add():\n    assert add([], 'x')\n"
            ),
            "logo.png": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
        },
    )
    meta = {"agent": "demo-agent"}
    store.create("agent-refactor", "turn-1-before-edit", ["."], base_dir=project, meta=meta)
    (project / "src" / "storage.py").write_text(STORAGE_V2)
    store.create("agent-refactor", "turn-2-atomic-save", ["."], base_dir=project, meta=meta)
    (project / "src" / "todo.py").write_text(TODO_V2)
    (project / "CHANGES.md").write_text("- tasks can be completed\n")
    store.create("agent-refactor", "turn-3-complete-tasks", ["."], base_dir=project, meta=meta)
    (project / "tests" / "test_todo.py").write_text(
        "from todo import add, complete\n\n\ndef test_complete():\n    tasks = []\n"
        "    add(tasks, 'x')\n    complete(tasks, 'x')\n    assert tasks[0].done\n"
    )
    (project / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x01")
    store.create("agent-refactor", "turn-4-tests", ["."], base_dir=project, meta=meta)
    store.restore("agent-refactor", "turn-2-atomic-save", paths=["src/todo.py"])
    store.undo("agent-refactor")
    store.create("editor-vim", "before-save", ["README.md"], base_dir=project)
    store.put_state("etl", "cursor", {"offset": 1234})


def shoot(driver: Any, folder: Path, name: str) -> None:
    time.sleep(0.4)  # let the lazy change counts arrive
    path = folder / f"{name}.png"
    driver.save_screenshot(str(path))
    print(f"{path}: {path.stat().st_size // 1024} KiB")


def main() -> None:
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/ui")
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        root, project = Path(scratch) / "store", Path(scratch) / "todo"
        demo_store(root, project)
        with ui_server(root) as url, chromium(1100, 720) as driver:
            base = url.split("?")[0]
            wait = WebDriverWait(driver, 20)
            driver.get(url)
            shoot(driver, folder, "sessions")
            driver.get(base + "session?s=agent-refactor")
            wait.until(lambda d: "modified" in d.find_element(By.ID, "timeline").text)
            shoot(driver, folder, "timeline")
            driver.get(base + "checkpoint?s=agent-refactor&n=turn-3-complete-tasks")
            shoot(driver, folder, "changes")
            driver.get(base + "history?s=agent-refactor&path=src/storage.py")
            shoot(driver, folder, "history")
            driver.get(base + "file?s=agent-refactor&n=turn-1-before-edit&path=src/storage.py")
            shoot(driver, folder, "file")
            driver.get(base + "backups?s=agent-refactor")
            shoot(driver, folder, "backups")
            driver.get(base + "session?s=agent-refactor")
            row = wait.until(
                lambda d: d.find_element(By.CSS_SELECTOR, 'tr[data-name="turn-2-atomic-save"]')
            )
            row.find_element(By.XPATH, ".//button[text()='Restore']").click()
            wait.until(expected_conditions.visibility_of_element_located((By.ID, "confirm-dialog")))
            shoot(driver, folder, "restore-dialog")
            driver.find_element(By.ID, "dialog-confirm").click()
            wait.until(expected_conditions.visibility_of_element_located((By.ID, "result")))
            shoot(driver, folder, "restore-result")


if __name__ == "__main__":
    main()
