"""The full consistency check every crash, power-loss and fault test runs on what is left.

A store passes when a fresh ``SnapStore`` lists every snapshot without a warning, ``verify``
(deep: every referenced blob re-hashed) reports no damage, every (session, name) holds the
complete snapshot it held before the operation or the complete one the operation makes, a
restore target holds exactly its old state or its new state once the store has been opened
again (opening it finishes or rolls back a restore that was killed), with no temp file and no
journal left, and the next ``gc`` leaves no temp file, no unreferenced blob and no empty
snapshot directory.
"""

from __future__ import annotations

import json
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helpers.trees import Tree, read_tree
from snapstore import SnapStore
from snapstore.fs.tempnames import is_target_marker
from snapstore.internals import journals

Key = tuple[str, str]
Fingerprint = tuple[Any, ...]


class InconsistentStore(AssertionError):
    """The consistency check failed; the message says what and where."""


def fingerprints(root: Path) -> dict[Key, Fingerprint]:
    """Every committed snapshot of the store at ``root`` as a comparable value (content by
    digest and mode; timestamps and base directories left out)."""
    if not (root / "FORMAT").is_file():
        return {}
    store = SnapStore(root, durable=False)
    found: dict[Key, Fingerprint] = {}
    for info in store.list():
        key = (info.session, info.name)
        meta = json.dumps(info.meta, sort_keys=True, default=repr)
        if info.kind == "state":
            value = store.get_state(info.session, info.name)
            found[key] = ("state", json.dumps(value, sort_keys=True, default=repr))
            continue
        snapshot = store.get(info.session, info.name)
        entries = tuple(
            (e.path, e.kind, e.mode, e.size, e.digest, e.target) for e in snapshot.entries
        )
        found[key] = ("files", info.file_count, info.total_bytes, meta, info.roots, entries)
    return found


@dataclass
class Expectation:
    """What the store (and a restore target) held before the operation and what a clean run
    of it leaves."""

    old: dict[Key, Fingerprint]
    new: dict[Key, Fingerprint]
    old_target: Tree | None = None
    new_target: Tree | None = None
    restore_session: str | None = None
    target_existed: bool = True


@dataclass
class CheckResult:
    """What a passing check saw (for the figures in docs/reliability.md)."""

    snapshots: int = 0
    mixed_target: bool = False
    temp_files_in_tmp: int = 0
    target_temp_files: list[str] = field(default_factory=list)


def _without_dir_modes(tree: Tree) -> Tree:
    return {path: node[:1] if node[0] == "dir" else node for path, node in tree.items()}


def _empty_snapshot_dirs(sessions: Path) -> list[str]:
    empty = []
    for directory, dirs, files in os.walk(sessions):
        if directory != str(sessions) and not dirs and not files:
            empty.append(directory)
    return empty


def check_consistent(
    scenario_dir: Path,
    expect: Expectation,
    *,
    dir_modes: bool = True,
    completed: bool = False,
    target: str = "target",
) -> CheckResult:
    """Run the full check on ``scenario_dir`` (``root`` and ``target`` inside it); raises
    InconsistentStore with the reason on the first failure. ``completed``: the operation
    returned, so only its new state is acceptable (it must have been made durable)."""
    root = scenario_dir / "root"
    result = CheckResult()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        store = SnapStore(root, durable=False)
        result.temp_files_in_tmp = len(os.listdir(root / "tmp"))
        report = store.verify(deep=True)
        if not report.ok:
            raise InconsistentStore(f"verify found damage: {report.problems}")
        found = fingerprints(root)
    result.snapshots = len(found)
    for key in sorted(set(found) | set(expect.old) | set(expect.new)):
        actual = found.get(key)
        allowed = [expect.new.get(key)] if completed else [expect.old.get(key), expect.new.get(key)]
        if actual not in allowed:
            state = "missing" if actual is None else "unexpected contents"
            if expect.old.get(key) is None and expect.new.get(key) is None:
                state = "resurrected or unknown"
            raise InconsistentStore(f"snapshot {key}: {state} (not the old nor the new one)")
    gc = store.gc()
    if gc.skipped:
        raise InconsistentStore(f"gc was skipped: {gc.reason}")
    leftovers = os.listdir(root / "tmp")
    if leftovers:
        raise InconsistentStore(f"gc left temp files: {leftovers}")
    after = store.verify()
    if not after.ok or after.garbage:
        raise InconsistentStore(f"after gc: problems {after.problems}, garbage {after.garbage}")
    empty = _empty_snapshot_dirs(root / "sessions")
    if empty:
        raise InconsistentStore(f"gc left empty snapshot directories: {empty}")
    if fingerprints(root) != found:
        raise InconsistentStore("gc changed the committed snapshots")
    if expect.new_target is not None:
        assert expect.old_target is not None
        _check_target(store, scenario_dir / target, expect, dir_modes, completed, result)
    return result


def _check_target(
    store: SnapStore,
    target: Path,
    expect: Expectation,
    dir_modes: bool,
    completed: bool,
    result: CheckResult,
) -> None:
    """Exactly old or new: the reopened store has finished or rolled back a killed restore
    (a restore that returned holds the new state; one killed may be either)."""
    assert expect.old_target is not None and expect.new_target is not None
    normalize = (lambda tree: tree) if dir_modes else _without_dir_modes
    old, new = normalize(expect.old_target), normalize(expect.new_target)
    everything = read_tree(target, with_temps=True)
    plain = read_tree(target)
    # A restore's target marker may stay at the root of the target it made (killed before
    # its journal was written, or after it was removed): nothing records or reads it.
    result.target_temp_files = [
        path for path in everything if path not in plain and not is_target_marker(path)
    ]
    if result.target_temp_files:
        raise InconsistentStore(f"temp files left in the target: {result.target_temp_files}")
    if journals(store).pending():
        raise InconsistentStore("a restore journal is left after reopening the store")
    actual = normalize(plain)
    if actual == new:
        return
    if completed:
        raise InconsistentStore("the restore returned but the target is not fully restored")
    if actual != old:
        result.mixed_target = True
        differing = sorted(p for p in set(old) | set(actual) if old.get(p) != actual.get(p))
        raise InconsistentStore(
            f"the restore target is neither its old nor its new state after reopening: "
            f"{differing[:5]}"
        )
