"""The parameters of ``snapstore serve``'s methods, checked against their JSON types before the
library is called: a wrong type is a JSON-RPC ``invalid params`` error, not a library error
half-way through. Each check takes the parameter's name (for the message) and its value, and
returns the value the library takes."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from snapstore.service.protocol import INVALID_PARAMS, RpcError

Check = Callable[[str, Any], Any]
REQUIRED: Any = object()
"""The default of a parameter that must be given."""


def invalid(message: str) -> RpcError:
    """The ``invalid params`` error with ``message``."""
    return RpcError(INVALID_PARAMS, message)


def text(name: str, value: Any) -> str:
    """A string."""
    if not isinstance(value, str):
        raise invalid(f"{name} must be a string, not {_json_type(value)}")
    return value


def optional_text(name: str, value: Any) -> str | None:
    """A string or null."""
    return None if value is None else text(name, value)


def texts(name: str, value: Any) -> list[str]:
    """An array of strings."""
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise invalid(f"{name} must be an array of strings")
    return value


def optional_texts(name: str, value: Any) -> list[str] | None:
    """An array of strings, or null."""
    return None if value is None else texts(name, value)


def paths(name: str, value: Any) -> list[str]:
    """One path as a string, or an array of them."""
    if isinstance(value, str):
        return [value]
    return texts(name, value)


def flag(name: str, value: Any) -> bool:
    """true or false."""
    if not isinstance(value, bool):
        raise invalid(f"{name} must be true or false, not {_json_type(value)}")
    return value


def seconds(name: str, value: Any) -> float | None:
    """A number of seconds, or null."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise invalid(f"{name} must be a number of seconds or null, not {_json_type(value)}")
    return float(value)


def count(name: str, value: Any) -> int | None:
    """A non-negative integer, or null."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise invalid(f"{name} must be a non-negative integer or null")
    return value


def non_negative(name: str, value: Any) -> int:
    """A non-negative integer."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise invalid(f"{name} must be a non-negative integer")
    return value


def mapping(name: str, value: Any) -> dict[str, Any] | None:
    """A JSON object, or null."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise invalid(f"{name} must be an object or null, not {_json_type(value)}")
    return value


def anything(name: str, value: Any) -> Any:
    """Any JSON value."""
    return value


def moment(name: str, value: Any) -> datetime | None:
    """An ISO 8601 time with its UTC offset, or null."""
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(text(name, value))
    except ValueError:
        raise invalid(f"{name} must be an ISO 8601 time, got {value!r}") from None
    if parsed.tzinfo is None:
        raise invalid(f"{name} must carry its UTC offset (such as +00:00 or Z)")
    return parsed


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


@dataclass(frozen=True)
class Param:
    """One named parameter: how to check it, and its default when it is left out
    (``REQUIRED``: it must be given)."""

    check: Check
    default: Any = REQUIRED


def checked_arguments(
    method: str, declared: Mapping[str, Param], params: Mapping[str, Any]
) -> dict[str, Any]:
    """The arguments of ``method`` from a request's ``params``, checked against the
    ``declared`` parameters, defaults filled in; ``invalid params`` for an unknown name, a
    missing required one or a wrong type. ``progress`` and ``_meta`` are the protocol's, not
    the method's, and are left out."""
    given = {key: value for key, value in params.items() if key not in ("progress", "_meta")}
    unknown = sorted(set(given) - set(declared))
    if unknown:
        known = ", ".join(declared) or "none"
        raise invalid(f"unknown parameter {unknown[0]!r} for {method} (parameters: {known})")
    arguments = {}
    for key, param in declared.items():
        if key in given:
            arguments[key] = param.check(key, given[key])
        elif param.default is REQUIRED:
            raise invalid(f"{method} needs the parameter {key!r}")
        else:
            arguments[key] = param.default
    return arguments
