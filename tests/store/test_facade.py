"""``SnapStore`` exports no internal part: its public names are its methods and three
read-only properties; what is inside is reached through ``snapstore.internals`` only."""

from __future__ import annotations

from pathlib import Path

import pytest

from snapstore import SnapStore
from snapstore.internals import autofold, journals, repository

PROPERTIES = {"root", "read_only", "format_version", "encrypted", "current_key"}


def test_a_store_has_no_public_attribute_but_its_methods_and_properties(
    store: SnapStore,
) -> None:
    assert {name for name in vars(store) if not name.startswith("_")} == set()
    public = {name for name in dir(store) if not name.startswith("_")}
    assert public >= PROPERTIES
    assert all(callable(getattr(store, name)) for name in public - PROPERTIES)


def test_the_properties_are_read_only(store: SnapStore) -> None:
    for name in PROPERTIES:
        with pytest.raises(AttributeError):
            setattr(store, name, None)


def test_the_properties_tell_the_store(store: SnapStore, root: Path) -> None:
    assert store.root == str(root)
    assert store.read_only is False
    assert store.encrypted is False
    assert store.format_version == repository(store).format_major
    assert repr(store) == f"SnapStore({str(root)!r})"


def test_internals_reach_the_parts_of_this_store(store: SnapStore, project: Path) -> None:
    info = store.create("s", "n", ["README.md"], base_dir=project)
    repo = repository(store)
    assert repo.root == store.root
    assert repo.catalog.exists("s", "n") and repo.latest("s") == info
    assert autofold(store).repo is repo
    assert journals(store).pending() == []
