"""The Node client in examples/node drives ``snapstore serve`` through the bridge flow."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from helpers.service import REPO, service_env, snapstore_command

NODE = shutil.which("node")


@pytest.mark.skipif(NODE is None, reason="node is not on the PATH")
def test_the_node_bridge_demo_passes_every_check():
    command = snapstore_command()
    if len(command) != 1:
        pytest.skip("the node client needs a snapstore executable beside the interpreter")
    assert NODE is not None
    done = subprocess.run(
        [NODE, str(REPO / "examples/node/bridge-demo.mjs")],
        capture_output=True,
        env=service_env({"SNAPSTORE": command[0]}),
        timeout=120,
    )
    output = done.stdout.decode()
    assert done.returncode == 0, output + done.stderr.decode()
    assert "FAIL" not in output
    for check in ("restored byte for byte", "undo puts the edits back", "store verifies"):
        assert f"ok   {check}" in output


@pytest.mark.skipif(NODE is None, reason="node is not on the PATH")
def test_the_node_demo_finds_the_checkout_s_snapstore_without_path_or_env(tmp_path):
    if not (REPO / ".venv/bin/snapstore").exists():
        pytest.skip("this checkout has no .venv/bin/snapstore")
    assert NODE is not None
    env = {"PATH": "/nonexistent", "HOME": str(tmp_path), "TMPDIR": str(tmp_path)}
    done = subprocess.run(
        [NODE, str(REPO / "examples/node/bridge-demo.mjs")],
        capture_output=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout.decode() + done.stderr.decode()
    assert list(tmp_path.iterdir()) == []  # its temp directory is gone


@pytest.mark.skipif(NODE is None, reason="node is not on the PATH")
@pytest.mark.parametrize("where", ["missing", "unrunnable"])
def test_the_node_demo_says_why_it_cannot_run_snapstore_and_cleans_up(tmp_path, where):
    assert NODE is not None
    copy = tmp_path / "node"
    shutil.copytree(REPO / "examples/node", copy)  # away from any .venv
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {"PATH": "/nonexistent", "HOME": str(tmp_path), "TMPDIR": str(scratch)}
    if where == "unrunnable":
        env["SNAPSTORE"] = str(tmp_path / "no-such-snapstore")
    done = subprocess.run(
        [NODE, str(copy / "bridge-demo.mjs")], capture_output=True, env=env, timeout=60
    )
    assert done.returncode == 1
    message = done.stderr.decode()
    assert message.startswith("bridge-demo: ")
    assert ("snapstore not found" if where == "missing" else "ENOENT") in message
    assert list(scratch.iterdir()) == []
