"""Replay a git repository's history through snapstore, shadow git, restic and borg.

    .venv/bin/python bench/history.py --repo /tmp/flask-history --states 100
    .venv/bin/python bench/history.py --repo PATH --range v1.0..v2.0 --json result.json

Each commit of the range (first-parent order, oldest first) is materialized in place in one
work directory, as an agent's edits would leave it: changed files rewritten, removed files
deleted, the rest untouched. After each state every tool snapshots the whole directory into
its own repository, in an order that rotates from state to state so machine noise hits all
alike, with ``sync()`` before each timed snapshot. Then: store sizes, the tools' own
maintenance and the sizes after it, restores of a few states spread over the range into
empty directories, each verified against ``git archive`` of its commit (a mismatch fails the
run), and the sync calls of one more snapshot. Restic and borg are compared where installed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import history_report
import history_tools
from history_tools import HistoryTool
from replay import Replay, disk_usage, first_parent_commits, spread
from run import target_lines


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repo", type=Path, required=True, help="any git repository")
    parser.add_argument("--range", dest="revisions", help="commit range, e.g. HEAD~100..HEAD")
    parser.add_argument("--states", type=int, help="only the last N first-parent commits")
    parser.add_argument("--restores", type=int, default=5, help="states restored and verified")
    parser.add_argument("--tools", help="comma-separated: snapstore,snapstore-cli,git,restic,borg")
    parser.add_argument("--work", type=Path, help="work directory (default: a fresh temp dir)")
    parser.add_argument("--json", dest="json_path", type=Path, help="write the full result here")
    args = parser.parse_args(argv)
    if args.states is not None and args.states < 2:
        parser.error("--states must be at least 2")
    return args


def choose_tools(names: str | None) -> tuple[list[HistoryTool], list[str]]:
    """The tools asked for that can run here, and the names of those that cannot."""
    every = history_tools.history_tools()
    wanted = set(names.split(",")) if names else {tool.name for tool in every}
    unknown = wanted - {tool.name for tool in every}
    if unknown:
        raise SystemExit(f"unknown tools: {', '.join(sorted(unknown))}")
    chosen = [tool for tool in every if tool.name in wanted]
    return [t for t in chosen if t.available()], [t.name for t in chosen if not t.available()]


def rotated(tools: list[HistoryTool], step: int) -> list[HistoryTool]:
    """``tools`` starting at a different one for each ``step``."""
    shift = step % len(tools)
    return tools[shift:] + tools[:shift]


def replay_states(
    tools: list[HistoryTool], replay: Replay, commits: list[str], work: Path
) -> tuple[dict[str, list[float]], list[tuple[int, int]]]:
    """Materialize every commit and let each tool snapshot it; returns each tool's seconds
    per state and the (files, bytes) of each state."""
    seconds: dict[str, list[float]] = {tool.name: [] for tool in tools}
    trees = []
    for index, commit in enumerate(commits):
        replay.materialize(commit)
        trees.append(replay.stats())
        for tool in rotated(tools, index):
            os.sync()
            if index == 0:
                taken = tool.first(replay.tree, work / "repos" / tool.name)
            else:
                taken = tool.again()
            seconds[tool.name].append(taken)
        if (index + 1) % max(1, len(commits) // 10) == 0 or index + 1 == len(commits):
            print(f"state {index + 1}/{len(commits)} {commit[:12]}", file=sys.stderr)
    return seconds, trees


def sizes(tool: HistoryTool) -> dict[str, int]:
    """Apparent and allocated bytes of the tool's repository."""
    apparent, disk = disk_usage(tool.repo_paths())
    return {"apparent": apparent, "disk": disk}


def maintain(tool: HistoryTool) -> list[dict[str, Any]]:
    """Run each maintenance step of ``tool``; its time and the store's size after it."""
    steps = []
    for label, action in tool.maintenance():
        os.sync()
        steps.append({"step": label, "seconds": action(), **sizes(tool)})
    return steps


def restore_states(
    tools: list[HistoryTool], replay: Replay, commits: list[str], chosen: list[int], work: Path
) -> dict[str, list[dict[str, Any]]]:
    """Restore each chosen state with every tool into a new directory, verified against
    ``git archive`` of its commit."""
    found: dict[str, list[dict[str, Any]]] = {tool.name: [] for tool in tools}
    for step, index in enumerate(chosen):
        for tool in rotated(tools, step):
            dest = work / "restored" / f"{tool.name}-{index + 1}"
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.sync()
            taken = tool.restore_state(f"s{index + 1}", dest)
            verdict = replay.verify(commits[index], dest)
            shutil.rmtree(dest)
            found[tool.name].append(
                {
                    "state": index + 1,
                    "commit": commits[index],
                    "seconds": taken,
                    "verified": verdict.ok,
                    "problems": verdict.problems,
                    "empty_dirs_missing": verdict.empty_dirs_missing,
                    "empty_dirs_unexpected": verdict.empty_dirs_unexpected,
                }
            )
    return found


def version(argv: list[str]) -> str | None:
    """The first line ``argv`` prints, or None if the program is not installed."""
    if shutil.which(argv[0]) is None:
        return None
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    return (done.stdout or done.stderr).strip().splitlines()[0]


def meta(
    args: Any, commits: list[str], trees: list[tuple[int, int]], missing: list[str]
) -> dict[str, Any]:
    """What was replayed, on what, with which tool versions."""
    return {
        "repo": str(args.repo.resolve()),
        "range": args.revisions,
        "states": len(commits),
        "first_commit": commits[0],
        "last_commit": commits[-1],
        "files_first": trees[0][0],
        "files_last": trees[-1][0],
        "bytes_first": trees[0][1],
        "bytes_last": trees[-1][1],
        "bytes_all_states": sum(size for _, size in trees),
        "restores": args.restores,
        "sync_count_state": len(commits) - 1,
        "not_installed": missing,
        "versions": {
            argv[0]: version(argv)
            for argv in (
                ["git", "--version"],
                ["restic", "version"],
                ["borg", "--version"],
                ["strace", "-V"],
            )
        },
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def measure(
    tools: list[HistoryTool], replay: Replay, commits: list[str], work: Path, restores: int
) -> tuple[dict[str, dict[str, Any]], list[tuple[int, int]]]:
    """Everything measured for each tool, and the (files, bytes) of each state."""
    seconds, trees = replay_states(tools, replay, commits, work)
    results: dict[str, dict[str, Any]] = {}
    for tool in tools:
        results[tool.name] = {
            "first": seconds[tool.name][0],
            "later": history_report.summary(seconds[tool.name][1:]),
            "samples": seconds[tool.name],
            "size_after_run": sizes(tool),
            "maintenance": maintain(tool),
        }
    restored = restore_states(tools, replay, commits, spread(len(commits), restores), work)
    replay.materialize(commits[-2])
    for tool in tools:
        found = results[tool.name]
        found["restores"] = restored[tool.name]
        times = [r["seconds"] for r in found["restores"]]
        found["restore"] = statistics.median(times) if times else None
        found["verified"] = sum(r["verified"] for r in found["restores"])
        found["sync_calls"] = history_tools.count_sync_calls(tool.command("sync"))
    return results, trees


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    commits = first_parent_commits(args.repo, args.revisions, args.states)
    if len(commits) < 2:
        raise SystemExit("the range must hold at least two commits")
    tools, missing = choose_tools(args.tools)
    work = (args.work or Path(tempfile.mkdtemp(prefix="snapstore-history-"))).resolve()
    work.mkdir(parents=True, exist_ok=True)
    try:
        replay = Replay(args.repo, work, work / "tree")
        results, trees = measure(tools, replay, commits, work, args.restores)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    names = [tool.name for tool in tools]
    table = history_report.rows(results, len(commits))
    found_targets = history_report.evaluate(results)
    result = {
        "meta": meta(args, commits, trees, missing),
        "tools": results,
        "targets": [target.to_dict() for target in found_targets],
        "table_markdown": history_report.markdown(names, table),
    }
    last = f"{trees[-1][0]} files, {history_report.format_bytes(trees[-1][1])}"
    print(f"{args.repo}: {len(commits)} states {commits[0][:12]}..{commits[-1][:12]}; last: {last}")
    print(history_report.render(names, table))
    for tool in tools:
        steps = ", ".join(step["step"] for step in results[tool.name]["maintenance"])
        print(f"  maintenance of {tool.name}: {steps}")
    print()
    print(target_lines(found_targets))
    if missing:
        print(f"\nnot installed: {', '.join(missing)}")
    if args.json_path:
        args.json_path.parent.mkdir(parents=True, exist_ok=True)
        args.json_path.write_text(json.dumps(result, indent=2) + "\n")
        print(f"\nwrote {args.json_path}")
    failed = [
        f"{name} state {r['state']} ({r['commit'][:12]}): {'; '.join(r['problems'])}"
        for name, found in results.items()
        for r in found["restores"]
        if not r["verified"]
    ]
    if failed:
        raise SystemExit("restores that do not match git archive:\n" + "\n".join(failed))
    return result


if __name__ == "__main__":
    main()
