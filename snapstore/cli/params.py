"""Command-line value types: durations, ``KEY=VALUE`` metadata and JSON values."""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    _Duration = click.ParamType[float, Any]
    _MetaItem = click.ParamType[tuple[str, str], Any]
    _JsonValue = click.ParamType[Any, Any]
else:  # click < 8.5 has no type parameters on ParamType
    _Duration = _MetaItem = _JsonValue = click.ParamType

_UNIT_SECONDS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_DURATION = re.compile(r"(?:\d+(?:\.\d+)?[smhdw])+")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")


def parse_duration(text: str) -> float:
    """Seconds in ``text``: plain seconds (``90``, ``0.5``) or with units (``15m``, ``1h30m``)."""
    cleaned = text.strip().lower()
    try:
        seconds = float(cleaned)
    except ValueError:
        if not _DURATION.fullmatch(cleaned):
            raise ValueError(
                f"invalid duration {text!r}: use seconds or a number with a unit, "
                "e.g. 90s, 15m, 24h, 7d"
            ) from None
        return sum(float(n) * _UNIT_SECONDS[unit] for n, unit in _DURATION_PART.findall(cleaned))
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"invalid duration {text!r}: must be a finite number >= 0")
    return seconds


class DurationType(_Duration):
    """A duration such as ``90s``, ``15m``, ``24h``, ``7d`` or plain seconds, as float seconds."""

    name = "duration"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        if isinstance(value, int | float):
            return float(value)
        try:
            return parse_duration(str(value))
        except ValueError as error:
            self.fail(str(error), param, ctx)


class MetaItemType(_MetaItem):
    """One ``KEY=VALUE`` metadata pair, as a ``(key, value)`` tuple of strings."""

    name = "key=value"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> tuple[str, str]:
        if isinstance(value, tuple):
            return value
        key, sep, item = str(value).partition("=")
        if not sep or not key:
            self.fail(f"expected KEY=VALUE, got {value!r}", param, ctx)
        return key, item


class JsonValueType(_JsonValue):
    """A value written as JSON (``42``, ``'"text"'``, ``'{"cursor": 7}'``)."""

    name = "json"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not isinstance(value, str):
            return value
        import json  # deferred: only a JSON value given on the command line needs it

        try:
            return json.loads(value, parse_constant=_refuse_constant, parse_float=_finite)
        except ValueError as error:
            self.fail(
                f"not valid JSON: {value!r} ({error}); quote strings, e.g. '\"text\"'", param, ctx
            )


def _refuse_constant(token: str) -> Any:
    """NaN and Infinity, which Python's parser accepts, are not JSON."""
    raise ValueError(f"{token} is not JSON")


def _finite(text: str) -> float:
    """A JSON number as a float; ValueError for one no float holds (``1e999`` would be
    stored as an infinity that no JSON output could show again)."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:40]} is out of range")
    return value


DURATION = DurationType()
META_ITEM = MetaItemType()
JSON_VALUE = JsonValueType()
