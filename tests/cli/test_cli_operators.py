"""What operators meet: usage errors on one line, and a sweep that would empty a session
needing --yes (the same in ``serve``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers.cli import Cli
from helpers.service import RpcFailed, Server

from snapstore.backend.layout import FORMAT_MAJOR
from snapstore.frontend.words import human_size


@pytest.mark.parametrize(
    "args, words",
    [
        (("create",), "Missing argument 'SESSION'"),
        (("list", "--frob"), "No such option '--frob'"),
        (("frob",), "No such command 'frob'"),
        (("sweep", "--ttl", "7 days"), "7 days"),
    ],
)
def test_a_usage_error_is_one_error_line(cli: Cli, args: tuple[str, ...], words: str) -> None:
    result = cli.run(*args)
    assert result.code == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ") and words in lines[0]
    assert "--help" in lines[0]
    assert result.stdout == ""


def _names(cli: Cli) -> list[str]:
    return sorted(f"{info.session}/{info.name}" for info in cli.store().list())


@pytest.mark.parametrize("option", [("--ttl", "0"), ("--keep-last", "0")])
def test_a_sweep_that_empties_a_session_needs_yes(
    cli: Cli, project: Path, option: tuple[str, str]
) -> None:
    cli.snapshot(project, "README.md", name="one")
    cli.snapshot(project, "README.md", name="two")
    before = _names(cli)
    result = cli.run("sweep", *option)
    assert result.code == 2
    assert "every file checkpoint of session 's1'" in result.stderr
    assert "--yes" in result.stderr and len(result.stderr.splitlines()) == 1
    assert _names(cli) == before
    dry = cli.json("sweep", *option, "--dry-run")
    assert len(dry["deleted"]) == 2 and _names(cli) == before
    cli.fails("sweep", *option, code=2, error_type="UsageError")
    assert cli.json("sweep", *option, "--yes")["deleted"] == [
        {"session": "s1", "name": "one"},
        {"session": "s1", "name": "two"},
    ]
    assert _names(cli) == []


def test_a_sweep_that_keeps_one_checkpoint_per_session_needs_no_yes(
    cli: Cli, project: Path
) -> None:
    cli.snapshot(project, "README.md", name="one")
    cli.snapshot(project, "README.md", name="two")
    assert cli.json("sweep", "--keep-last", "1")["deleted"] == [{"session": "s1", "name": "one"}]
    assert cli.json("sweep")["deleted"] == []


def test_serve_sweep_that_empties_a_session_needs_yes(tmp_path: Path, project: Path) -> None:
    with Server(tmp_path / "store") as server:
        server.call("create", {"session": "s", "paths": ["README.md"], "base_dir": str(project)})
        with pytest.raises(RpcFailed) as failed:
            server.call("sweep", {"ttl": 0})
        assert failed.value.code == 1002
        assert failed.value.data["type"] == "SweepRefusedError"
        assert len(server.call("list")["snapshots"]) == 1
        assert len(server.call("sweep", {"ttl": 0, "yes": True})["deleted"]) == 1


def test_stats_counts_what_each_session_holds_and_what_a_sweep_frees(
    cli: Cli, project: Path
) -> None:
    big = project / "big.bin"
    for round_ in range(3):
        big.write_bytes(os.urandom(200_000))  # incompressible: stored about as large
        cli.snapshot(project, "big.bin", session="s", name=f"v{round_}")
    cli.snapshot(project, "big.bin", session="t", name="shared")  # holds v2's blob too
    cli.store().put_state("etl", "cursor", 7)
    report = cli.json("stats", "--keep-last", "1")
    by_name = {item["session"]: item for item in report["sessions"]}
    s, t = by_name["s"], by_name["t"]
    assert (s["checkpoints"], t["checkpoints"], by_name["etl"]["states"]) == (3, 1, 1)
    assert s["logical_bytes"] == 600_000
    assert 590_000 < s["stored_bytes"] < 700_000
    assert 390_000 < s["unique_bytes"] < 460_000  # v0 and v1; v2's blob is shared with t
    assert t["unique_bytes"] < 5_000
    assert s["sweep_deletes"] == 2 and 390_000 < s["sweep_frees"] < 460_000
    assert s["newest"]["name"] == "v2"
    assert report["format"] == FORMAT_MAJOR and report["blobs"] >= 3
    assert report["disk_bytes"] >= report["stored_bytes"] > 590_000
    assert report["sweep_deletes"] == 2
    only = cli.json("stats", "s")
    assert [item["session"] for item in only["sessions"]] == ["s"]
    assert cli.json("stats", "etl")["sessions"][0]["states"] == 1
    missing = cli.run("stats", "nosuch")
    assert missing.code == 14, missing.stderr
    assert "no snapshots in session 'nosuch'" in missing.stderr and "SESSION" not in missing.stdout
    text = cli.ok("stats").stdout
    assert f"store: format {FORMAT_MAJOR}" in text and "SESSION" in text
    before = sorted(info.name for info in cli.store().list())
    cli.ok("sweep", "--keep-last", "1")
    gc = cli.json("gc")
    assert abs(gc["bytes_freed"] - report["sweep_frees"]) < 50_000
    assert sorted(info.name for info in cli.store().list()) != before


def test_sessions_lists_counts_and_the_newest_checkpoint(cli: Cli, project: Path) -> None:
    cli.snapshot(project, "README.md", session="a", name="one")
    cli.snapshot(project, "README.md", session="a", name="two")
    cli.store().put_state("b", "cursor", 1)
    document = cli.json("sessions")
    assert [
        (item["session"], item["checkpoints"], item["states"]) for item in document["sessions"]
    ] == [("a", 2, 0), ("b", 0, 1)]
    assert document["sessions"][0]["newest"]["name"] == "two"
    assert document["sessions"][1]["newest"] is None
    lines = cli.ok("sessions").stdout.splitlines()
    assert lines[0].split()[:4] == ["SESSION", "CHECKPOINTS", "STATES", "BACKUPS"]
    assert lines[1].split()[:5] == ["a", "2", "0", "0", "two"]


def test_list_shows_the_stored_size_next_to_the_logical_size(cli: Cli, project: Path) -> None:
    (project / "big.bin").write_bytes(os.urandom(100_000))
    (project / "zeros.bin").write_bytes(bytes(1_000_000))
    cli.snapshot(project, "big.bin", session="s", name="random")
    cli.snapshot(project, "zeros.bin", session="s", name="zeros")
    cli.snapshot(project, "big.bin", "zeros.bin", session="s", name="again")
    cli.store().put_state("s", "cursor", 1)
    listed = {item["name"]: item for item in cli.json("list")["snapshots"]}
    assert 99_000 < listed["random"]["stored_bytes"] < 110_000
    assert listed["zeros"]["stored_bytes"] < 20_000 < listed["zeros"]["total_bytes"]
    assert listed["again"]["stored_bytes"] < 1_000  # only its root tree is new
    assert listed["cursor"]["stored_bytes"] is None
    lines = cli.ok("list").stdout.splitlines()
    header = lines[0].split()
    assert header.index("STORED") == header.index("SIZE") + 1
    rows = {line.split()[1]: line for line in lines[1:]}
    random_size = f"{human_size(100_000)}  {human_size(listed['random']['stored_bytes'])}"
    assert random_size in rows["random"]
    assert rows["cursor"].split()[3:7] == ["-", "0", "B", "-"]


def test_list_reads_no_tree(cli: Cli, project: Path) -> None:
    """The stored sizes come from the manifest headers: with every pack (and so every tree)
    gone, list still shows them."""
    (project / "big.bin").write_bytes(os.urandom(100_000))
    cli.snapshot(project, "big.bin", session="s", name="random")
    expected = cli.json("list")["snapshots"]
    for pack in (cli.root / "packs").iterdir():
        pack.unlink()
    assert cli.json("list")["snapshots"] == expected
    assert 99_000 < expected[0]["stored_bytes"] < 110_000
