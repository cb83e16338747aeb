"""The history replay runs end to end on a tiny synthetic repository, verifies its restores
and writes every result key; its verification notices a wrong tree. No timing is asserted:
this only keeps ``bench/history.py`` from rotting."""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git on PATH")


def _git(repo: Path, *args: str) -> str:
    env = dict(os.environ, GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull)
    env.update(GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.invalid")
    env.update(GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.invalid")
    done = subprocess.run(
        ["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout


def _write(repo: Path, relative: str, text: str, *, executable: bool = False) -> None:
    path = repo / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755 if executable else 0o644)


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four commits: adds, changes, deletions, a subdirectory emptied, an executable file, a
    symlink, a committed file its own ``.gitignore`` ignores, and one ``git archive`` would
    leave out (``export-ignore``) were its attributes not neutralized."""
    repo = tmp_path_factory.mktemp("history")
    _git(repo, "init", "-q")
    _write(repo, "README.md", "# tiny\n")
    _write(repo, "src/app.py", "print('one')\n")
    _write(repo, "run.sh", "#!/bin/sh\necho run\n", executable=True)
    _write(repo, ".gitignore", "*.log\n")
    _write(repo, "build.log", "kept although ignored\n")
    _write(repo, ".gitattributes", "notes.txt export-ignore\n*.txt text eol=crlf\n")
    _write(repo, "notes.txt", "left out of archives by default\n")
    _git(repo, "add", "-A", "-f")
    _git(repo, "commit", "-q", "-m", "one")
    _write(repo, "src/app.py", "print('two')\n")
    _write(repo, "src/lib/util.py", "VALUE = 2\n")
    (repo / "README.md").unlink()
    _git(repo, "add", "-A", "-f")
    _git(repo, "commit", "-q", "-m", "two")
    shutil.rmtree(repo / "src" / "lib")
    (repo / "run.sh").chmod(0o644)
    (repo / "link").symlink_to("src/app.py")
    _git(repo, "add", "-A", "-f")
    _git(repo, "commit", "-q", "-m", "three")
    _write(repo, "build.log", "changed\n")
    _write(repo, "tools/make.sh", "#!/bin/sh\nexit 0\n", executable=True)
    _git(repo, "add", "-A", "-f")
    _git(repo, "commit", "-q", "-m", "four")
    return repo


def test_history_replay_writes_every_key_and_verifies_restores(
    history: Path, tmp_path: Path
) -> None:
    out = tmp_path / "result.json"
    command = [sys.executable, str(BENCH / "history.py"), "--repo", str(history), "--states", "4"]
    command += ["--tools", "snapstore,git", "--restores", "4", "--json", str(out)]
    command += ["--work", str(tmp_path / "work")]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr + done.stdout
    assert "restores verified" in done.stdout
    result = json.loads(out.read_text())
    assert set(result) >= {"meta", "tools", "targets", "table_markdown"}
    assert result["meta"]["states"] == 4
    assert result["meta"]["files_last"] == 8
    assert set(result["tools"]) == {"snapstore", "git"}
    for found in result["tools"].values():
        assert len(found["samples"]) == 4
        assert set(found["later"]) == {"median", "p90", "total"}
        assert found["size_after_run"]["disk"] > 0
        assert all({"step", "seconds", "disk", "apparent"} <= set(s) for s in found["maintenance"])
        assert [r["state"] for r in found["restores"]] == [1, 2, 3, 4]
        assert all(r["verified"] and not r["problems"] for r in found["restores"])
        assert found["verified"] == 4
        if shutil.which("strace") is None:
            assert found["sync_calls"] == "not measured (strace not installed)"
        else:
            calls = found["sync_calls"]
            assert isinstance(calls, dict), calls
            assert set(calls) == {"fsync", "fdatasync", "syncfs", "sync_file_range"}
            assert all(isinstance(count, int) and count >= 0 for count in calls.values())
    if shutil.which("strace") is not None:
        flushes = result["tools"]["snapstore"]["sync_calls"]
        assert flushes["fsync"] + flushes["fdatasync"] > 0  # a durable snapshot flushes
    assert [t["number"] for t in result["targets"]] == ["H1", "H2", "H3", "H4", "H5"]
    restores = [sys.executable, str(BENCH / "restores.py"), "--work", str(tmp_path / "work")]
    restores += ["--rounds", "1", "--states", "3", "--json", str(tmp_path / "restores.json")]
    done = subprocess.run(restores, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr + done.stdout
    assert "git archive | tar x:" in done.stdout
    samples = json.loads((tmp_path / "restores.json").read_text())
    assert len(samples["snapstore"]["first"]) == 1 and len(samples["snapstore"]["later"]) == 2
    assert len(samples["git"]) == 2


@pytest.fixture
def replay_module() -> ModuleType:
    sys.path.insert(0, str(BENCH))
    try:
        return importlib.import_module("replay")
    finally:
        sys.path.remove(str(BENCH))


def test_verification_notices_a_wrong_tree(
    history: Path, tmp_path: Path, replay_module: ModuleType
) -> None:
    commits = replay_module.first_parent_commits(history, None, None)
    replay = replay_module.Replay(history, tmp_path, tmp_path / "tree")
    for commit in commits:
        replay.materialize(commit)
    assert replay.verify(commits[-1], replay.tree).ok
    copy = tmp_path / "copy"
    shutil.copytree(replay.tree, copy, symlinks=True)
    (copy / "build.log").write_text("changed!\n")
    (copy / "notes.txt").unlink()
    (copy / "tools" / "make.sh").chmod(0o644)
    (copy / "extra").write_text("")
    problems = replay.verify(commits[-1], copy).problems
    assert problems == [
        "missing notes.txt",
        "unexpected extra",
        "build.log: content differs",
        "tools/make.sh: executable bit False instead of True",
    ]
    assert not replay.verify(commits[1], replay.tree).ok
