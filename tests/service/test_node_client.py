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
