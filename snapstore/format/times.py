"""Times as snapshots record them: nanoseconds since the epoch, and time-to-live arguments."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

from snapstore.errors import InvalidValueError


def time_to_ns(moment: datetime) -> int:
    """Nanoseconds since the epoch of an aware datetime."""
    if moment.tzinfo is None:
        raise InvalidValueError(f"datetime {moment!r} must be timezone-aware")
    delta = moment - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


def ns_to_time(ns: int) -> datetime:
    """An aware UTC datetime from nanoseconds since the epoch."""
    return datetime.fromtimestamp(ns / 1e9, tz=UTC)


MAX_TTL_SECONDS = 1000 * 365.25 * 86400
"""The longest TTL accepted (a thousand years: every expiry stays a representable date)."""


def ttl_seconds(ttl: float | int | timedelta | None) -> float | None:
    """A TTL given as seconds or a timedelta, as seconds. InvalidValueError for NaN (no age
    compares with it: a sweep would keep nothing) and for more than ``MAX_TTL_SECONDS``."""
    if ttl is None:
        return None
    if isinstance(ttl, timedelta):
        seconds = ttl.total_seconds()
    elif isinstance(ttl, bool) or not isinstance(ttl, int | float):
        raise InvalidValueError(f"ttl must be seconds or a timedelta, not {type(ttl).__name__}")
    else:
        seconds = float(ttl)
    if math.isnan(seconds):
        raise InvalidValueError("ttl must be a number of seconds, not NaN")
    if seconds > MAX_TTL_SECONDS:
        raise InvalidValueError(f"ttl must be at most a thousand years, got {seconds:g} seconds")
    return seconds


def expiry_ns(created_ns: int, ttl_seconds: float | None) -> int | None:
    """The expiry time for a TTL, or None for no TTL."""
    if ttl_seconds is None:
        return None
    if not math.isfinite(ttl_seconds) or ttl_seconds <= 0:
        raise InvalidValueError(f"ttl must be a positive number of seconds, got {ttl_seconds!r}")
    return created_ns + int(ttl_seconds * 1e9)
