"""A sweep deletes only the version of a manifest it judged: a newer one, committed by a
writer whose namespace lease lapsed, is never deleted unseen."""

from __future__ import annotations

from pathlib import Path

from helpers.trees import write_tree

from snapstore import ConcurrentWriteError
from snapstore.internals import repository

from .conftest import Host, store_on


def test_a_sweep_never_deletes_a_version_it_did_not_judge(host: Host, tmp_path: Path) -> None:
    project = tmp_path / "p"
    write_tree(project, {"f.txt": "v1\n"})
    backend = host()
    store = store_on(backend)
    sessions = backend.prefix + "sessions/"

    def manifest_of(name: str) -> tuple[str, bytes]:
        keys = [
            k
            for k, _ in backend.objects.list(sessions)
            if k.rpartition("/")[2].startswith(name + "-")
        ]
        body = backend.client.get_object(Bucket=backend.bucket, Key=keys[0])["Body"].read()
        return keys[0], body

    store.create("s", "a", ["."], base_dir=project)
    key, old = manifest_of("a")
    store.create("s", "b", ["."], base_dir=project)
    (project / "f.txt").write_text("v2\n")
    store.create("s", "a", ["."], base_dir=project)  # "a" again, now the newest
    _, new = manifest_of("a")
    backend.client.put_object(Bucket=backend.bucket, Key=key, Body=old)  # back to the old "a"

    sweeper = store_on(host())
    real_remove = repository(sweeper).catalog.remove

    def remove(name: str, version: object = None, *, durable: bool = True) -> None:
        # a writer whose namespace lease lapsed lands its commit of the newest "a" now,
        # after the sweep judged the old "a" and before it deletes it
        backend.client.put_object(Bucket=backend.bucket, Key=key, Body=new)
        real_remove(name, version, durable=durable)  # type: ignore[arg-type]

    repository(sweeper).catalog.remove = remove  # type: ignore[method-assign]
    try:
        report = sweeper.sweep(keep_last=1)
    except ConcurrentWriteError:
        pass  # what the docs promise: "they remove exactly the version they read"
    else:
        assert report.deleted == [], f"deleted the newest snapshot unseen: {report.deleted}"
    assert store_on(host()).read("s", "a", "f.txt") == b"v2\n"
