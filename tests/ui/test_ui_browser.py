"""The web UI in a real browser: headless Chromium through Selenium, against
``snapstore ui --port 0 --no-browser`` run as a user would run it.

One scenario per browser start (each costs seconds): skipped when chromium or chromedriver is
missing locally, required in CI (see helpers.webui).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import cli_env
from helpers.webui import HTML_NAME, chromium, require_browser, ui_in_thread, ui_server

from snapstore import SnapStore

pytest.importorskip("selenium", reason="selenium is not installed (the 'dev' extra has it)")

from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

WAIT = 20.0
APP = "src/app.py"


def wait(driver: Any) -> Any:
    return WebDriverWait(driver, WAIT)


def button(driver: Any, label: str, within: Any = None) -> Any:
    """The visible button whose text is ``label``."""
    scope = within or driver
    found = [b for b in scope.find_elements(By.TAG_NAME, "button") if b.text == label]
    visible = [b for b in found if b.is_displayed()]
    assert visible, f"no visible {label!r} button"
    return visible[0]


def no_alert(driver: Any) -> bool:
    try:
        _ = driver.switch_to.alert
    except NoAlertPresentException:
        return True
    return False


def checkpoint_from_another_process(root: Path, project: Path, name: str) -> None:
    command = [sys.executable, "-m", "snapstore", "--root", str(root), "-q", "create", "agent"]
    subprocess.run(
        [*command, ".", "--base", str(project), "--name", name],
        check=True,
        env=cli_env(),
        capture_output=True,
        timeout=60,
    )


def test_browse_diff_restore_undo_and_follow_new_checkpoints(
    two_steps: SnapStore, root: Path, project: Path
) -> None:
    require_browser()
    with ui_server(root) as url, chromium() as driver:
        driver.get(url)
        wait(driver).until(expected_conditions.title_contains("Sessions"))
        assert "?token=" not in driver.current_url  # exchanged for the cookie
        assert "agent" in driver.find_element(By.TAG_NAME, "main").text
        driver.execute_script("window.notReloaded = true;")
        checkpoint_from_another_process(root, project, "step-2b")
        wait(driver).until(lambda d: d.find_elements(By.LINK_TEXT, "step-2b"))
        assert driver.execute_script("return window.notReloaded === true;")

        driver.find_element(By.LINK_TEXT, "agent").click()
        wait(driver).until(expected_conditions.presence_of_element_located((By.ID, "timeline")))
        timeline = driver.find_element(By.ID, "timeline").text
        assert "step-1" in timeline and "step-2" in timeline
        wait(driver).until(
            lambda d: (
                "modified" in d.find_element(By.CSS_SELECTOR, 'td.changes[data-name="step-2"]').text
            )
        )

        driver.execute_script("window.notReloaded = true;")
        checkpoint_from_another_process(root, project, "step-3")
        wait(driver).until(lambda d: d.find_elements(By.CSS_SELECTOR, 'tr[data-name="step-3"]'))
        assert driver.execute_script("return window.notReloaded === true;")

        driver.find_element(By.LINK_TEXT, "step-2").click()
        wait(driver).until(expected_conditions.title_contains("step-2"))
        deleted = [e.text for e in driver.find_elements(By.CSS_SELECTOR, "pre.udiff del")]
        added = [e.text for e in driver.find_elements(By.CSS_SELECTOR, "pre.udiff ins")]
        assert "-print('version one')" in deleted and "+print('version two')" in added

        driver.get(url.split("?")[0] + "files?s=agent&n=step-1")
        assert driver.find_element(By.LINK_TEXT, HTML_NAME).is_displayed()
        assert no_alert(driver)

        (project / HTML_NAME).write_text("changed after step-2\n")
        driver.get(url.split("?")[0] + "session?s=agent")
        row = wait(driver).until(
            lambda d: d.find_element(By.CSS_SELECTOR, 'tr[data-name="step-1"]')
        )
        button(driver, "Restore", row).click()
        dialog = wait(driver).until(
            expected_conditions.visibility_of_element_located((By.ID, "confirm-dialog"))
        )
        assert APP in dialog.text and "would" in dialog.text
        assert HTML_NAME in dialog.text  # a path holding HTML is shown as text here too
        assert "version two" in (project / APP).read_text()  # the preview wrote nothing
        button(driver, "Confirm", dialog).click()
        result = wait(driver).until(
            expected_conditions.visibility_of_element_located((By.ID, "result"))
        )
        wait(driver).until(lambda d: "version one" in (project / APP).read_text())
        assert not (project / "NOTES.md").exists()

        button(driver, "Undo", result).click()
        wait(driver).until(lambda d: "version two" in (project / APP).read_text())
        assert (project / "NOTES.md").read_text() == "notes\n"

        row = driver.find_element(By.CSS_SELECTOR, 'tr[data-name="step-3"]')
        button(driver, "Delete", row).click()
        dialog = wait(driver).until(
            expected_conditions.visibility_of_element_located((By.ID, "confirm-dialog"))
        )
        button(driver, "Confirm", dialog).click()
        wait(driver).until(lambda d: not d.find_elements(By.CSS_SELECTOR, 'tr[data-name="step-3"]'))
        assert [info.name for info in two_steps.list("agent")] == ["step-1", "step-2", "step-2b"]
        assert no_alert(driver)


def test_diffs_left_for_later_load_into_the_page(diffs_left_for_later: SnapStore) -> None:
    require_browser()
    with ui_in_thread(diffs_left_for_later) as url, chromium() as driver:
        driver.get(url)
        driver.get(url.split("?")[0] + "checkpoint?s=s&n=b")
        wait(driver).until(lambda d: not d.find_elements(By.CSS_SELECTOR, "article.pending"))
        added = [e.text for e in driver.find_elements(By.CSS_SELECTOR, "pre.udiff ins")]
        assert added == ["+new 0", "+new 1", "+new 2", "+new 3"]
