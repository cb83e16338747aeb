"""What the web UI's pages show: sessions, timeline, changes as diffs, files, history,
undo backups. Driven through Starlette's TestClient."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

from helpers.trees import write_tree
from helpers.webui import ui_client

from snapstore import SnapStore
from snapstore.ui.views import DIFF_PAGE, TIMELINE_PAGE


def rows(page: str) -> list[str]:
    """The checkpoint names of a timeline's rows, in page order."""
    return [html.unescape(name) for name in re.findall(r'<tr data-name="([^"]*)"', page)]


def test_sessions_page_lists_sessions_with_newest_checkpoint(
    client: Any, two_steps: SnapStore
) -> None:
    two_steps.put_state("agent", "cursor", {"offset": 3})
    page = client.get("/").text
    assert "agent" in page and "step-2" in page and "step-1" in page
    rows = client.get("/sessions/rows").text
    assert "step-2" in rows and "<html" not in rows
    signature = re.search(r'data-signature="([^"]*)"', rows)
    assert signature is not None and f'data-signature="{signature.group(1)}"' in page
    two_steps.create("agent", "step-3", [])
    assert signature.group(1) not in client.get("/sessions/rows").text
    summary = re.search(r"<td class=\"num\">(\d+)</td>", page)
    assert summary is not None and summary.group(1) == "2"
    assert "cursor" not in page  # state values are counted, not listed as checkpoints


def test_an_empty_store_says_so(store: SnapStore) -> None:
    assert "holds no checkpoints yet" in ui_client(store).get("/").text


def test_timeline_pages_newest_first(store: SnapStore, tmp_path: Path) -> None:
    base = tmp_path / "p"
    write_tree(base, {"a.txt": "0"})
    total = TIMELINE_PAGE + 7
    for number in range(total):
        (base / "a.txt").write_text(str(number))
        store.create("s", f"c{number:03d}", ["a.txt"], base_dir=base)
    client = ui_client(store)
    first = client.get("/session?s=s").text
    assert rows(first) == [f"c{n:03d}" for n in range(total - 1, total - 1 - TIMELINE_PAGE, -1)]
    assert "page 1 of 2" in first
    last = client.get("/session?s=s&page=2").text
    assert rows(last) == [f"c{n:03d}" for n in range(6, -1, -1)]
    assert rows(client.get("/session/rows?s=s&page=2").text) == rows(last)
    assert client.get("/api/head?s=s").json() == {"count": total, "newest": f"c{total - 1:03d}"}


def test_change_counts_compare_each_checkpoint_with_the_one_before(client: Any) -> None:
    counts = client.get("/api/changes?s=agent&n=step-1&n=step-2&n=nope").json()
    assert counts["step-2"] == {"added": 1, "modified": 1, "removed": 0}
    assert counts["step-1"]["added"] >= 4 and counts["step-1"]["removed"] == 0
    assert "nope" not in counts


def test_a_checkpoint_shows_its_changes_from_the_previous_one(client: Any) -> None:
    page = client.get("/checkpoint?s=agent&n=step-2").text
    assert re.search(
        r"From <span class=\"name\">step-1</span> to <span class=\"name\">step-2", page
    )
    assert "<del>-print(&#39;version one&#39;)</del>" in page
    assert "<ins>+print(&#39;version two&#39;)</ins>" in page
    assert "<ins>+notes</ins>" in page  # a new file: every line added
    assert "NOTES.md" in page and "src/app.py" in page


def test_a_checkpoint_compared_with_the_directory_reads_from_checkpoint_to_directory(
    client: Any, project: Path
) -> None:
    (project / "src" / "app.py").write_text("import os\nprint('edited by hand')\n")
    page = client.get("/checkpoint?s=agent&n=step-2&against=directory").text
    assert f"{project} (now)" in page
    assert "<del>-print(&#39;version two&#39;)</del>" in page
    assert "<ins>+print(&#39;edited by hand&#39;)</ins>" in page


def test_two_checkpoints_compare_from_the_older_to_the_newer(client: Any) -> None:
    for name, other in (("step-1", "step-2"), ("step-2", "step-1"), ("step-1", "latest")):
        page = client.get("/checkpoint", params={"s": "agent", "n": name, "against": other}).text
        assert "<ins>+print(&#39;version two&#39;)</ins>" in page, (name, other)


def test_binary_files_are_named_not_shown(store: SnapStore, project: Path) -> None:
    store.create("b", "one", ["data.bin"], base_dir=project)
    (project / "data.bin").write_bytes(b"\x00\x09changed")
    store.create("b", "two", ["data.bin"], base_dir=project)
    page = ui_client(store).get("/checkpoint?s=b&n=two").text
    assert "data.bin" in page and "binary file" in page
    assert "changed" not in page.split("data.bin", 1)[1].split("</article>")[0].replace(
        "binary file", ""
    )


def test_a_big_checkpoint_is_paged_with_a_tree_of_every_changed_file(
    store: SnapStore, tmp_path: Path
) -> None:
    base = tmp_path / "big"
    count = DIFF_PAGE * 2 + 3
    write_tree(base, {f"d{n % 4}/f{n:03d}.txt": f"old {n}\n" for n in range(count)})
    store.create("big", "before", ["."], base_dir=base)
    write_tree(base, {f"d{n % 4}/f{n:03d}.txt": f"new {n}\n" for n in range(count)})
    store.create("big", "after", ["."], base_dir=base)
    client = ui_client(store)
    first = client.get("/checkpoint?s=big&n=after").text
    assert first.count('<article class="diff"') == DIFF_PAGE
    assert first.count('class="pick"') == count  # the tree lists every changed file
    assert "page 1 of 3" in first
    last = client.get("/checkpoint?s=big&n=after&page=3").text
    assert last.count('<article class="diff"') == 3
    target = sorted(f"d{n % 4}/f{n:03d}.txt" for n in range(count))[-1]
    number = int(target.split("/f")[1][:3])
    assert f"<ins>+new {number}</ins>" in last


def test_a_file_at_a_checkpoint_and_its_history(client: Any) -> None:
    old = client.get("/file?s=agent&n=step-1&path=src/app.py").text
    assert "print(&#39;version one&#39;)" in old
    history = client.get("/history?s=agent&path=src/app.py").text
    assert history.index("step-2") < history.index("step-1")  # newest first
    assert "/file?s=agent&amp;n=step-1&amp;path=src%2Fapp.py" in history
    assert client.get("/file?s=agent&n=step-1&path=NOTES.md").status_code == 404
    listing = client.get("/files?s=agent&n=step-2").text
    assert "NOTES.md" in listing and "src/app.py" in listing


def test_undo_backups_are_listed_apart_from_checkpoints(client: Any, two_steps: SnapStore) -> None:
    assert "No undo backups" in client.get("/backups?s=agent").text
    report = two_steps.restore("agent", "step-1")
    assert report.backup is not None
    backups = client.get("/backups?s=agent").text
    assert report.backup in backups and "step-1" in backups and ">Undo<" in backups
    assert report.backup not in client.get("/session?s=agent").text


def test_unknown_names_are_a_not_found_page(client: Any) -> None:
    for url in ("/session?s=nope", "/checkpoint?s=agent&n=nope", "/history?s=agent&path=nope"):
        response = client.get(url)
        assert response.status_code == 404, url
        assert "Error" in response.text
    assert client.get("/checkpoint?s=agent").status_code == 400


def test_diffs_not_ready_in_time_load_after_the_page(diffs_left_for_later: SnapStore) -> None:
    client = ui_client(diffs_left_for_later)
    page = client.get("/checkpoint?s=s&n=b").text
    assert page.count('<article class="diff"') == 1 and page.count("diff pending") == 3
    assert "<ins>+new 0</ins>" in page and "+new 1" not in page
    more = client.get("/checkpoint/diffs?s=s&n=b&against=previous&page=1&from=2").text
    assert "<ins>+new 2</ins>" in more and 'id="change-3"' in more and "+new 1" not in more


def test_only_paths_the_checkpoint_records_can_be_ticked_for_a_restore(client: Any) -> None:
    newer = client.get("/checkpoint?s=agent&n=step-2").text
    assert 'class="pick" value="NOTES.md"' in newer
    older = client.get("/checkpoint?s=agent&n=step-1&against=step-2").text
    assert "NOTES.md" in older and 'class="pick" value="NOTES.md"' not in older
    assert 'class="pick" value="src/app.py"' in older


def test_an_undo_of_an_undo_says_so(client: Any, two_steps: SnapStore) -> None:
    first = two_steps.restore("agent", "step-1").backup
    two_steps.undo("agent")
    page = client.get("/backups?s=agent").text
    assert f"an undo (of {first})" in page
