"""The wire protocol of ``snapstore serve``: JSON-RPC 2.0, one JSON object per line.

This module holds what docs/protocol.md specifies: the protocol version, the reserved
JSON-RPC codes, the code of each snapstore error type, and how a message is encoded. The
table of codes is stable: a code is never reused for another type.
"""

from __future__ import annotations

import json
import math
from typing import Any

from snapstore import PathNotInSnapshotError, errors

PROTOCOL_VERSION = "1.0"
"""Bumped in its major part for a change an existing client could trip over."""

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603


class StoreNotFound(errors.SnapstoreError):
    """There is no store at the server's root, and the method called would not create one
    (only ``create`` and ``put_state`` do, as on the command line)."""


class WatchError(errors.SnapstoreError):
    """A directory cannot be watched (not a directory, or a watch of another directory with
    other options is in the way); a watch that merely cannot see everything falls back to full
    scans instead of raising this."""


ERROR_CODES: tuple[tuple[type[BaseException], int], ...] = (
    (errors.SnapstoreError, 1000),
    (errors.InvalidNameError, 1001),
    (errors.InvalidValueError, 1002),
    (errors.UnsafePathError, 1003),
    (errors.FormatError, 1004),
    (errors.SourceChangedError, 1005),
    (errors.NotAStateSnapshotError, 1006),
    (errors.UnreadablePathError, 1007),
    (errors.RestoreError, 1008),
    (errors.SnapshotExistsError, 1009),
    (errors.MissingPathError, 1010),
    (WatchError, 1011),
    (StoreNotFound, 1100),
    (errors.LockTimeout, 1110),
    (errors.ReadOnlyStoreError, 1120),
    (PermissionError, 1121),
    (errors.CorruptManifestError, 1130),
    (errors.CorruptBlobError, 1131),
    (errors.CorruptPackError, 1132),
    (errors.MissingBlobError, 1133),
    (errors.SnapshotNotFound, 1140),
    (PathNotInSnapshotError, 1141),
    (OSError, 1199),
)
"""Each error type and its code. An error gets the code of the first class in its method
resolution order found here, so a subclass without a code of its own reports its parent's."""

_CODE_OF = dict(ERROR_CODES)


def error_code(error: BaseException) -> int | None:
    """The code of ``error``'s type (or its nearest listed ancestor); None if unlisted."""
    for cls in type(error).__mro__:
        code = _CODE_OF.get(cls)
        if code is not None:
            return code
    return None


class RpcError(Exception):
    """A JSON-RPC error to send as the response: ``code``, ``message`` and ``data``."""

    def __init__(self, code: int, message: str, data: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_dict(self) -> dict[str, Any]:
        """The response's ``error`` member."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


def _one_line(text: str) -> str:
    return "; ".join(part.strip() for part in text.splitlines() if part.strip())


def error_from_exception(error: BaseException) -> RpcError:
    """The JSON-RPC error reporting ``error`` raised by a method: its code from the table (an
    unlisted type is an internal error), ``data.type`` its class name, ``data.message`` its
    text, ``data.exit_code`` the exit code the command line ends with for it, plus the fields
    some types carry (``rolled_back``, ``session``/``name``, ``errno``/``filename``)."""
    from snapstore.frontend.exitcodes import ExitCode, exit_code_for

    message = _one_line(str(error)) or type(error).__name__
    data: dict[str, Any] = {
        "type": type(error).__name__,
        "message": message,
        "exit_code": int(
            ExitCode.NO_STORE if isinstance(error, StoreNotFound) else exit_code_for(error)
        ),
    }
    if isinstance(error, errors.RestoreError):
        data["rolled_back"] = error.rolled_back
    if isinstance(error, errors.SnapshotNotFound | errors.SnapshotExistsError):
        data["session"], data["name"] = error.session, error.name
    if isinstance(error, errors.LockTimeout):
        data["lock"], data["timeout"] = error.lock_name, error.timeout
    elif isinstance(error, OSError):
        if error.errno is not None:
            data["errno"] = error.errno
        if error.filename is not None:
            data["filename"] = str(error.filename)
    code = error_code(error)
    if code is None:
        return RpcError(INTERNAL_ERROR, f"internal error: {type(error).__name__}: {message}", data)
    return RpcError(code, message, data)


def encode_message(message: dict[str, Any]) -> bytes:
    """One message as a line: compact JSON, pure ASCII (so any path, even one whose name is
    not valid UTF-8, survives), ending in ``\\n``. A response whose result holds NaN or an
    infinity (a state value stored through the library), which JSON has no form for, becomes
    an InvalidValueError response: strict parsers reject the bare tokens."""
    from snapstore.frontend.shapes import json_default

    try:
        text = _dumps(message, json_default)
    except ValueError:
        refusal = RpcError(
            _CODE_OF[errors.InvalidValueError],
            "the result holds NaN or Infinity, which JSON cannot carry",
        )
        text = _dumps(error_response(message.get("id"), refusal), json_default)
    return text.encode("ascii") + b"\n"


def _dumps(message: dict[str, Any], default: Any) -> str:
    return json.dumps(
        message, ensure_ascii=True, separators=(",", ":"), default=default, allow_nan=False
    )


def decode_message(line: bytes) -> Any:
    """One received line as JSON. ValueError for anything that is not strict JSON, the
    ``NaN`` and ``Infinity`` tokens Python's parser accepts included (a ``NaN`` TTL would
    otherwise compare with nothing), and for numbers no float holds; RecursionError for
    nesting deeper than the parser goes."""
    return json.loads(
        line.decode("utf-8"), parse_constant=_refuse_constant, parse_float=_finite_float
    )


def _refuse_constant(token: str) -> Any:
    raise ValueError(f"{token} is not JSON")


def _finite_float(text: str) -> float:
    """A JSON number as a float; ValueError for one beyond a float's range (``1e400``), which
    would become an infinity no response could carry back."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:40]} is out of range")
    return value


def response(request_id: Any, result: Any) -> dict[str, Any]:
    """A success response."""
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def error_response(request_id: Any, error: RpcError) -> dict[str, Any]:
    """An error response (``id`` null when the request's id could not be read)."""
    return {"jsonrpc": "2.0", "id": request_id, "error": error.to_dict()}


def notification(method: str, params: dict[str, Any]) -> dict[str, Any]:
    """A message from the server that expects no answer (``progress``)."""
    return {"jsonrpc": "2.0", "method": method, "params": params}
