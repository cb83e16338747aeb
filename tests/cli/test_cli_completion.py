"""Shell completion: the scripts, and names completed from the store through click's machinery."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.shell_completion import BashComplete
from helpers.cli import Cli, cli_env

from snapstore import SnapStore
from snapstore.checkpoint import FileCheckpointStore
from snapstore.cli.app import cli as snapstore_group
from snapstore.frontend.exitcodes import ExitCode


def complete(args: list[str], incomplete: str = "") -> list[str]:
    """What Tab offers after ``snapstore ARGS INCOMPLETE``, through click's completion."""
    completer = BashComplete(snapstore_group, {}, "snapstore", "_SNAPSTORE_COMPLETE")
    return [item.value for item in completer.get_completions(args, incomplete)]


@pytest.fixture
def filled(tmp_path: Path) -> Path:
    """A store with file snapshots in two sessions, a state value and a checkpoint."""
    root = tmp_path / "store"
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "src" / "app.py").write_text("print(1)\n")
    (project / "README.md").write_text("# readme\n")
    store = SnapStore(root, durable=False)
    store.create("editor", "before-edit", ["src", "README.md"], base_dir=project)
    store.create("editor", "before-refactor", ["src"], base_dir=project)
    store.create("agent", "step-1", ["README.md"], base_dir=project)
    store.put_state("editor", "cursor", {"line": 3})
    FileCheckpointStore(store).save("orders-feed", 10)
    return root


@pytest.mark.parametrize(
    ("shell", "marker"),
    [
        ("bash", "complete -o nosort -F _snapstore_completion snapstore"),
        ("zsh", "#compdef snapstore"),
        ("fish", "complete --no-files --command snapstore"),
    ],
)
def test_completion_prints_the_script(cli: Cli, shell: str, marker: str) -> None:
    result = cli.run("completion", shell, root=False)
    assert result.code == 0, result
    assert marker in result.stdout
    assert "_SNAPSTORE_COMPLETE" in result.stdout
    assert not (cli.cwd / ".snapstore").exists()


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_the_bash_script_is_valid_bash(cli: Cli) -> None:
    script = cli.run("completion", "bash", root=False).stdout
    subprocess.run(["bash", "-n"], input=script.encode(), check=True, timeout=30)


def test_completion_of_an_unknown_shell_is_a_usage_error(cli: Cli) -> None:
    assert cli.run("completion", "tcsh", root=False).code == ExitCode.USAGE


def test_sessions_and_names_complete_from_the_root(filled: Path) -> None:
    root = ["--root", str(filled)]
    assert complete([*root, "show"]) == ["agent", "checkpoints", "editor"]
    assert complete([*root, "show"], "ed") == ["editor"]
    assert complete([*root, "show", "editor"]) == ["before-edit", "before-refactor", "cursor"]
    assert complete([*root, "restore", "editor"], "before-") == ["before-edit", "before-refactor"]
    assert complete([*root, "diff", "editor"]) == ["before-edit", "before-refactor"]
    assert complete([*root, "state", "get", "editor"]) == ["cursor"]
    assert complete([*root, "delete-session"], "a") == ["agent"]
    assert complete([*root, "list"]) == ["agent", "checkpoints", "editor"]


def test_paths_and_checkpoint_keys_complete(filled: Path) -> None:
    root = ["--root", str(filled)]
    assert complete([*root, "cat", "editor", "before-edit"]) == ["README.md", "src/app.py"]
    assert complete([*root, "cat", "editor", "before-edit"], "src/") == ["src/app.py"]
    assert complete([*root, "cat", "editor", "before-e"]) == ["README.md", "src/app.py"]
    assert complete([*root, "cat", "editor", "latest"]) == ["src/app.py"]
    assert complete([*root, "cat", "editor", "before"]) == []
    assert complete([*root, "checkpoint", "inspect"]) == ["orders-feed"]
    assert complete([*root, "checkpoint", "reset"], "x") == []


def test_root_after_the_command_and_from_the_environment(
    filled: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert complete(["show", "--root", str(filled)], "ag") == ["agent"]
    monkeypatch.setenv("SNAPSTORE_ROOT", str(filled))
    assert complete(["show", "agent"]) == ["step-1"]


def test_no_candidates_and_nothing_created_without_a_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SNAPSTORE_ROOT", raising=False)
    assert complete(["show"]) == []
    assert not (tmp_path / ".snapstore").exists()
    missing = tmp_path / "missing"
    assert complete(["--root", str(missing), "show"]) == []
    assert not missing.exists()
    not_a_store = tmp_path / "elsewhere"
    not_a_store.mkdir()
    (not_a_store / "notes.txt").write_text("mine\n")
    assert complete(["--root", str(not_a_store), "show"]) == []
    assert sorted(p.name for p in not_a_store.iterdir()) == ["notes.txt"]
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    assert complete(["--root", str(a_file), "show"]) == []


def test_a_damaged_store_offers_nothing_and_does_not_raise(filled: Path) -> None:
    (filled / "FORMAT").write_text("snapstore format 99\n")
    assert complete(["--root", str(filled), "show"]) == []
    (filled / "FORMAT").write_text("snapstore format 1\n")
    for manifest in filled.glob("sessions/*/*.manifest"):
        manifest.chmod(0o644)
        manifest.write_bytes(b"garbage")
    assert complete(["--root", str(filled), "show"]) == []
    assert complete(["--root", str(filled), "cat", "editor", "before-edit"]) == []


def test_completion_through_the_environment_of_a_real_shell(cli: Cli, filled: Path) -> None:
    """What the installed bash script does on Tab: run snapstore with the completion variables."""
    env = {
        "_SNAPSTORE_COMPLETE": "bash_complete",
        "COMP_WORDS": f"snapstore --root {filled} state get editor ",
        "COMP_CWORD": "6",
    }
    result = cli.run(env=env, root=False)
    assert result.code == 0, result
    assert result.stdout.splitlines() == ["plain,cursor"]
    assert result.stderr == ""


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_the_bash_script_completes_in_bash(cli: Cli, filled: Path, tmp_path: Path) -> None:
    """Source the printed script in bash and press Tab (call its completion function)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "snapstore"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m snapstore "$@"\n')
    wrapper.chmod(0o755)
    script = (
        "source <(snapstore completion bash)\n"
        f'COMP_WORDS=(snapstore --root "{filled}" restore editor "")\n'
        "COMP_CWORD=5\n"
        "_snapstore_completion snapstore\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    env = cli_env({"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"})
    done = subprocess.run(
        ["bash", "-c", script], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["before-edit", "before-refactor"]


@pytest.mark.parametrize(
    "args, options",
    [
        (["diff", "s", "n"], {"--patch", "--stat"}),
        (["sweep"], {"--yes"}),
        (["stats"], {"--ttl", "--keep-last"}),
        (["serve"], {"--allow"}),
        (["mcp"], {"--allow"}),
    ],
)
def test_new_options_complete(args: list[str], options: set[str]) -> None:
    assert options <= set(complete(args, "--"))


def test_new_commands_complete() -> None:
    assert {"stats", "sessions"} <= set(complete([], "s"))
