"""The methods ``snapstore serve`` answers: the ``SnapStore`` API by name, with checked params.

Each method takes the keyword parameters of the API method of the same name (``create`` takes
``session``, ``name``, ``paths``, ``base_dir``, ...), checks their JSON types before calling
the library (a wrong type is a JSON-RPC ``invalid params`` error, not a library error half-way
through), and returns the document ``--json`` prints for the matching command
(``snapstore.service.shapes``). Values the library itself refuses (an unknown ``if_exists``,
a name that is too long) raise its own errors, reported with their codes.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import snapstore
from snapstore.repo.s3client import is_store_url
from snapstore.service import shapes
from snapstore.service.protocol import (
    INVALID_PARAMS,
    PROTOCOL_VERSION,
    RpcError,
    StoreNotFound,
)

if TYPE_CHECKING:
    from snapstore import SnapStore
    from snapstore.service.watch import WatchSet

Progress = Callable[[int, int], None]
Check = Callable[[str, Any], Any]
_MISSING = object()


def _invalid(message: str) -> RpcError:
    return RpcError(INVALID_PARAMS, message)


def text(name: str, value: Any) -> str:
    """A string."""
    if not isinstance(value, str):
        raise _invalid(f"{name} must be a string, not {_json_type(value)}")
    return value


def optional_text(name: str, value: Any) -> str | None:
    """A string or null."""
    return None if value is None else text(name, value)


def texts(name: str, value: Any) -> list[str]:
    """An array of strings."""
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise _invalid(f"{name} must be an array of strings")
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
        raise _invalid(f"{name} must be true or false, not {_json_type(value)}")
    return value


def seconds(name: str, value: Any) -> float | None:
    """A number of seconds, or null."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _invalid(f"{name} must be a number of seconds or null, not {_json_type(value)}")
    return float(value)


def count(name: str, value: Any) -> int | None:
    """A non-negative integer, or null."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _invalid(f"{name} must be a non-negative integer or null")
    return value


def mapping(name: str, value: Any) -> dict[str, Any] | None:
    """A JSON object, or null."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _invalid(f"{name} must be an object or null, not {_json_type(value)}")
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
        raise _invalid(f"{name} must be an ISO 8601 time, got {value!r}") from None
    if parsed.tzinfo is None:
        raise _invalid(f"{name} must carry its UTC offset (such as +00:00 or Z)")
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
    (``_MISSING``: required)."""

    check: Check
    default: Any = _MISSING


@dataclass(frozen=True)
class Method:
    """A method: its handler, parameters, and whether it reports progress."""

    handler: Callable[[Service, dict[str, Any], Progress | None], Any]
    params: Mapping[str, Param] = field(default_factory=dict)
    progress: bool = False

    def arguments(self, name: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """The checked arguments, defaults filled in; ``invalid params`` for an unknown name,
        a missing required one or a wrong type. ``progress`` and ``_meta`` are the
        protocol's, not the method's, and are left out."""
        given = {key: value for key, value in params.items() if key not in ("progress", "_meta")}
        unknown = sorted(set(given) - set(self.params))
        if unknown:
            known = ", ".join(self.params) or "none"
            raise _invalid(f"unknown parameter {unknown[0]!r} for {name} (parameters: {known})")
        arguments = {}
        for key, param in self.params.items():
            if key in given:
                arguments[key] = param.check(key, given[key])
            elif param.default is _MISSING:
                raise _invalid(f"{name} needs the parameter {key!r}")
            else:
                arguments[key] = param.default
        return arguments


class Service:
    """What one server keeps between calls: one ``SnapStore`` (opened at the first call that
    needs it, closed by ``close``) and the directories it watches."""

    def __init__(self, root: str | os.PathLike[str], *, lock_timeout: float = 30.0) -> None:
        text = os.fspath(root)
        self.root = text if is_store_url(text) else os.path.abspath(text)
        self.lock_timeout = lock_timeout
        self._store: SnapStore | None = None
        self._opening = threading.Lock()
        self._watches: WatchSet | None = None

    def store(self, *, create: bool = False) -> SnapStore:
        """The open store; only methods that write new data (``create``, ``put_state``) may
        create a missing one, as on the command line."""
        with self._opening:
            return self._open(create)

    def _open(self, create: bool) -> SnapStore:
        if self._store is None:
            from snapstore import SnapStore
            from snapstore.errors import StoreNotFoundError

            try:
                self._store = SnapStore(self.root, lock_timeout=self.lock_timeout, create=create)
            except StoreNotFoundError:
                raise StoreNotFound(
                    f"no store at '{self.root}' (start the server with --root DIR, or call "
                    "create or put_state to make a new one)"
                ) from None
        return self._store

    def store_exists(self) -> bool:
        """Whether there is a store at the root (opening it if there is)."""
        try:
            self.store()
        except StoreNotFound:
            return False
        return True

    @property
    def watches(self) -> WatchSet:
        """The directories this server watches (set up at the first watch)."""
        if self._watches is None:
            from snapstore.service.watch import WatchSet

            self._watches = WatchSet(str(self.root))
        return self._watches

    def close(self) -> None:
        """Stop every watch and release the store's open files."""
        if self._watches is not None:
            self._watches.close()
        if self._store is not None:
            self._store.close()


def _initialize(service: Service, args: dict[str, Any], _: Progress | None) -> Any:
    from snapstore.service.watch import watch_support

    return {
        "protocol_version": PROTOCOL_VERSION,
        "server": {"name": "snapstore", "version": snapstore.__version__},
        "root": str(service.root),
        "store_exists": service.store_exists(),
        "methods": sorted(METHODS),
        "watch": watch_support(),
    }


def _create(service: Service, args: dict[str, Any], progress: Progress | None) -> Any:
    watch = args.pop("watch")
    store = service.store(create=True)
    if watch:
        info, status = service.watches.create(store, args, progress)
        return {**shapes.snapshot_document(info), "watch": status}
    return shapes.snapshot_document(store.create(**args, progress=progress))


def _list(service: Service, args: dict[str, Any], _: Progress | None) -> Any:
    return shapes.snapshots_document(service.store().list(args["session"]))


def _latest(service: Service, args: dict[str, Any], _: Progress | None) -> Any:
    return shapes.snapshot_document(service.store().latest(args["session"]))


def _sessions(service: Service, args: dict[str, Any], _: Progress | None) -> Any:
    return {"sessions": service.store().sessions()}


def _backups(service: Service, args: dict[str, Any], _: Progress | None) -> Any:
    return shapes.backups_document(service.store().backups(args["session"]))


def _get(service: Service, args: dict[str, Any], _: Progress | None) -> Any:
    store = service.store()
    snapshot = store.get(args["session"], args["name"])
    info = snapshot.info
    value = store.get_state(info.session, info.name) if info.kind == "state" else None
    return shapes.show_document(snapshot, value)


def _read(service: Service, args: dict[str, Any], _: Progress | None) -> Any:
    data = service.store().read(args["session"], args["name"], args["path"])
    return shapes.file_document(args["session"], args["name"], args["path"], data)


def _diff(service: Service, args: dict[str, Any], _: Progress | None) -> Any:
    store = service.store()
    session, name, other, target = args["session"], args["name"], args["other"], args["target"]
    if other is not None:
        if target is not None:
            raise _invalid("diff takes other (a second snapshot) or target, not both")
        report = store.diff(session, name, other)
        return shapes.snapshots_diff_document(session, name, other, report)
    if target is None:
        target = store.get(session, name).info.base_dir
    return shapes.diff_document(session, name, target, store.diff(session, name, target=target))


def _history(service: Service, args: dict[str, Any], _: Progress | None) -> Any:
    versions = service.store().history(args["session"], args["path"])
    return shapes.history_document(args["session"], args["path"], versions)


def _restore(service: Service, args: dict[str, Any], progress: Progress | None) -> Any:
    report = service.store().restore(**args, progress=progress)
    return shapes.restore_document(args["session"], args["name"], report)


def _undo(service: Service, args: dict[str, Any], progress: Progress | None) -> Any:
    report = service.store().undo(**args, progress=progress)
    return shapes.undo_document(args["session"], report)


def _delete(service: Service, args: dict[str, Any], _: Progress | None) -> Any:
    deleted = service.store().delete(args["session"], args["name"])
    return shapes.deleted_document(args["session"], args["name"], deleted)


def _delete_session(service: Service, args: dict[str, Any], _: Progress | None) -> Any:
    deleted = service.store().delete_session(args["session"])
    return shapes.session_deleted_document(args["session"], deleted)


def _sweep(service: Service, args: dict[str, Any], _: Progress | None) -> Any:
    return shapes.sweep_document(service.store().sweep(**args), args["dry_run"])


def _gc(service: Service, args: dict[str, Any], _: Progress | None) -> Any:
    return shapes.gc_document(service.store().gc(**args), args["dry_run"])


def _verify(service: Service, args: dict[str, Any], progress: Progress | None) -> Any:
    return shapes.verify_document(service.store().verify(**args, progress=progress))


def _get_state(service: Service, args: dict[str, Any], _: Progress | None) -> Any:
    session, name, default = args["session"], args["name"], args["default"]
    value = (
        service.store().get_state(session, name, _MISSING) if service.store_exists() else _MISSING
    )
    found = value is not _MISSING
    return shapes.state_document(session, name, found, value if found else default)


def _put_state(service: Service, args: dict[str, Any], _: Progress | None) -> Any:
    info = service.store(create=True).put_state(**args)
    return shapes.saved_state_document(info, args["value"])


def _watch(service: Service, args: dict[str, Any], _: Progress | None) -> Any:
    return service.watches.start(**args)


def _unwatch(service: Service, args: dict[str, Any], _: Progress | None) -> Any:
    return {"stopped": service.watches.stop(**args)}


def _shutdown(service: Service, args: dict[str, Any], _: Progress | None) -> Any:
    return {"shutdown": True}


_SESSION = {"session": Param(text)}
_SNAPSHOT = {"session": Param(text), "name": Param(text)}
_WATCHED = {
    "paths": Param(paths),
    "base_dir": Param(text, "."),
    "exclude": Param(texts, []),
    "default_excludes": Param(flag, True),
    "gitignore": Param(flag, False),
}

METHODS: dict[str, Method] = {
    "initialize": Method(_initialize),
    "shutdown": Method(_shutdown),
    "create": Method(
        _create,
        {
            "session": Param(text),
            "name": Param(optional_text, None),
            **_WATCHED,
            "meta": Param(mapping, None),
            "ttl": Param(seconds, None),
            "if_exists": Param(text, "replace"),
            "missing": Param(text, "absent"),
            "skip_unreadable": Param(flag, False),
            "rehash": Param(flag, False),
            "watch": Param(flag, False),
        },
        progress=True,
    ),
    "list": Method(_list, {"session": Param(optional_text, None)}),
    "latest": Method(_latest, _SESSION),
    "sessions": Method(_sessions),
    "backups": Method(_backups, _SESSION),
    "get": Method(_get, _SNAPSHOT),
    "read": Method(_read, {**_SNAPSHOT, "path": Param(text)}),
    "diff": Method(
        _diff,
        {**_SNAPSHOT, "other": Param(optional_text, None), "target": Param(optional_text, None)},
    ),
    "history": Method(_history, {**_SESSION, "path": Param(text)}),
    "restore": Method(
        _restore,
        {
            **_SNAPSHOT,
            "target": Param(optional_text, None),
            "paths": Param(optional_texts, None),
            "dry_run": Param(flag, False),
            "backup": Param(flag, True),
            "keep_special_bits": Param(flag, False),
        },
        progress=True,
    ),
    "undo": Method(
        _undo,
        {
            **_SESSION,
            "backup": Param(optional_text, None),
            "target": Param(optional_text, None),
            "dry_run": Param(flag, False),
        },
        progress=True,
    ),
    "delete": Method(_delete, _SNAPSHOT),
    "delete_session": Method(_delete_session, _SESSION),
    "sweep": Method(
        _sweep,
        {
            "ttl": Param(seconds, None),
            "keep_last": Param(count, None),
            "now": Param(moment, None),
            "dry_run": Param(flag, False),
        },
    ),
    "gc": Method(_gc, {"dry_run": Param(flag, False)}),
    "verify": Method(_verify, {"deep": Param(flag, False)}, progress=True),
    "get_state": Method(_get_state, {**_SNAPSHOT, "default": Param(anything, None)}),
    "put_state": Method(
        _put_state, {**_SNAPSHOT, "value": Param(anything), "ttl": Param(seconds, None)}
    ),
    "watch": Method(_watch, _WATCHED),
    "unwatch": Method(_unwatch, {"paths": Param(paths), "base_dir": Param(text, ".")}),
}
"""Every method, by the name a request gives."""
