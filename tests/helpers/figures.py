"""Collect the figures docs/reliability.md quotes: counts the suites append as JSON lines.

Set ``SNAPSTORE_FIGURES=/path/figures.jsonl`` to collect them during a run, then
``python -m helpers.figures /path/figures.jsonl`` (from ``tests/``) prints the totals.
"""

from __future__ import annotations

import json
import os
import sys
from collections import defaultdict

LONG = os.environ.get("SNAPSTORE_LONG", "") not in ("", "0")
"""Full-depth runs: ``SNAPSTORE_LONG=1``."""


def depth(default: int, long: int) -> int:
    """A count for the default (CI) run, or the full-depth one under ``SNAPSTORE_LONG=1``."""
    return long if LONG else default


def record(suite: str, **counts: object) -> None:
    """Append one test's counts to the figures file, if one is configured."""
    path = os.environ.get("SNAPSTORE_FIGURES")
    if not path:
        return
    line = json.dumps({"suite": suite, **counts}, sort_keys=True, default=str)
    with open(path, "a", encoding="utf-8") as file:
        file.write(line + "\n")


def summarize(path: str) -> dict[str, dict[str, float]]:
    """Sum every numeric field per suite."""
    totals: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    with open(path, encoding="utf-8") as file:
        for line in file:
            row = json.loads(line)
            suite = row.pop("suite")
            for key, value in row.items():
                if isinstance(value, int | float) and not isinstance(value, bool):
                    totals[suite][key] += value
    return {suite: dict(values) for suite, values in totals.items()}


if __name__ == "__main__":
    for suite, values in sorted(summarize(sys.argv[1]).items()):
        print(suite, {key: int(value) for key, value in sorted(values.items())})
