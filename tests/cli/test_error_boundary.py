"""Issue 7, section 2: no traceback for a user's mistake, anywhere.

Every case below was a traceback before; each must now be exit 1 (2 for
usage), one ``error:`` line on stderr, and leave the vault as it was.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from atomic_agents.cli import main

from ..vault.conftest import tree_digest

HUGE = "9" * 5000
DEEP = "[" * 1000 + "]" * 1000


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    out, err = capsys.readouterr()
    return int(exc.value.code or 0), out, err


@pytest.fixture
def vault_root(capsys: pytest.CaptureFixture[str], agents_root: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ATOMIC_AGENTS_EMBEDDER", "hashing")
    monkeypatch.setenv("ATOMIC_AGENTS_ROOT", str(agents_root))
    assert run(capsys, "vault", "init", "bob")[0] == 0
    assert run(capsys, "vault", "new", "bob", "--type", "project", "--topic", "alpha_beta", "--name", "Alpha",
               "--description", "hook", "--source", "me")[0] == 0
    return agents_root


def _clean_failure(code: int, out: str, err: str) -> None:
    assert code == 1, (out, err)
    assert "Traceback" not in out + err
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines and lines[-1].startswith("error: "), err


MISTAKES = {
    "set-not-yaml": ["vault", "update", "bob", "project_alpha_beta.md", "--set", "name=[unclosed"],
    "set-not-a-date": ["vault", "update", "bob", "project_alpha_beta.md", "--set", "captured=2026-02-30"],
    "set-bad-timestamp": ["vault", "update", "bob", "project_alpha_beta.md", "--set", "captured=!!timestamp foo"],
    "set-binary": ["vault", "update", "bob", "project_alpha_beta.md", "--set", "captured=!!binary aGk="],
    "set-alias": ["vault", "update", "bob", "project_alpha_beta.md", "--set", "tags=&a [*a]"],
    "set-huge-int": ["vault", "update", "bob", "project_alpha_beta.md", "--set", f"n={HUGE}"],
    "metadata-deep": ["memory", "remember", "--agent-id", "a", "--user-id", "u", "hi", "--metadata", f'{{"a": {DEEP}}}'],
    "metadata-40-deep": ["memory", "remember", "--agent-id", "a", "--user-id", "u", "hi", "--metadata",
                         '{"a": ' + "[" * 40 + "]" * 40 + "}"],
    "metadata-huge-int": ["memory", "remember", "--agent-id", "a", "--user-id", "u", "hi", "--metadata", f'{{"a": {HUGE}}}'],
    "metadata-int64": ["memory", "remember", "--agent-id", "a", "--user-id", "u", "hi", "--metadata", '{"a": ' + "9" * 30 + "}"],
    "filter-huge-int": ["memory", "list", "--agent-id", "a", "--user-id", "u", "--filter", f"a={HUGE}"],
    "filter-int64": ["memory", "list", "--agent-id", "a", "--user-id", "u", "--filter", "a=" + "9" * 30],
    "filters-deep": ["memory", "list", "--agent-id", "a", "--user-id", "u", "--filters", f'{{"a": {DEEP}}}'],
    "log-entry-deep": ["vault", "log", "add", "bob", "--entry", DEEP],
    "topic-too-long": ["vault", "new", "bob", "--type", "project", "--topic", "a" * 300, "--name", "x",
                       "--description", "d", "--source", "s"],
    "file-too-long": ["vault", "show", "bob", "b" * 300 + ".md"],
}


@pytest.mark.parametrize("args", list(MISTAKES.values()), ids=list(MISTAKES))
def test_user_mistake_is_one_line_and_changes_nothing(capsys: pytest.CaptureFixture[str], vault_root: Path,
                                                      args: list[str]) -> None:
    before = tree_digest(vault_root)
    _clean_failure(*run(capsys, *args))
    assert tree_digest(vault_root) == before


def test_json_error_object_for_a_refused_value(capsys: pytest.CaptureFixture[str], vault_root: Path) -> None:
    code, out, _ = run(capsys, "vault", "update", "bob", "project_alpha_beta.md", "--set", "x=!!binary aGk=", "--json")
    assert code == 1 and json.loads(out)["field"] == "--set"


def test_agents_root_that_is_a_file(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATOMIC_AGENTS_EMBEDDER", "hashing")
    afile = tmp_path / "afile"
    afile.write_text("x")
    for args in (["memory", "list", "--agent-id", "a", "--user-id", "u"], ["vault", "init", "bob"],
                 ["vault", "validate"], ["migrate", "--status"]):
        code, out, err = run(capsys, *args, "--agents-root", str(afile))
        assert code in (0, 1) and "Traceback" not in out + err, (args, out, err)
        if code == 1:
            assert err.strip().splitlines()[-1].startswith("error: ")
    assert afile.read_text() == "x"


def test_os_errors_are_one_line(capsys: pytest.CaptureFixture[str], vault_root: Path,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A read-only vault (EROFS on the first write) is one clean line, exit 1, with or without --json."""
    import errno

    from atomic_agents import _io

    def refuse(*_a: object, **_k: object) -> None:
        raise OSError(errno.EROFS, "Read-only file system", str(vault_root / "bob" / "memory"))

    monkeypatch.setattr(_io.FileLock, "acquire", refuse)
    args = ["vault", "new", "bob", "--type", "project", "--topic", "gamma", "--name", "G", "--description", "d",
            "--source", "s"]
    code, out, err = run(capsys, *args)
    _clean_failure(code, out, err)
    assert "Read-only file system" in err
    code, out, _ = run(capsys, *args, "--json")
    assert code == 1 and json.loads(out)["error"] == "OSError"


def test_argument_that_is_not_utf8_is_a_usage_error(capsys: pytest.CaptureFixture[str], vault_root: Path) -> None:
    # Python hands undecodable argv bytes over as lone surrogates (PEP 383).
    code, out, err = run(capsys, "vault", "show", "bob", "\udcff.md")
    assert code == 2 and "Traceback" not in out + err and "not valid UTF-8" in err
    assert "\udcff" not in err  # never echoed


def test_argument_that_is_not_utf8_from_a_real_process(vault_root: Path, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run([os.fsencode(sys.executable), b"-m", b"atomic_agents.cli", b"vault", b"new", b"bob",
                           b"--type", b"project", b"--topic", b"zeta", b"--name", b"caf\xe9", b"--description", b"d",
                           b"--source", b"s"], capture_output=True, env=env, cwd=tmp_path)
    assert proc.returncode == 2 and b"Traceback" not in proc.stdout + proc.stderr
    assert not (vault_root / "bob" / "memory" / "project_zeta.md").exists()


def test_memory_import_names_the_undecodable_line(capsys: pytest.CaptureFixture[str], vault_root: Path,
                                                  tmp_path: Path) -> None:
    scope = ["--agent-id", "a", "--user-id", "u", "--org-id", "o", "--workspace-id", "w"]
    assert run(capsys, "memory", "remember", *scope, "first memory")[0] == 0
    src = tmp_path / "in.jsonl"
    assert run(capsys, "memory", "export", "-o", str(src))[0] == 0
    line = src.read_bytes().splitlines()[0]
    src.write_bytes(line + b"\n" + line.replace(b"first memory", b"caf\xe9 memory") + b"\n")
    fresh = ["--db", str(tmp_path / "fresh.db")]
    code, out, err = run(capsys, "memory", "import", str(src), *fresh)
    _clean_failure(code, out, err)
    assert f"{src}:2" in err and "UTF-8" in err
    code, out, _ = run(capsys, "memory", "list", *scope, *fresh)
    assert code == 0 and json.loads(out)["memories"] == []  # nothing imported


def test_show_and_list_of_a_vault_with_a_non_utf8_file_name(capsys: pytest.CaptureFixture[str], vault_root: Path) -> None:
    odd = os.path.join(os.fsencode(vault_root / "bob" / "memory"), b"project_caf\xe9.md")
    with open(odd, "wb") as fh:
        fh.write(b"---\nname: x\n---\n")
    code, out, err = run(capsys, "vault", "list", "bob")
    assert code == 0 and "Traceback" not in out + err and "project_alpha_beta.md" in out
    code, out, err = run(capsys, "vault", "validate")
    assert code == 1 and "Traceback" not in out + err


_KEY = "AKIAIOSFODNN7EXAMPLE"  # AWS's documented example key: the secret rules refuse it
_TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


@pytest.mark.parametrize(
    "argv",
    [
        ["memory", "recall", "--limit", _KEY, "q", "--agent-id", "a", "--user-id", "u"],
        ["memory", "recall", f"--limit={_TOKEN}", "q"],
        ["memory", "remember", "--ttl-ms", _TOKEN, "x", "--agent-id", "a", "--user-id", "u"],
        ["memory", "remember", "--durability", _KEY, "x"],
        ["memory", _KEY],
        ["memory", "recall", f"--{_KEY}", "q"],
        ["vault", "list", "--json", f"--x={_KEY}"],
        ["memory", "recall", "-n" + _TOKEN, "q"],
    ],
)
def test_a_usage_error_never_prints_back_a_value_that_looks_like_a_secret(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str]
) -> None:
    monkeypatch.setenv("ATOMIC_AGENTS_DB", str(tmp_path / "m.db"))
    code, out, err = run(capsys, *argv)
    assert code == 2 and "Traceback" not in err
    assert _KEY not in out + err and _TOKEN not in out + err and _TOKEN[4:20] not in out + err
    assert "looks like a secret" in err or "No such option" in err  # the error is still told


def test_a_usage_error_still_names_a_plain_bad_value(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "memory", "recall", "--limit", "abc", "q")
    assert code == 2 and "'abc' is not a valid int" in err


@pytest.mark.parametrize(
    "argv",
    [
        ["memory", "health", _KEY + "\r"],  # click shows control characters escaped (\x0d)
        ["memory", "health", "Authorization:", "Bearer", "deploytokenforthestagingcluster1"],  # one secret over words
    ],
)
def test_a_usage_error_hides_a_secret_however_click_shows_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str]
) -> None:
    monkeypatch.setenv("ATOMIC_AGENTS_DB", str(tmp_path / "m.db"))
    code, out, err = run(capsys, *argv)
    assert code == 2 and "looks like a secret" in err
    assert _KEY not in out + err and "deploytoken" not in out + err


def test_a_closed_stdout_does_nothing_and_says_so(tmp_path: Path) -> None:
    import shlex

    env = {**os.environ, "ATOMIC_AGENTS_EMBEDDER": "hashing", "ATOMIC_AGENTS_DAEMON": "off"}
    line = shlex.join([sys.executable, "-m", "atomic_agents.cli", "memory", "--db", str(tmp_path / "m.db"), "remember",
                       "--agent-id", "a", "--user-id", "u", "a memory"])
    p = subprocess.run(["bash", "-c", f"exec {line} >&-"], capture_output=False, stderr=subprocess.PIPE, env=env,
                       timeout=120)
    assert p.returncode == 1 and p.stderr.decode().strip() == "error: standard output is closed; nothing was done"
    assert not (tmp_path / "m.db").exists()
