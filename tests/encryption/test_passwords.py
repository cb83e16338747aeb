"""Passwords of an encrypted store through the command line: where they are read from (never
an argument), what a wrong or missing one does (exit code 16), and the key commands."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers.cli import Cli

PASSWORD_EXIT = 16


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    made = Cli(tmp_path)
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "a.txt").write_text("alpha")
    result = made.run("init", "--encrypt", env={"SNAPSTORE_PASSWORD": "first"})
    assert result.code == 0, result.stderr
    created = made.run(
        "create", "s", "--base", "work", "-n", "n1", ".", env={"SNAPSTORE_PASSWORD": "first"}
    )
    assert created.code == 0, created.stderr
    return made


def _lists(cli: Cli, *args: str, env: dict[str, str] | None = None) -> int:
    result = cli.run(*args, "--json", "list", env=env)
    if result.code == 0:
        assert [item["name"] for item in result.json()["snapshots"]] == ["n1"]
    return result.code


def test_every_password_source_opens_the_store(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "pw").write_text("first\n")
    (tmp_path / "bad").write_text("second\n")
    assert _lists(cli, env={"SNAPSTORE_PASSWORD": "first"}) == 0
    assert _lists(cli, env={"SNAPSTORE_PASSWORD_FILE": str(tmp_path / "pw")}) == 0
    assert _lists(cli, "--password-file", str(tmp_path / "pw")) == 0
    command = f"{sys.executable} -c 'print(\"first\")'"
    assert _lists(cli, "--password-command", command) == 0
    # The command line's source comes first: a right one wins over a wrong environment.
    env = {"SNAPSTORE_PASSWORD": "second", "SNAPSTORE_PASSWORD_FILE": str(tmp_path / "bad")}
    assert _lists(cli, "--password-file", str(tmp_path / "pw"), env=env) == 0
    assert _lists(cli, env=env) == PASSWORD_EXIT


def test_no_password_option_exists(cli: Cli) -> None:
    result = cli.run("--password", "first", "list")
    assert result.code == 2
    assert "No such option" in result.stderr


@pytest.mark.parametrize(
    "env", [{}, {"SNAPSTORE_PASSWORD": "wrong"}], ids=["no-password", "wrong-password"]
)
def test_a_missing_or_wrong_password_is_exit_16_and_one_line(cli: Cli, env: dict[str, str]) -> None:
    result = cli.run("--json", "list", env=env)
    assert result.code == PASSWORD_EXIT
    assert result.json()["error"]["type"] in ("PasswordRequiredError", "WrongPasswordError")
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr


def test_a_failing_password_source_is_exit_16(cli: Cli, tmp_path: Path) -> None:
    assert cli.run("--password-file", str(tmp_path / "none"), "list").code == PASSWORD_EXIT
    assert cli.run("--password-command", "false", "list").code == PASSWORD_EXIT
    (tmp_path / "empty").write_text("\n")
    assert cli.run("--password-file", str(tmp_path / "empty"), "list").code == PASSWORD_EXIT


def test_add_a_second_password_then_remove_the_first(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "new").write_text("second\n")
    first, second = {"SNAPSTORE_PASSWORD": "first"}, {"SNAPSTORE_PASSWORD": "second"}
    added = cli.run("--json", "key", "add", "--new-password-file", str(tmp_path / "new"), env=first)
    assert added.code == 0, added.stderr
    new_id = added.json()["id"]
    keys = cli.run("--json", "key", "list", env=second).json()["keys"]
    assert {key["id"] for key in keys} >= {new_id} and len(keys) == 2
    old_id = next(key["id"] for key in keys if key["id"] != new_id)
    assert [key["current"] for key in keys if key["id"] == new_id] == [True]
    # A password cannot remove its own key (the store would lock this user out).
    assert cli.run("key", "remove", new_id, env=second).code != 0
    removed = cli.run("key", "remove", old_id, env=second)
    assert removed.code == 0, removed.stderr
    assert _lists(cli, env=first) == PASSWORD_EXIT
    assert _lists(cli, env=second) == 0
    assert cli.run("key", "remove", old_id, env=second).code == 14  # gone already
    assert [key["id"] for key in cli.run("--json", "key", "list", env=second).json()["keys"]] == [
        new_id
    ]


def test_passwd_replaces_the_password_given(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "new").write_text("changed\n")
    result = cli.run(
        "key", "passwd", "--new-password-file", str(tmp_path / "new"),
        env={"SNAPSTORE_PASSWORD": "first"},
    )  # fmt: skip
    assert result.code == 0, result.stderr
    assert _lists(cli, env={"SNAPSTORE_PASSWORD": "first"}) == PASSWORD_EXIT
    assert _lists(cli, env={"SNAPSTORE_PASSWORD": "changed"}) == 0
    restored = cli.run("cat", "s", "n1", "a.txt", env={"SNAPSTORE_PASSWORD": "changed"})
    assert restored.code == 0 and restored.stdout == "alpha"


def test_an_unencrypted_store_stays_as_it_is(tmp_path: Path) -> None:
    cli = Cli(tmp_path)
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "a.txt").write_text("alpha")
    assert cli.run("init").code == 0
    assert cli.run("create", "s", "--base", "work", "-n", "n1", ".").code == 0
    # A password given for it is refused: whoever gives one counts on encryption.
    refused = cli.run("list", env={"SNAPSTORE_PASSWORD": "first"})
    assert refused.code == 1 and "not encrypted" in refused.stderr
    assert _lists(cli) == 0
    again = cli.run("init", "--encrypt", env={"SNAPSTORE_PASSWORD": "first"})
    assert again.code != 0 and "not encrypted" in again.stderr
    assert cli.run("key", "list").code == 2
    assert not (cli.root / "keys").exists()


def test_init_encrypt_needs_a_password(tmp_path: Path) -> None:
    cli = Cli(tmp_path)
    result = cli.run("init", "--encrypt")
    assert result.code == 2
    assert not cli.root.exists()


def test_the_library_takes_a_key_file(tmp_path: Path) -> None:
    from snapstore import SnapStore
    from snapstore.errors import PasswordRequiredError, WrongPasswordError

    (tmp_path / "key").write_text("from a file\n")
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "a.txt").write_text("alpha")
    with SnapStore(tmp_path / "store", key_file=tmp_path / "key", encrypt=True) as store:
        store.create("s", "n", base_dir=str(tmp_path / "work"), paths=["."])
    with SnapStore(tmp_path / "store", password="from a file") as store:
        assert store.read("s", "n", "a.txt") == b"alpha"
    with pytest.raises(WrongPasswordError):
        SnapStore(tmp_path / "store", password="from a file\n")
    with pytest.raises(PasswordRequiredError):
        SnapStore(tmp_path / "store")


def test_processes_making_one_encrypted_store_at_once_share_its_key(tmp_path: Path) -> None:
    """Several bridges started at once on a new root, with the same password: one makes
    the store's key, the others open it; every snapshot any of them took opens."""
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "a.txt").write_text("alpha")
    cli = Cli(tmp_path)
    env = {"SNAPSTORE_PASSWORD": "shared"}
    import subprocess

    from helpers.cli import cli_env

    processes = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "snapstore",
                "--root",
                str(cli.root),
                "create",
                f"s{number}",
                "--base",
                "work",
                "-n",
                "n",
                ".",
            ],
            cwd=tmp_path,
            env=cli_env(env),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for number in range(4)
    ]
    for process in processes:
        assert process.wait(120) == 0, process.stderr.read() if process.stderr else ""
    keys = cli.run("--json", "key", "list", env=env).json()["keys"]
    assert len(keys) == 1
    listed = cli.run("--json", "list", env=env).json()["snapshots"]
    assert sorted(item["session"] for item in listed) == ["s0", "s1", "s2", "s3"]


def test_a_password_costs_one_key_derivation_per_key_not_per_object(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from snapstore import SnapStore
    from snapstore.backend import keyring
    from snapstore.errors import WrongPasswordError

    (tmp_path / "work").mkdir()
    for number in range(20):
        (tmp_path / "work" / f"f{number}.txt").write_text(f"file {number}")
    with SnapStore(tmp_path / "store", password="right", encrypt=True) as store:
        for number in range(5):
            store.create("s", f"n{number}", base_dir=str(tmp_path / "work"), paths=["."])
    derivations = 0
    real_derive = keyring.KdfParams.derive

    def counted(self: keyring.KdfParams, password: bytes, salt: bytes) -> bytes:
        nonlocal derivations
        derivations += 1
        return real_derive(self, password, salt)

    monkeypatch.setattr(keyring.KdfParams, "derive", counted)
    with pytest.raises(WrongPasswordError):
        SnapStore(tmp_path / "store", password="wrong")
    assert derivations == 1
    with SnapStore(tmp_path / "store", password="right") as store:
        for number in range(5):
            store.restore("s", f"n{number}", target=str(tmp_path / f"out{number}"))
    assert derivations == 2


def test_the_library_manages_passwords(tmp_path: Path) -> None:
    from snapstore import EncryptionError, KeyNotFoundError, SnapStore, WrongPasswordError

    with SnapStore(tmp_path / "plain") as plain:
        assert not plain.encrypted
        with pytest.raises(EncryptionError):
            plain.list_keys()
    with SnapStore(tmp_path / "store", password="one", encrypt=True) as store:
        assert store.encrypted
        first = store.current_key
        second = store.add_password("two")
        assert {key.id for key in store.list_keys()} == {first, second}
        with pytest.raises(EncryptionError):
            store.remove_key(first)  # the key this store was opened with
        with pytest.raises(KeyNotFoundError):
            store.remove_key("0" * 16)
    with SnapStore(tmp_path / "store", password="two") as store:
        assert store.current_key == second
        store.remove_key(first)
        new, removed = store.change_password("three")
        assert removed == second and [key.id for key in store.list_keys()] == [new]
    for gone in ("one", "two"):
        with pytest.raises(WrongPasswordError):
            SnapStore(tmp_path / "store", password=gone)
    with SnapStore(tmp_path / "store", password="three") as store:
        assert store.current_key == new
