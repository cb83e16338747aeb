"""Summaries, the text table and the targets of the history replay."""

from __future__ import annotations

import statistics
from typing import Any

from run import format_seconds
from targets import Target

SMALL_STORES = ("restic", "borg")


def summary(seconds: list[float]) -> dict[str, float | None]:
    """Median, 90th percentile and total of ``seconds`` (None for an empty list)."""
    if not seconds:
        return {"median": None, "p90": None, "total": None}
    if len(seconds) == 1:
        p90 = seconds[0]
    else:
        p90 = statistics.quantiles(seconds, n=10, method="inclusive")[8]
    return {"median": statistics.median(seconds), "p90": p90, "total": sum(seconds)}


def format_bytes(value: int | None) -> str:
    """Bytes, decimal kB below a megabyte, MB with one decimal above."""
    if value is None:
        return "-"
    if value < 1e3:
        return f"{value} B"
    return f"{value / 1e3:.0f} kB" if value < 1e6 else f"{value / 1e6:.1f} MB"


def _sync_cell(found: dict[str, int] | str) -> str:
    """Flushes (fsync, fdatasync, syncfs); writeback hints (sync_file_range) apart."""
    if isinstance(found, str):
        return "not measured"
    flushes = found["fsync"] + found["fdatasync"] + found["syncfs"]
    ranges = found["sync_file_range"]
    return f"{flushes} (+{ranges} sync_file_range)" if ranges else str(flushes)


def rows(results: dict[str, dict[str, Any]], states: int) -> list[list[str]]:
    """The table's rows: a label, then one cell per tool in ``results``' order."""

    def row(label: str, cell: Any) -> list[str]:
        return [label, *(cell(found) for found in results.values())]

    def step(index: int, key: str) -> Any:
        def cell(found: dict[str, Any]) -> str:
            steps = found["maintenance"]
            if index >= len(steps):
                return ""
            value = steps[index][key]
            return format_seconds(value) if key == "seconds" else format_bytes(value)

        return cell

    def run_size(key: str) -> Any:
        return lambda found: format_bytes(found["size_after_run"][key])

    later = f"snapshots 2..{states}"
    restores = max(len(found["restores"]) for found in results.values())
    table = [
        row("first snapshot", lambda f: format_seconds(f["first"])),
        row(f"{later}: median", lambda f: format_seconds(f["later"]["median"])),
        row(f"{later}: p90", lambda f: format_seconds(f["later"]["p90"])),
        row(f"{later}: total", lambda f: format_seconds(f["later"]["total"])),
        row("store after the run: disk", run_size("disk")),
        row("store after the run: apparent", run_size("apparent")),
        row("maintenance (1st step): time", step(0, "seconds")),
        row("store after it: disk", step(0, "disk")),
        row("store after it: apparent", step(0, "apparent")),
    ]
    if any(len(found["maintenance"]) > 1 for found in results.values()):
        table.append(row("2nd maintenance step: time", step(1, "seconds")))
        table.append(row("store after it: disk", step(1, "disk")))
    table.append(
        row(f"restore, empty dir: median of {restores}", lambda f: format_seconds(f["restore"]))
    )
    table.append(row("restores verified", lambda f: f"{f['verified']}/{len(f['restores'])}"))
    table.append(row("sync calls, one more snapshot", lambda f: _sync_cell(f["sync_calls"])))
    return table


def render(names: list[str], table: list[list[str]]) -> str:
    """Fixed-width text: a header line of tool names, then the rows."""
    first = max(len(line[0]) for line in table) + 2
    widths = [
        max(12, len(name) + 2, *(len(line[i + 1]) + 2 for line in table))
        for i, name in enumerate(names)
    ]
    lines = [" " * first + "".join(n.rjust(w) for n, w in zip(names, widths, strict=True))]
    for line in table:
        cells = "".join(c.rjust(w) for c, w in zip(line[1:], widths, strict=True))
        lines.append(line[0].ljust(first) + cells)
    return "\n".join(lines)


def markdown(names: list[str], table: list[list[str]]) -> str:
    """The same table in Markdown, for docs/performance.md."""
    lines = ["| | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    lines += ["| " + " | ".join(line) + " |" for line in table]
    return "\n".join(lines)


def _ratio(top: float | None, bottom: float | None) -> float | None:
    if top is None or bottom is None or bottom <= 0:
        return None
    return top / bottom


def _after_maintenance(found: dict[str, Any] | None) -> int | None:
    """Disk bytes after the tool's first maintenance step (``git gc``, not ``--aggressive``)."""
    return found["maintenance"][0]["disk"] if found and found["maintenance"] else None


def evaluate(results: dict[str, dict[str, Any]]) -> list[Target]:
    """The targets: snapstore (library; the CLI in brackets) against shadow git and the
    smallest of restic and borg, from one run."""

    def measure(name: str, pick: Any) -> float | None:
        found = results.get(name)
        return None if found is None else pick(found)

    small = [size for n in SMALL_STORES if (size := _after_maintenance(results.get(n)))]
    targets_found = []
    checks = (
        ("H1", "snapshots 2..N, total time: snapstore / shadow git", 1.0,
         lambda f: f["later"]["total"], lambda: measure("git", lambda f: f["later"]["total"])),
        ("H2", "snapshots 2..N, p90: snapstore / shadow git", 1.5,
         lambda f: f["later"]["p90"], lambda: measure("git", lambda f: f["later"]["p90"])),
        ("H3", "store on disk after gc: snapstore / git after git gc", 2.0,
         _after_maintenance, lambda: measure("git", _after_maintenance)),
        ("H4", "store on disk after gc: snapstore / smallest of restic, borg", 1.0,
         _after_maintenance, lambda: min(small) if small else None),
        ("H5", "restore into an empty dir (median): snapstore / git archive | tar x", 1.0,
         lambda f: f["restore"], lambda: measure("git", lambda f: f["restore"])),
    )  # fmt: skip
    for number, text, bound, pick, other in checks:
        baseline = other()
        value = _ratio(measure("snapstore", pick), baseline)
        cli = _ratio(measure("snapstore-cli", pick), baseline)
        passed = None if value is None else value <= bound
        targets_found.append(Target(number, text, value, f"<= {bound:g}x", passed, cli))
    return targets_found
