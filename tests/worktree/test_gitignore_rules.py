"""git's ignore rules in checkpoints: honoured by default, the same decisions as git's (every
``.gitignore`` from the work tree's top down, ``.git/info/exclude``, negations, a path in an
ignored directory staying ignored), the rules of a directory kept inside it whatever its name,
and a restore leaving alone what they ignore."""

from __future__ import annotations

import os
import random
import subprocess
from pathlib import Path

import pytest
from helpers.trees import write_tree

from snapstore import SnapStore
from snapstore.errors import InvalidValueError
from snapstore.worktree.excludes import Matcher, escape, parse_patterns, rebase
from snapstore.worktree.gitrules import find_repository, reroot

HOSTILE_DIRS = ["x*", "[ab]", "!keep", "#tmp", "q?", "a]b", " lead", "trail ", "sp ace", "ünï"]
HOSTILE_DIRS += ["é*"]
"""Directory names that read as glob characters, negations, comments or blanks in a pattern."""

DECOYS = ["xyz", "a", "b", "keep", "tmp", "qq", "ab", "lead", "trail", "ünïx", "éé"]
"""Directories an unescaped rule of a hostile one would reach."""


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout


def init_repo(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git("init", "-q", ".", cwd=path)
    return path


def recorded(store: SnapStore, name: str) -> set[str]:
    return {entry.path for entry in store.get("s", name).entries}


def recorded_files(store: SnapStore, name: str) -> set[str]:
    return {e.path for e in store.get("s", name).entries if e.kind in ("file", "symlink")}


@pytest.mark.parametrize("directory", HOSTILE_DIRS)
def test_the_rules_of_a_directory_with_a_hostile_name_stay_in_it(tmp_path: Path, directory: str):
    """A rule of ``x*/.gitignore`` was rebased as ``x*/**/secret`` and matched
    ``xyz/secret``; ``[ab]`` became a character class, ``!keep`` a negation, ``#tmp`` a
    comment: decoys were left out and never restored, and the directory's own ignored files
    were recorded and removed by a restore."""
    base = tmp_path / "p"
    spec: dict[str, str] = {f"{directory}/.gitignore": "secret\nprod.env\n"}
    spec[f"{directory}/secret"] = "ignored"
    spec[f"{directory}/kept.txt"] = "kept"
    for decoy in DECOYS:
        spec[f"{decoy}/secret"] = f"decoy {decoy}"
    write_tree(base, spec)
    store = SnapStore(tmp_path / "store")
    store.create("s", "n", ["."], base_dir=base)
    paths = recorded(store, "n")
    assert f"{directory}/secret" not in paths
    assert f"{directory}/kept.txt" in paths
    assert {f"{decoy}/secret" for decoy in DECOYS} <= paths
    for decoy in DECOYS:
        (base / decoy / "secret").write_text("edited")
    (base / directory / "prod.env").write_text("made after the checkpoint, ignored")
    store.restore("s", "n")
    assert (base / directory / "prod.env").read_text() == "made after the checkpoint, ignored"
    assert (base / directory / "secret").read_text() == "ignored"
    for decoy in DECOYS:
        assert (base / decoy / "secret").read_text() == f"decoy {decoy}"


@pytest.mark.parametrize("directory", [*HOSTILE_DIRS, "back\\slash", "a/[b]/c*"])
def test_a_rebased_rule_matches_below_its_own_directory_only(directory: str):
    for pattern, inside in [("secret", "deep/secret"), ("/top", "top"), ("d/", "x/d/")]:
        rebased = rebase(pattern, directory)
        matcher = Matcher([rebased])
        assert matcher(f"{directory}/{inside.rstrip('/')}", inside.endswith("/")), rebased
        for decoy in [*DECOYS, "x", "c", "ba"]:
            assert not matcher(f"{decoy}/{inside.rstrip('/')}", inside.endswith("/")), rebased
    assert rebase("!keep", directory).startswith("!" + escape(directory) + "/")


def test_ignore_file_lines_are_read_as_git_reads_them():
    data = b"\xef\xbb\xbf*.log\n caf\xe9\n lead\ntrail\\ \n# c\n\\#lit\n\n!neg\r\n"
    assert parse_patterns(data) == ["*.log", "\\ lead", "trail\\ ", "\\#lit", "!neg"]


def test_a_rule_of_the_repository_above_is_rewritten_for_the_base():
    assert reroot("*.log", ["src"]) == (["*.log"], [])
    assert reroot("/build", ["src"]) == ([], [])
    assert reroot("src/gen/", ["src"]) == (["/gen/"], [])
    assert reroot("s*/gen", ["src"]) == (["/gen"], [])
    assert reroot("a/**/b/c", ["a", "b"]) == (["/**/b/c", "/c"], [])
    assert reroot("a/**", ["a"]) == (["/**"], [])
    assert reroot("a/**", ["a", "b"]) == (["/**"], [2])
    assert reroot("!src/keep", ["src"]) == (["!/keep"], [])
    assert reroot("src", ["src"]) == (["src"], [1])
    assert reroot("\\[ab\\]/x", ["[ab]"]) == (["/x"], [])
    assert reroot("\\[ab\\]/x", ["a"]) == ([], [])
    assert reroot("a/***/c", ["a", "b"]) == (["/**/c"], [])
    assert reroot("***/src", ["src"]) == (["***/src"], [1])


# ------------------------------------------------------------------ against git itself

ROOT_RULES = """\
*.log
!keep.log
/build/
docs/*.tmp
**/cache/
x*
!x1
# a comment
\\#lit
\\!bang
trail\\ {TRAILING}
[ab]*.dat
sub/**/deep.txt
gen/
!gen/back.txt
""".replace("{TRAILING}", "")

NESTED_RULES = "secret\n!secret.keep\n*.bak\n/anchored\nin/*.z\n"

HOSTILE_TREE_DIRS = ["g[1]", "st*r", "q?", "!neg", "#hash", "sp ace", "dir ", "ünï", "nested/inner"]

FILES = [
    "a.log", "keep.log", "build/x.o", "src/build/y.o", "docs/a.tmp", "docs/deep/b.tmp",
    "cache/c", "src/cache/d", "x2", "x1", "#lit", "!bang", "trail ", "a1.dat", "c1.dat",
    "sub/p/q/deep.txt", "sub/deep.txt", "gen/out.c", "gen/back.txt", "plain.txt",
    "caf\ufffd", "leaf.info", " lead", "secret", "in/x.z",
]  # fmt: skip

PER_DIR_FILES = [
    "secret", "secret.keep", "a.bak", "anchored", "deeper/anchored", "in/a.z", "in/b/c.z",
    "ok.txt", "deeper/secret", "a.log", "keep.log", "x9", "cache/e", "gen/f.c", "gen/back.txt",
    "a2.dat", "z.info", "build/o", "docs/c.tmp",
]  # fmt: skip


def hostile_repository(tmp_path: Path) -> Path:
    """A work tree with hostile directory names, nested .gitignore files with negations, an
    info/exclude, a symlinked .gitignore (git does not read it) and one that is not UTF-8."""
    top = init_repo(tmp_path / "repo")
    spec: dict[str, str | bytes] = {".gitignore": ROOT_RULES}
    spec.update({path: f"file {path}" for path in FILES})
    for directory in HOSTILE_TREE_DIRS:
        spec[f"{directory}/.gitignore"] = NESTED_RULES
        spec.update({f"{directory}/{path}": f"file {path}" for path in PER_DIR_FILES})
    spec["linked/.gitignore"] = "->../rules-elsewhere"
    spec["rules-elsewhere"] = "*.txt\n"
    spec["linked/ok.txt"] = "a symlinked .gitignore is not read"
    spec["latin/.gitignore"] = b"caf\xe9\n*.old\n"
    spec["latin/caf\ufffd"] = "not matched by a line that is not UTF-8"
    spec["latin/x.old"] = "ignored"
    write_tree(top, spec)
    (top / ".git" / "info").mkdir(exist_ok=True)
    (top / ".git" / "info" / "exclude").write_text("*.info\n")
    return top


def git_would_add(directory: Path) -> set[str]:
    """What ``git add -A`` would add in ``directory`` (nothing is tracked), relative to it."""
    listed = git("ls-files", "--others", "--exclude-standard", "-z", cwd=directory)
    return {path for path in listed.split("\0") if path}


def git_ignores(top: Path, paths: list[str]) -> set[str]:
    """The ``paths`` (relative to ``top``) that ``git check-ignore`` says are ignored."""
    found = subprocess.run(
        ["git", "check-ignore", "--no-index", "--stdin", "-z"],
        cwd=top,
        input="\0".join(paths) + "\0",
        capture_output=True,
        text=True,
    )
    assert found.returncode in (0, 1), found.stderr
    return {path for path in found.stdout.split("\0") if path}


def every_path(top: Path) -> list[tuple[str, bool]]:
    found = []
    for directory, dirnames, filenames in os.walk(top):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in [*dirnames, *filenames]:
            path = os.path.relpath(os.path.join(directory, name), top)
            found.append((path, name in dirnames))
    return found


def test_a_checkpoint_records_what_git_would_add(tmp_path: Path):
    top = hostile_repository(tmp_path)
    store = SnapStore(tmp_path / "store")
    store.create("s", "n", ["."], base_dir=top)
    assert recorded_files(store, "n") == git_would_add(top)


@pytest.mark.parametrize("sub", ["nested", "sp ace", "g[1]"])
def test_a_checkpoint_below_the_top_records_what_git_would_add_there(tmp_path: Path, sub: str):
    """The rules of the directories above the base (and info/exclude) apply below it."""
    top = hostile_repository(tmp_path)
    store = SnapStore(tmp_path / "store")
    store.create("s", "n", ["."], base_dir=top / sub)
    assert recorded_files(store, "n") == git_would_add(top / sub)
    store.create("s", "paths", [f"{sub}"], base_dir=top)
    assert recorded_files(store, "paths") == {f"{sub}/{p}" for p in git_would_add(top / sub)}


def test_the_recorded_rules_decide_every_path_as_git_check_ignore_does(tmp_path: Path):
    """What a restore leaves alone (the recorded rules) is what git ignores."""
    top = hostile_repository(tmp_path)
    store = SnapStore(tmp_path / "store")
    info = store.create("s", "n", ["."], base_dir=top)
    matcher = Matcher(info.excludes)
    paths = every_path(top)
    ignored = git_ignores(top, [path for path, _ in paths])
    decided = {path for path, is_dir in paths if matcher.rule_leaving_out(path, is_dir)}
    assert decided == ignored


# ------------------------------------------------------------------ the repository above


def test_a_checkpoint_of_a_subdirectory_honours_the_top_gitignore(tmp_path: Path):
    """A checkpoint of ``src`` read no rule above it: ``*.log`` files were recorded, and a
    restore removed new ones."""
    top = init_repo(tmp_path / "repo")
    write_tree(top, {".gitignore": "*.log\n", "src/a.py": "a", "src/old.log": "old"})
    store = SnapStore(tmp_path / "store")
    for base, paths in [(top, ["src"]), (top / "src", ["."]), (top / "src", ["a.py"])]:
        info = store.create("s", "n", paths, base_dir=base)
        assert not any(path.endswith(".log") for path in recorded(store, "n")), info.excludes
        new_log = base / ("src" if base == top else "") / "new.log"
        new_log.write_text("written after the checkpoint")
        store.restore("s", "n")
        assert new_log.exists()
        new_log.unlink()


def test_info_exclude_of_the_repository_and_of_a_linked_worktree_apply(tmp_path: Path):
    top = init_repo(tmp_path / "repo")
    write_tree(top, {"a.txt": "a", "b.secret": "b"})
    identity = ["-c", "user.name=t", "-c", "user.email=t@t"]
    git(*identity, "commit", "-q", "--allow-empty", "-m", "x", cwd=top)
    (top / ".git" / "info").mkdir(exist_ok=True)
    (top / ".git" / "info" / "exclude").write_text("*.secret\n")
    git("worktree", "add", "-q", str(tmp_path / "wt"), cwd=top)
    worktree = tmp_path / "wt"
    write_tree(worktree, {"c.txt": "c", "d.secret": "d"})
    found = find_repository(str(worktree))
    assert found is not None and found.top == str(worktree)
    store = SnapStore(tmp_path / "store")
    store.create("s", "main", ["."], base_dir=top)
    store.create("s", "wt", ["."], base_dir=worktree)
    assert "b.secret" not in recorded(store, "main") and "a.txt" in recorded(store, "main")
    assert "d.secret" not in recorded(store, "wt") and "c.txt" in recorded(store, "wt")
    assert recorded_files(store, "wt") == git_would_add(worktree)


def test_a_base_directory_git_ignores_is_refused(tmp_path: Path):
    top = init_repo(tmp_path / "repo")
    write_tree(top, {".gitignore": "scratch/\n", "scratch/a.txt": "a"})
    store = SnapStore(tmp_path / "store")
    with pytest.raises(InvalidValueError, match=r"ignored by the rule 'scratch/'.*gitignore=False"):
        store.create("s", "n", ["."], base_dir=top / "scratch")
    info = store.create("s", "n", ["."], base_dir=top / "scratch", gitignore=False)
    assert info.file_count == 1


def test_an_ignored_path_asked_for_is_refused_unless_gitignore_is_off(tmp_path: Path):
    top = init_repo(tmp_path / "repo")
    write_tree(top, {".gitignore": ".env\nbuild/\n!build/keep\n", ".env": "k", "build/keep": "x"})
    store = SnapStore(tmp_path / "store")
    for path, rule in [(".env", ".env"), ("build/keep", "build/")]:
        with pytest.raises(InvalidValueError, match=f"rule {rule!r}.*gitignore=False"):
            store.create("s", "n", [path], base_dir=top)
        store.create("s", "n", [path], base_dir=top, gitignore=False)
        assert path in recorded(store, "n")


def test_gitignore_false_records_everything_and_restores_it(tmp_path: Path):
    top = init_repo(tmp_path / "repo")
    write_tree(top, {".gitignore": "*.log\n", "a.log": "log", "a.txt": "a"})
    store = SnapStore(tmp_path / "store")
    info = store.create("s", "n", ["."], base_dir=top, gitignore=False)
    assert "a.log" in recorded(store, "n") and "*.log" not in info.excludes
    (top / "b.log").write_text("new")
    store.restore("s", "n")
    assert not (top / "b.log").exists()


def test_the_fixed_rules_win_over_gitignore_negations(tmp_path: Path):
    """``--exclude`` and ``.snapstoreignore`` are the caller's: a ``.gitignore`` negation does
    not bring back what they leave out (git's command-line patterns win the same way)."""
    top = init_repo(tmp_path / "repo")
    write_tree(top, {".gitignore": "!*.log\n!.git\n", "a.log": "log", "a.txt": "a"})
    store = SnapStore(tmp_path / "store")
    info = store.create("s", "n", ["."], base_dir=top, exclude=["*.log"])
    assert recorded(store, "n") == {".gitignore", "a.txt"}
    assert info.excludes[-5:] == (".git", ".hg", ".svn", ".jj", "*.log")


def test_the_git_directory_is_never_followed_as_a_symlink(tmp_path: Path):
    elsewhere = init_repo(tmp_path / "elsewhere")
    (elsewhere / ".git" / "info").mkdir(exist_ok=True)
    (elsewhere / ".git" / "info" / "exclude").write_text("*\n")
    base = tmp_path / "p"
    write_tree(base, {"a.txt": "a"})
    (base / ".git").symlink_to(elsewhere / ".git")
    assert find_repository(str(base)) is None
    store = SnapStore(tmp_path / "store")
    store.create("s", "n", ["."], base_dir=base)
    assert "a.txt" in recorded(store, "n")


TRICKY = {
    "a directory rule after its parent's re-inclusion": ("P/\nA/\n!A/\n", ["A/P/f", "A/g"]),
    "a whitelist": ("*\n!*/\n!*.txt\n", ["a.txt", "b.md", "d/c.txt", "d/e.md"]),
    "re-included one level down": (
        "/*\n!/foo\n/foo/*\n!/foo/bar\n",
        ["foo/bar/x", "foo/baz/y", "top.txt"],
    ),
    "inside a directory, then back": ("**/tmp/**\n!**/tmp/keep\n", ["a/tmp/x", "a/tmp/keep"]),
    "character classes": (
        "[[:digit:]]*.log\n[!a]b\n\\[x]\n[a-c]?.d\na[b\n",
        ["1a.log", "a.log", "ab", "cb", "[x]", "x", "b1.d", "d1.d", "a[b"],
    ),
    "directories below": ("doc/**/\n", ["doc/a/f", "doc/f"]),
    "any depth between": ("a/**/b\n", ["a/b", "a/x/b", "a/x/y/b/c", "b"]),
    "a re-included file in an ignored directory": ("build/\n!build/keep\n", ["build/keep"]),
    "a reversed range matches its first character": (
        "[z-ab]x\n*.[!z-a]\n",
        ["ax", "bx", "zx", "f.c", "f.z"],
    ),
    "three stars alone in a segment": (
        "a/***/b\n***/foo\n",
        ["a/b", "a/x/y/b", "foo", "d/e/foo", "d/fooo"],
    ),
}


@pytest.mark.parametrize("case", sorted(TRICKY))
def test_tricky_rules_decide_as_git_does(tmp_path: Path, case: str):
    """pathspec's GitIgnoreSpec keeps ``A/P`` with ``P/``, ``A/``, ``!A/``, which git ignores:
    snapstore decides with git's rule (the last pattern matching the path itself)."""
    rules, files = TRICKY[case]
    top = init_repo(tmp_path / "repo")
    write_tree(top, {".gitignore": rules, **{path: path for path in files}})
    store = SnapStore(tmp_path / "store")
    info = store.create("s", "n", ["."], base_dir=top)
    assert recorded_files(store, "n") == git_would_add(top)
    matcher = Matcher(info.excludes)
    paths = every_path(top)
    ignored = git_ignores(top, [path for path, _ in paths])
    assert {path for path, is_dir in paths if matcher.rule_leaving_out(path, is_dir)} == ignored


def test_an_exclude_negation_brings_back_one_ignored_file(tmp_path: Path):
    """The caller's patterns come after git's and win: ``!.env`` records ``.env`` (and a
    restore puts it back) while the other rules still apply."""
    top = init_repo(tmp_path / "repo")
    write_tree(top, {".gitignore": ".env\n*.log\n", ".env": "key", "a.log": "log"})
    store = SnapStore(tmp_path / "store")
    store.create("s", "n", [".env"], base_dir=top, exclude=["!.env"])
    store.create("s", "all", ["."], base_dir=top, exclude=["!.env"])
    assert recorded(store, "all") == {".gitignore", ".env"}
    (top / ".env").write_text("changed")
    store.restore("s", "all")
    assert (top / ".env").read_text() == "key" and (top / "a.log").exists()


GLOB_PIECES = ["a", "b", "c", "*", "?", "[ab]", "[!a]", "[a-b]", "[[:alpha:]]", "**", "/"]
GLOB_PIECES += ["\\*", "!", ".", " "]
NAMES = ["a", "b", "c", "ab", "ba", "a.b", "*", "aa", "a b", "!a", "[ab]"]


@pytest.mark.parametrize("seed", range(4))
def test_random_rules_decide_as_git_check_ignore(tmp_path: Path, seed: int):
    """Random patterns of glob pieces against random paths: the same decisions as git."""
    rng = random.Random(seed)
    for round_ in range(10):
        lines = []
        for _ in range(rng.randint(1, 6)):
            pattern = "".join(rng.choice(GLOB_PIECES) for _ in range(rng.randint(1, 5)))
            lines.append(("!" if rng.random() < 0.2 else "") + pattern)
        paths = {"/".join(rng.choice(NAMES) for _ in range(rng.randint(1, 3))) for _ in range(40)}
        top = init_repo(tmp_path / f"r{round_}")
        data = ("\n".join(lines) + "\n").encode()
        (top / ".gitignore").write_bytes(data)
        matcher = Matcher(parse_patterns(data))
        decided = {path for path in paths if matcher.rule_leaving_out(path, False)}
        assert decided == git_ignores(top, sorted(paths)), lines
