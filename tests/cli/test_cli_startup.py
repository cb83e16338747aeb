"""Start-up: ``--version`` and ``--help`` import neither the library nor what it depends on,
commands are imported when used, and ``import snapstore`` is lazy but complete."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from helpers.cli import REPO, Cli, cli_env

import snapstore
import snapstore.patch
from snapstore.cli.app import COMMANDS
from snapstore.cli.app import cli as snapstore_group
from snapstore.cli.lazy import CommandSpec

LIBRARY_MODULES = {"snapstore.store", "blake3", "msgpack"}
NOT_FOR_A_CREATE = {
    "portalocker",
    "importlib.metadata",
    "snapstore.compare",
    "difflib",
    "subprocess",
    "pyfastcdc",
    "snapstore.restore.job",
    "snapstore.restore.recovery",
    "snapstore.restore.apply",
    "json",
    "snapstore.backend.s3.client",
    "pathlib",
    "click.shell_completion",
    "snapstore.frontend.shapes",
    "snapstore.cli.snapshots",
    "snapstore.restore.dirhandles",
    "snapstore.maintenance.sweep",
    "snapstore.patch",
}
"""What a create never needs: locks are taken with ``fcntl`` itself (portalocker, whose import
reads package metadata, is for systems without it); the S3 client is for ``s3://`` roots
only (whether a root is one is answered by ``snapstore.backend.s3.url``); diffs, password
commands and the cutting of files of 1 MiB or more import what they need when they run, and
so do the restore code (a create needs only the guard's locks unless its base has a killed
restore to recover) and ``json`` (only ``--json`` output and JSON values given as arguments).
``difflib`` builds click's suggestions for a mistyped long option, never for ``-q``
(``snapstore.cli.parsing``); the command line keeps paths as strings (no ``pathlib``); shell
completion imports click's completion machinery when it runs; the JSON shapes of the output
are for ``--json``, and the commands that inspect snapshots live apart from ``create``. A
create takes the target guard's locks, not a restore's directory handles, and does not sweep."""


def run_python(cli: Cli, *args: str) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` in the test's directory, with this checkout importable."""
    return subprocess.run(
        [sys.executable, *args],
        cwd=cli.cwd,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def imported_modules(cli: Cli, *args: str) -> tuple[set[str], subprocess.CompletedProcess[str]]:
    """Every module ``python -X importtime -m snapstore ARGS`` imported, from its report."""
    completed = run_python(cli, "-X", "importtime", "-m", "snapstore", *args)
    modules = {
        line.rsplit("|", 1)[1].strip()
        for line in completed.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    return modules, completed


def test_version_imports_neither_the_library_nor_click(cli: Cli) -> None:
    modules, completed = imported_modules(cli, "--version")
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == f"snapstore, version {snapstore.__version__}\n"
    assert "snapstore.cli" in modules
    assert not modules & (LIBRARY_MODULES | NOT_FOR_A_CREATE | {"click", "snapstore.models"})


def test_help_imports_no_command_and_not_the_library(cli: Cli) -> None:
    modules, completed = imported_modules(cli, "--help")
    assert completed.returncode == 0, completed.stderr
    assert "click" in modules and "  create " in completed.stdout
    assert not modules & (
        LIBRARY_MODULES | {"snapstore.checkpoint", "snapstore.cli.snapshots", "logging"}
    )


@pytest.mark.parametrize(
    "quiet",
    [(), ("-q",), ("-q", "-v")],
    ids=["plain", "quiet", "quiet-and-verbose"],
)
@pytest.mark.parametrize("before", [True, False], ids=["global-first", "after-the-command"])
def test_a_command_that_opens_the_store_imports_the_library(
    cli: Cli, project: Path, quiet: tuple[str, ...], before: bool
) -> None:
    create = ["create", "s1", "README.md", "--base", str(project)]
    args = [*quiet, *create] if before else [*create, *quiet]
    modules, completed = imported_modules(cli, "--root", str(cli.root), *args)
    assert completed.returncode == 0, completed.stderr
    assert modules >= LIBRARY_MODULES
    assert not modules & NOT_FOR_A_CREATE


def test_a_restore_imports_no_diff_code(cli: Cli, project: Path) -> None:
    cli.ok("create", "s1", "README.md", "--base", str(project), "--name", "a")
    target = cli.cwd / "restored"
    restore = ["-q", "restore", "s1", "a", "--target", str(target)]
    modules, completed = imported_modules(cli, "--root", str(cli.root), *restore)
    assert completed.returncode == 0, completed.stderr
    assert (target / "README.md").read_bytes() == (project / "README.md").read_bytes()
    assert "snapstore.restore.writer" in modules
    assert not modules & {"snapstore.patch", "snapstore.compare", "difflib"}


def test_create_with_json_output_builds_its_document(cli: Cli, project: Path) -> None:
    create = ["--json", "create", "s1", "README.md", "--base", str(project), "--name", "a"]
    modules, completed = imported_modules(cli, "--root", str(cli.root), *create)
    assert completed.returncode == 0, completed.stderr
    assert "snapstore.frontend.shapes" in modules
    document = json.loads(completed.stdout)
    assert document["snapshot"]["name"] == "a" and document["replaced"] is False


def test_version_without_click_says_what_click_says(cli: Cli) -> None:
    fast = cli.run("--version", root=False)
    through_click = cli.run("-q", "--version", root=False)
    assert fast.code == through_click.code == 0
    assert fast.stdout == through_click.stdout == f"snapstore, version {snapstore.__version__}\n"


@pytest.mark.parametrize("spec", COMMANDS, ids=[spec.name for spec in COMMANDS])
def test_each_command_loads_under_its_name_with_its_summary(spec: CommandSpec) -> None:
    command = spec.load()
    assert command.name == spec.name
    assert command.hidden == spec.hidden
    if not spec.hidden:
        assert command.get_short_help_str(limit=1000) == spec.summary


def test_help_is_the_same_before_and_after_the_commands_are_imported(cli: Cli) -> None:
    before = cli.run("--help", env={"COLUMNS": "80"}).stdout
    context = click.Context(snapstore_group)
    for name in snapstore_group.list_commands(context):
        assert snapstore_group.get_command(context, name) is not None, name
    after = CliRunner().invoke(  # click formats 80 columns as 78 wide
        snapstore_group, ["--help"], prog_name="snapstore", terminal_width=78
    )
    assert after.exit_code == 0, after.output
    assert after.output == before
    assert all(f"  {spec.name} " in before for spec in COMMANDS if not spec.hidden)
    assert "_demo" not in before


def test_import_snapstore_is_lazy_and_every_public_name_imports() -> None:
    code = (
        "import sys, snapstore\n"
        "assert 'snapstore.store' not in sys.modules and 'snapstore.models' not in sys.modules\n"
        "from snapstore import SnapStore, SnapshotInfo, PathNotInSnapshotError\n"
        "import snapstore.store\n"
        "assert SnapStore is snapstore.store.SnapStore\n"
        "for name in snapstore.__all__:\n"
        "    assert getattr(snapstore, name) is not None, name\n"
        "    assert name in dir(snapstore), name\n"
        "try:\n"
        "    snapstore.NoSuchName\n"
        "except AttributeError:\n"
        "    pass\n"
        "else:\n"
        "    raise AssertionError('NoSuchName resolved')\n"
    )
    subprocess.run([sys.executable, "-c", code], env=cli_env(), check=True, cwd=REPO)


def test_the_facades_patch_defaults_are_the_patch_modules() -> None:
    """``SnapStore.patch`` writes its defaults out (importing ``snapstore.patch`` for them
    would load the diff code into every process that opens a store)."""
    parameters = inspect.signature(snapstore.SnapStore.patch).parameters
    assert parameters["context"].default == snapstore.patch.DEFAULT_CONTEXT
    assert parameters["max_bytes"].default == snapstore.patch.DEFAULT_MAX_BYTES
    assert parameters["max_file_bytes"].default == snapstore.patch.DEFAULT_MAX_FILE_BYTES


def test_startup_benchmark_runs(tmp_path: Path) -> None:
    completed = subprocess.run(
        [sys.executable, str(REPO / "bench" / "startup.py"), "--runs", "1"],
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert "snapstore --version" in completed.stdout and "x" in completed.stdout
    assert "snapstore create (one file, new store)" in completed.stdout


DATACLASSES_BUILT = """
import dataclasses, os, sys
built = []
build = dataclasses._process_class
def recording(cls, *args, **kwargs):
    built.append(f"{cls.__module__}.{cls.__qualname__}")
    return build(cls, *args, **kwargs)
dataclasses._process_class = recording
import snapstore.cli.app as app
def finish(code):
    print(" ".join(built))
    sys.stdout.flush()
    os._exit(code)
app.finish_process = finish
app.main(sys.argv[1:])
"""
ALLOWED_DATACLASSES = {
    "snapstore.repo.commits.Draft",
    "snapstore.backend.secret.Secret",
    "snapstore.format.segments.Segment",
}
"""The dataclasses of the library's internals a create of the command line builds at start-up,
besides the public API's (``snapstore.models``, ``snapstore.patch``): each takes about 0.5-1 ms
to build, a named tuple a seventh of that. These stay dataclasses: a ``Draft``'s ``meta``
defaults to a new dict, a ``Secret`` leaves its password out of its repr, and a ``Segment``
has a field named ``index`` (a tuple's method)."""


def test_a_create_builds_only_the_listed_dataclasses_at_start_up(cli: Cli, project: Path) -> None:
    args = ["--root", str(cli.root), "-q", "create", "s1", ".", "--base", str(project)]
    completed = run_python(cli, "-c", DATACLASSES_BUILT, *args)
    assert completed.returncode == 0, completed.stderr
    built = set(completed.stdout.splitlines()[-1].split())
    assert "snapstore.models.SnapshotInfo" in built  # the recording saw the library's
    public = ("snapstore.models.", "snapstore.patch.")
    internal = {name for name in built if not name.startswith(public)}
    assert internal <= ALLOWED_DATACLASSES
