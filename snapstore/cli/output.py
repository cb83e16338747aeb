"""What the command line prints: one JSON document, or aligned tables, readable sizes and ages."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import click

from snapstore.errors import InvalidValueError


def align_rows(rows: Sequence[Sequence[str]], right: Sequence[int] = ()) -> list[str]:
    """Rows as lines of aligned columns; columns whose index is in ``right`` are right-aligned."""
    if not rows:
        return []
    rows = [[shown(cell) for cell in row] for row in rows]
    widths = [max(len(row[index]) for row in rows) for index in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [
            cell.rjust(width) if index in right else cell.ljust(width)
            for index, (cell, width) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
    return lines


def render_table(
    headers: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[int] = ()
) -> list[str]:
    """Lines of an aligned table under a header row."""
    return align_rows([list(headers), *rows], right)


def capped_rows(groups: Sequence[tuple[str, Sequence[str]]], limit: int | None) -> list[list[str]]:
    """``[label, item]`` rows of each group, at most ``limit`` per group (None: all), a cut
    group ending with the row ``[label, "... and N more (use --list)"]``."""
    rows: list[list[str]] = []
    for label, items in groups:
        shown = items if limit is None else items[:limit]
        rows += [[label, item] for item in shown]
        if len(items) > len(shown):
            rows.append([label, f"... and {len(items) - len(shown)} more (use --list)"])
    return rows


def to_json(document: Any, *, pretty: bool = True) -> str:
    """``document`` as pure-ASCII JSON (safe for any path, even undecodable ones): indented by
    two spaces if ``pretty``, else on one line without spaces. InvalidValueError for NaN or an
    infinity (a state value stored through the library): JSON has no form for them, and
    strict parsers reject the bare tokens.

    Only the one-line form is encoded by the json module's C encoder: indenting takes its
    pure-Python one, four to five times slower (1.3 s for 50,000 snapshot headers).
    ``json`` and the shapes are imported here: a command without ``--json`` needs neither."""
    import json

    from snapstore.frontend.shapes import json_default

    try:
        if pretty:
            return json.dumps(
                document, indent=2, ensure_ascii=True, default=json_default, allow_nan=False
            )
        return json.dumps(
            document,
            separators=(",", ":"),
            ensure_ascii=True,
            default=json_default,
            allow_nan=False,
        )
    except ValueError:
        raise InvalidValueError(
            "the value holds NaN or Infinity, which JSON cannot carry"
        ) from None


def print_json(document: Any) -> None:
    """Write ``document`` as the one JSON document of this run: indented for a person when
    stdout is a terminal, on one line for a program reading a pipe or a file (docs/cli.md,
    "--json"). Written as it is: pure ASCII holds no escape sequence for click to strip."""
    text = to_json(document, pretty=stdout_is_terminal())
    stream = sys.stdout
    stream.write(text)
    stream.write("\n")
    stream.flush()


_CONTROLS = {code: f"\\x{code:02x}" for code in (*range(0x20), *range(0x7F, 0xA0)) if code != 0x0A}
"""Control characters but the line break, as escapes: a name holding an escape sequence must
not drive the terminal that shows it (names may hold any character; ``--json`` escapes them
its own way)."""


def shown(text: str) -> str:
    """``text`` with its control characters escaped, for a person's terminal."""
    return text.translate(_CONTROLS)


def print_lines(lines: Sequence[str]) -> None:
    """Write human-readable lines to stdout."""
    for line in lines:
        click.echo(shown(line))


def print_note(message: str) -> None:
    """A remark for a person (not data), on stderr so pipes stay clean."""
    click.echo(shown(message), err=True)


def print_error(message: str) -> None:
    """The one-line error message of a failed command."""
    click.echo(f"error: {one_line(message)}", err=True)


def one_line(message: str) -> str:
    """``message`` folded onto one line, its control characters escaped."""
    parts = [line.strip() for line in message.splitlines() if line.strip()]
    return shown("; ".join(parts))


def stdout_is_terminal() -> bool:
    """True when stdout is an interactive terminal (a person reads it)."""
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False


def stderr_is_terminal() -> bool:
    """True when stderr is an interactive terminal (so a progress bar is welcome)."""
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False
