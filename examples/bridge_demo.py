"""Two editor bridges sharing one snapstore, with the library alone.

Bridge A (a child process) checkpoints the files it is about to change, edits them and is
killed with SIGKILL half-way through an edit. Bridge B (another child process) lists the
session's checkpoints, shows what changed and restores the latest one. The parent then checks
the project is byte-for-byte what it was and that the store verifies.

    python examples/bridge_demo.py
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from snapstore import SnapStore

SESSION = "editor-session"
FILES = {
    "README.md": b"# demo\n",
    "src/app.py": b"print('hello')\n",
    "src/util.py": b"def helper():\n    return 42\n",
    "config.json": b'{"debug": false}\n',
}
TOUCHED = ["src", "config.json", "NOTES.md"]


def bridge_a(root: str, project: Path) -> None:
    """Checkpoint, then edit: modify, delete, add, and hang half-way through a rewrite."""
    store = SnapStore(root)
    store.create(SESSION, "before-edit", TOUCHED, base_dir=project, meta={"bridge": "A"})
    (project / "src/app.py").write_bytes(b"print('edited')\n")
    (project / "config.json").unlink()
    (project / "NOTES.md").write_bytes(b"new file\n")
    with (project / "src/util.py").open("wb") as half_written:
        half_written.write(b"def helper(:\n")
        half_written.flush()
        print("mid-edit", flush=True)
        time.sleep(60)


def bridge_b(root: str) -> None:
    """Find the latest checkpoint of the session, show the damage, and restore it."""
    store = SnapStore(root)
    latest = store.list(SESSION)[-1]
    diff = store.diff(SESSION, latest.name)
    print(f"B: {latest.name}: since then added {diff.added}, modified {diff.modified}, ", end="")
    print(f"removed {diff.removed}")
    report = store.restore(SESSION, latest.name)
    print(f"B: restored, wrote {report.written}, removed {report.removed}")


def main() -> int:
    """Run both bridges as separate processes and check the outcome."""
    work = Path(tempfile.mkdtemp(prefix="bridge-demo-"))
    root, project = str(work / "store"), work / "project"
    for relative, content in FILES.items():
        (project / relative).parent.mkdir(parents=True, exist_ok=True)
        (project / relative).write_bytes(content)
    me = [sys.executable, __file__]
    with subprocess.Popen([*me, "a", root, str(project)], stdout=subprocess.PIPE) as a:
        assert a.stdout is not None
        a.stdout.readline()
        a.kill()
    print("A: killed mid-edit")
    subprocess.run([*me, "b", root], check=True)
    files = [path for path in project.rglob("*") if path.is_file()]
    same = {path.relative_to(project).as_posix(): path.read_bytes() for path in files} == FILES
    verified = SnapStore(root).verify(deep=True).ok
    print(f"project restored byte-for-byte: {same}; store verifies: {verified}")
    shutil.rmtree(work)
    return 0 if same and verified else 1


if __name__ == "__main__":
    if sys.argv[1:2] == ["a"]:
        bridge_a(sys.argv[2], Path(sys.argv[3]))
    elif sys.argv[1:2] == ["b"]:
        bridge_b(sys.argv[2])
    else:
        sys.exit(main())
