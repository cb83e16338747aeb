"""Readable sizes, counts, spans and ages, as the command line and the web page show them."""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["count", "human_age", "human_expiry", "human_size", "human_span"]

_SIZE_UNITS = ("KiB", "MiB", "GiB", "TiB", "PiB")
_AGE_UNITS = ((86400 * 365, "y"), (86400 * 7, "w"), (86400, "d"), (3600, "h"), (60, "m"), (1, "s"))


def human_size(size: int) -> str:
    """``size`` bytes as ``512 B``, ``1.5 KiB``, ``3.2 MiB``..."""
    if size < 1024:
        return f"{size} B"
    value = float(size)
    for unit in _SIZE_UNITS:
        value /= 1024
        if value < 1024 or unit == _SIZE_UNITS[-1]:
            return f"{value:.1f} {unit}"
    raise AssertionError("unreachable")


def count(number: int, noun: str) -> str:
    """``1 snapshot``, ``2 snapshots``."""
    return f"{number} {noun}{'' if number == 1 else 's'}"


def human_span(seconds: float) -> str:
    """A span rounded in its largest unit: ``45s``, ``3m``, ``2h``, ``4d`` (7d is ``1w``)."""
    span = abs(seconds)
    for index, (unit_seconds, suffix) in enumerate(_AGE_UNITS):
        if span >= unit_seconds or unit_seconds == 1:
            amount = round(span / unit_seconds)
            bigger = _AGE_UNITS[index - 1] if index else None
            if bigger and amount * unit_seconds >= bigger[0]:
                return f"{amount * unit_seconds // bigger[0]}{bigger[1]}"
            return f"{amount}{suffix}"
    raise AssertionError("unreachable")


def human_age(moment: datetime, now: datetime | None = None) -> str:
    """How long ago (``3m ago``) or how far ahead (``in 2h``) ``moment`` is."""
    delta = ((now or datetime.now(UTC)) - moment).total_seconds()
    if abs(delta) < 1:
        return "just now"
    return f"{human_span(delta)} ago" if delta > 0 else f"in {human_span(delta)}"


def human_expiry(expires_at: datetime | None, now: datetime | None = None) -> str:
    """``never``, ``in 2h``, or ``expired 3m ago``."""
    if expires_at is None:
        return "never"
    age = human_age(expires_at, now)
    return f"expired {age}" if age.endswith("ago") else age
