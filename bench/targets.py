"""The targets of issue 6, evaluated on the medians of one run (ratios within the run)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

MEMORY_LIMIT_MB = 150.0
COMPARISONS = (
    ("1a", "first snapshot: git time / snapstore time", "first", "git", 5.0, True),
    ("1b", "first snapshot: snapstore / tar cf", "first", "tar", 3.0, False),
    ("2a", "1% changed: snapstore / git", "changed", "git", 1.0, False),
    ("2b", "unchanged: snapstore / git", "unchanged", "git", 2.0, False),
    ("3a", "restore into empty dir: snapstore / tar xf", "restore_empty", "tar", 1.2, False),
    ("3b", "restore in place, 1% changed: snapstore / git", "restore_in_place", "git", 2.0, False),
)
"""(number, text, operation, other tool, bound, True if snapstore must be faster by bound)."""
CLI_FIRST_BOUND = 3.0
"""The first snapshot through the command line (a whole process, as tar is), against tar."""


@dataclass(frozen=True)
class Target:
    """One target: what it asks, the measured value, and whether it was met (None: n/a)."""

    number: str
    text: str
    value: float | None
    limit: str
    passed: bool | None
    cli_value: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _ratio(top: float | None, bottom: float | None) -> float | None:
    if top is None or bottom is None or bottom <= 0:
        return None
    return top / bottom


def _check(value: float | None, ok: bool) -> bool | None:
    return None if value is None else ok


def evaluate(
    medians: dict[str, dict[str, float]], scenarios: dict[str, Any], size: str
) -> list[Target]:
    """Every target, from the medians (operation -> tool -> seconds) and the scenarios."""

    def tool(operation: str, name: str) -> float | None:
        return medians.get(operation, {}).get(name)

    targets: list[Target] = []
    for number, text, operation, other, bound, faster in COMPARISONS:
        if faster:
            value = _ratio(tool(operation, other), tool(operation, "snapstore"))
            cli = _ratio(tool(operation, other), tool(operation, "snapstore-cli"))
            passed = _check(value, value is not None and value >= bound)
        else:
            value = _ratio(tool(operation, "snapstore"), tool(operation, other))
            cli = _ratio(tool(operation, "snapstore-cli"), tool(operation, other))
            passed = _check(value, value is not None and value <= bound)
        limit = f"{'>=' if faster else '<='} {bound:g}x"
        targets.append(Target(number, text, value, limit, passed, cli))
    cli_first = _ratio(tool("first", "snapstore-cli"), tool("first", "tar"))
    text = "first snapshot through the command line: snapstore-cli / tar cf"
    passed = _check(cli_first, cli_first is not None and cli_first <= CLI_FIRST_BOUND)
    targets.append(Target("1b'", text, cli_first, f"<= {CLI_FIRST_BOUND:g}x", passed))

    listing = scenarios.get("list_open")
    if listing:
        count = listing["snapshots"]
        value = listing["list"] / listing["bare_walk"]
        text = f"list() of {count} snapshots, new SnapStore in the process / bare walk"
        targets.append(Target("4a", text, value, "<= 3x", value <= 3))
        value = listing["list_new_process"] / listing["bare_walk_new_process"]
        text = f"list() of {count} snapshots in a new process / bare walk in a new process"
        targets.append(Target("4a'", text, value, "<= 3x", value <= 3))
        value = listing["open_many"] / listing["open_10"]
        text = f"open with {count} / open with 10 snapshots"
        targets.append(Target("4b", text, value, "<= 1.5x", value <= 1.5))
    memory = scenarios.get("memory")
    if memory:
        value = max(memory["create_mb"], memory["restore_mb"])
        text = f"peak RSS (MB) creating or restoring the {size} tree"
        passed = value < MEMORY_LIMIT_MB if size == "large" else None
        limit = f"< {MEMORY_LIMIT_MB:g} MB" + ("" if size == "large" else " (large tree only)")
        targets.append(Target("5", text, value, limit, passed))
    space = scenarios.get("space")
    if space:
        value = space["ratio"]
        text = "space of 10 snapshots (1% changed each) / one"
        targets.append(Target("6", text, value, "<= 1.2x", value <= 1.2))
    durability = scenarios.get("durability")
    if durability:
        value = durability["ratio"]
        text = "first snapshot durable / durable=False (reported; durable is the default)"
        targets.append(Target("7", text, value, "reported", True))
    concurrency = scenarios.get("concurrency")
    if concurrency:
        value = concurrency["throughput_ratio"]
        text = "4 writers: concurrent throughput / sequential"
        targets.append(Target("8", text, value, ">= 1.3x", value >= 1.3))
    return targets
