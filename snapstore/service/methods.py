"""The methods ``snapstore serve`` answers: the ``SnapStore`` API by name, with checked params.

Each method takes the keyword parameters of the API method of the same name (``create`` takes
``session``, ``name``, ``paths``, ``base_dir``, ...), checks their JSON types before calling
the library (``snapstore.service.params``), and returns the document ``--json`` prints for the
matching command (``snapstore.frontend.shapes``). Values the library itself refuses (an unknown
``if_exists``, a name that is too long) raise its own errors, reported with their codes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import snapstore
from snapstore.frontend import shapes
from snapstore.internals import repository
from snapstore.patch import DEFAULT_CONTEXT, DEFAULT_MAX_BYTES
from snapstore.service import removal
from snapstore.service.confine import os_path_text
from snapstore.service.context import Service
from snapstore.service.params import (
    Param,
    anything,
    checked_arguments,
    count,
    flag,
    invalid,
    mapping,
    moment,
    non_negative,
    optional_text,
    optional_texts,
    paths,
    seconds,
    text,
    texts,
)
from snapstore.service.protocol import PROTOCOL_VERSION

if TYPE_CHECKING:
    from snapstore import SnapStore

Progress = Callable[[int, int], None]
_ABSENT = object()


@dataclass(frozen=True)
class Method:
    """A method: its handler, parameters, and whether it reports progress."""

    handler: Callable[[Service, dict[str, Any], Progress | None], Any]
    params: Mapping[str, Param] = field(default_factory=dict)
    progress: bool = False

    def arguments(self, name: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """The checked arguments of a request for this method called ``name``, defaults
        filled in (``params.checked_arguments``)."""
        return checked_arguments(name, self.params, params)


def _confine(service: Service, path: str | None, what: str, base: str | None = None) -> None:
    """With ``--allow``, refuse ``path`` outside the allowed directories (PathNotAllowedError)."""
    if service.allowed is not None and path is not None:
        service.allowed.check(path, what, base)


def _snapshot_dir(service: Service, session: str, name: str) -> str:
    """The base directory of file snapshot ``name`` (a full name), confined with ``--allow``."""
    base_dir = repository(service.store()).files_header(session, name).base_dir
    _confine(service, base_dir, f"the base directory of snapshot {name!r}")
    return base_dir


def target_diff_document(
    store: SnapStore, session: str, name: str, target: str | None = None
) -> dict[str, Any]:
    """The ``diff`` document of what changed from (session, name) to ``target``; by default
    its base directory, which the document names."""
    if target is None:
        target = store.get(session, name).info.base_dir
    return shapes.diff_document(session, name, target, store.diff(session, name, target=target))


def _initialize(service: Service, args: dict[str, Any], _: Progress | None) -> Any:
    from snapstore.service.watch import watch_support

    allowed = None if service.allowed is None else list(service.allowed.directories)
    return {
        "protocol_version": PROTOCOL_VERSION,
        "server": {"name": "snapstore", "version": snapstore.__version__},
        "root": str(service.root),
        "store_exists": service.store_exists(),
        "methods": sorted(METHODS),
        "watch": watch_support(),
        "allowed": allowed,
    }


def _create(service: Service, args: dict[str, Any], progress: Progress | None) -> Any:
    from snapstore.service.agent import absent_paths

    watch = args.pop("watch")
    base = os.path.abspath(os_path_text(args["base_dir"], "base_dir"))
    _confine(service, base, "base_dir")
    if service.allowed is not None:
        service.allowed.check_all(args["paths"], "path", base)
    absent = absent_paths(base, args["paths"])
    store = service.store(create=True)
    if service.allowed is not None and args["name"] is not None and args["if_exists"] == "replace":
        removal.check_replace(store, service.allowed, args["session"], args["name"])
    if watch:
        info, status = service.watches.create(store, args, progress)
        return {**shapes.snapshot_document(info), "absent": absent, "watch": status}
    return {**shapes.snapshot_document(store.create(**args, progress=progress)), "absent": absent}


def _list(service: Service, args: dict[str, Any], _: Progress | None) -> Any:
    return shapes.snapshots_document(service.store().list(args["session"]))


def _latest(service: Service, args: dict[str, Any], _: Progress | None) -> Any:
    return shapes.snapshot_document(service.store().latest(args["session"]))


def _sessions(service: Service, args: dict[str, Any], _: Progress | None) -> Any:
    return {"sessions": service.store().sessions()}


def _backups(service: Service, args: dict[str, Any], _: Progress | None) -> Any:
    return shapes.backups_document(service.store().backups(args["session"]))


def _resolve(service: Service, args: dict[str, Any], _: Progress | None) -> Any:
    session, selector = args["session"], args["name"]
    name = service.store().resolve(session, selector, prefix=args["prefix"])
    return {"session": session, "selector": selector, "name": name}


def _get(service: Service, args: dict[str, Any], _: Progress | None) -> Any:
    store = service.store()
    snapshot = store.get(args["session"], args["name"])
    info = snapshot.info
    value = store.get_state(info.session, info.name) if info.kind == "state" else None
    return shapes.show_document(snapshot, value)


def _read(service: Service, args: dict[str, Any], _: Progress | None) -> Any:
    store = service.store()
    session = args["session"]
    name = store.resolve(session, args["name"])
    if service.allowed is not None:
        _snapshot_dir(service, session, name)
    part = store.read_slice(
        session, name, args["path"], offset=args["offset"], length=args["length"]
    )
    return {**shapes.slice_document(session, name, part), "path": args["path"]}


def _diff(service: Service, args: dict[str, Any], _: Progress | None) -> Any:
    store = service.store()
    session, other, target = args["session"], args["other"], args["target"]
    if other is not None and target is not None:
        raise invalid("diff takes other (a second snapshot) or target, not both")
    name = store.resolve(session, args["name"])
    limit = args["limit"]
    if other is not None:
        other = store.resolve(session, other)
        if service.allowed is not None:
            _snapshot_dir(service, session, name)
            _snapshot_dir(service, session, other)
        report = store.diff(session, name, other)
        document = shapes.snapshots_diff_document(session, name, other, report, limit=limit)
    else:
        if target is None:
            target = _snapshot_dir(service, session, name)
        _confine(service, target, "target")
        report = store.diff(session, name, target=target)
        document = shapes.diff_document(session, name, target, report, limit=limit)
    if args["patch"]:
        patch = store.patch(
            session,
            name,
            other,
            target=target,
            context=args["context"],
            max_bytes=args["max_bytes"],
        )
        document["patch"] = shapes.patch_document(patch)
    return document


def _history(service: Service, args: dict[str, Any], _: Progress | None) -> Any:
    versions = service.store().history(args["session"], args["path"])
    return shapes.history_document(args["session"], args["path"], versions)


def _restore(service: Service, args: dict[str, Any], progress: Progress | None) -> Any:
    store = service.store()
    session = args["session"]
    name = store.resolve(session, args["name"])
    limit, unchanged = args.pop("limit"), args.pop("unchanged")
    if args["target"] is None:
        _snapshot_dir(service, session, name)
    else:
        _confine(service, args["target"], "target")
    report = store.restore(**{**args, "name": name}, progress=progress)
    return shapes.restore_document(session, name, report, limit=limit, unchanged=unchanged)


def _undo(service: Service, args: dict[str, Any], progress: Progress | None) -> Any:
    store = service.store()
    limit, unchanged = args.pop("limit"), args.pop("unchanged")
    if service.allowed is not None:
        if args["target"] is not None:
            _confine(service, args["target"], "target")
        else:
            backups = store.backups(args["session"])
            chosen = [b for b in backups if args["backup"] in (None, b.name)][-1:]
            for backup in chosen:
                _confine(service, backup.base_dir, f"the directory of undo backup {backup.name!r}")
                args["backup"] = backup.name
    report = store.undo(**args, progress=progress)
    return shapes.undo_document(args["session"], report, limit=limit, unchanged=unchanged)


def _delete(service: Service, args: dict[str, Any], _: Progress | None) -> Any:
    store = service.store()
    if service.allowed is not None:
        removal.check_delete(store, service.allowed, args["session"], args["name"])
    deleted = store.delete(args["session"], args["name"])
    return shapes.deleted_document(args["session"], args["name"], deleted)


def _delete_session(service: Service, args: dict[str, Any], _: Progress | None) -> Any:
    store = service.store()
    if service.allowed is not None:
        removal.check_delete_session(store, service.allowed, args["session"])
    deleted = store.delete_session(args["session"])
    return shapes.session_deleted_document(args["session"], deleted)


def _sweep(service: Service, args: dict[str, Any], _: Progress | None) -> Any:
    allow_emptying = args.pop("yes")
    store, args = service.store(), {**args, "allow_emptying": allow_emptying}
    if service.allowed is not None:
        report = removal.confined_sweep(store, service.allowed, args)
    else:
        report = store.sweep(**args)
    return shapes.sweep_document(report, args["dry_run"])


def _gc(service: Service, args: dict[str, Any], _: Progress | None) -> Any:
    return shapes.gc_document(service.store().gc(**args), args["dry_run"])


def _verify(service: Service, args: dict[str, Any], progress: Progress | None) -> Any:
    return shapes.verify_document(service.store().verify(**args, progress=progress))


def _get_state(service: Service, args: dict[str, Any], _: Progress | None) -> Any:
    session, name, default = args["session"], args["name"], args["default"]
    value = service.store().get_state(session, name, _ABSENT) if service.store_exists() else _ABSENT
    found = value is not _ABSENT
    return shapes.state_document(session, name, found, value if found else default)


def _put_state(service: Service, args: dict[str, Any], _: Progress | None) -> Any:
    info = service.store(create=True).put_state(**args)
    return shapes.saved_state_document(info, args["value"])


def _watch(service: Service, args: dict[str, Any], _: Progress | None) -> Any:
    base = os.path.abspath(os_path_text(args["base_dir"], "base_dir"))
    _confine(service, base, "base_dir")
    if service.allowed is not None:
        service.allowed.check_all(args["paths"], "path", base)
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
    "gitignore": Param(flag, True),
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
    "resolve": Method(_resolve, {**_SNAPSHOT, "prefix": Param(flag, False)}),
    "get": Method(_get, _SNAPSHOT),
    "read": Method(
        _read,
        {
            **_SNAPSHOT,
            "path": Param(text),
            "offset": Param(non_negative, 0),
            "length": Param(count, None),
        },
    ),
    "diff": Method(
        _diff,
        {
            **_SNAPSHOT,
            "other": Param(optional_text, None),
            "target": Param(optional_text, None),
            "limit": Param(count, None),
            "patch": Param(flag, False),
            "context": Param(non_negative, DEFAULT_CONTEXT),
            "max_bytes": Param(count, DEFAULT_MAX_BYTES),
        },
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
            "limit": Param(count, None),
            "unchanged": Param(flag, True),
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
            "limit": Param(count, None),
            "unchanged": Param(flag, True),
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
            "yes": Param(flag, False),
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
