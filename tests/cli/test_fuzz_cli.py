"""Issue 7, section 2: a property-based fuzz test over the CLI (vault, memory, migrate, log).

For any generated command line, run in-process through the real entry point
(:func:`atomic_agents.cli.main`, the one error boundary) against a copy of a
sample vault (with or without hostile files: a Latin-1 note, an alias bomb,
bad tags):

* the exit code is 0, 1 or 2;
* no ``Traceback`` appears on stdout or stderr;
* when the command fails (exit 1 or 2), nothing on disk changed: every file's
  bytes are as before. Regeneratable files are left out of the comparison: the
  parse cache (``_cache/``), lock files, SQLite's ``-wal``/``-shm`` side files,
  and, for ``migrate`` only, ``_migrations/`` (the spec requires an audit event
  for every run, refused ones included).

``FUZZ_EXAMPLES`` sets the number of examples (default 150; CI keeps it small).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from atomic_agents.cli import main

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "150"))

HUGE = "9" * 5000
DEEP = "[" * 1200 + "]" * 1200


def _bomb() -> str:
    lines = ['l0: &l0 ["x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    lines += [f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, 9)]
    return "\n".join(lines) + "\n"


def _build_template(root: Path, *, hostile: bool) -> None:
    env = {"ATOMIC_AGENTS_ROOT": str(root), "ATOMIC_AGENTS_EMBEDDER": "hashing"}
    with _env(env):
        for args in (
            ["vault", "init", "bob"],
            ["vault", "new", "bob", "--type", "project", "--topic", "alpha_beta", "--name", "Alpha",
             "--description", "when alpha matters", "--source", "me"],
            ["vault", "new", "bob", "--type", "feedback", "--topic", "gamma_delta", "--name", "Gamma",
             "--description", "when gamma matters", "--source", "me", "--tag", "x"],
            ["vault", "new", "bob", "--type", "wiki", "--topic", "omega", "--name", "Omega", "--description", "d",
             "--source", "raw/omega.md"],
            ["vault", "log", "add", "bob", "--trigger", "cron", "--model", "m", "--input-tokens", "1",
             "--output-tokens", "2", "--status", "ok", "--summary", "fine", "--ts", "2026-05-06T09:00:00+00:00"],
            ["vault", "journal", "add", "bob", "--happened", "a thing happened", "--date", "2026-05-06"],
            ["memory", "remember", "--agent-id", "bob", "--user-id", "ann", "the deploy went green",
             "--metadata", '{"goal_id": "g1", "n": 3}'],
        ):
            code, out, err = _run(args)
            assert code == 0, (args, out, err)
    if hostile:
        mem = root / "eve" / "memory"
        mem.mkdir(parents=True)
        (mem / "feedback_latin.md").write_bytes(b"---\nname: caf\xe9\ntype: feedback\n---\n")
        (mem / "feedback_bomb.md").write_text("---\n" + _bomb() + "---\n")
        (mem / "feedback_tags.md").write_text("---\nname: !!binary aGk=\nn: !!int abc\n---\n")
        (mem / "feedback_huge.md").write_text(f"---\nname: x\nn: {HUGE}\n---\n")
        log = root / "bob" / "log" / "2026-05"
        with open(log / "2026-05-06.jsonl", "ab") as fh:
            fh.write(b'{"summary": "caf\xe9"}\n')
        (root / "import.jsonl").write_bytes(b'{"id": "x"}\n\xff\xfe\n')
    # a memory export to import (good in the clean vault, bad bytes in the hostile one)
    with _env(env):
        _run(["memory", "export", "-o", str(root / "export.jsonl")])


@contextlib.contextmanager
def _env(values: dict[str, str]) -> Iterator[None]:
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _run(args: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(args)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return code, out.getvalue(), err.getvalue()


def _snapshot(root: Path, *, migrate: bool) -> dict[str, str]:
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        parts = [] if rel_dir == "." else rel_dir.split(os.sep)
        if parts[:1] == ["_cache"] or (migrate and parts[:1] == ["_migrations"]):
            dirnames[:] = []
            continue
        for name in filenames:
            if name.endswith((".lock", "-wal", "-shm", "-journal")):
                continue
            p = os.path.join(dirpath, name)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, root)] = hashlib.sha256(fh.read()).hexdigest()
    return out


@pytest.fixture(scope="module")
def templates(tmp_path_factory: pytest.TempPathFactory) -> dict[bool, Path]:
    made = {}
    for hostile in (False, True):
        root = tmp_path_factory.mktemp("fuzz_template") / "agents"
        root.mkdir()
        _build_template(root, hostile=hostile)
        made[hostile] = root
    return made


# -- what a user might type ----------------------------------------------------------------------
_text = st.one_of(
    st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=30),
    st.text(st.characters(blacklist_characters="\x00"), max_size=8),  # lone surrogates: argv bytes not UTF-8
    st.sampled_from(["", " ", "-", "--", "..", "../x", "/etc/passwd", "a" * 300, "x\ny", "caf\udce9", "`tick`"]),
)
_yamlish = st.one_of(_text, st.sampled_from([
    "[unclosed", "2026-02-30", "!!timestamp foo", "!!binary aGk=", "&a [*a]", HUGE, "!!int x", "{a: 1}",
    "2026-05-06", "true", "null", "[a, b]", "!!python/object:os.system x", "? a", "- a\n - b"]))
_jsonish = st.one_of(_text, st.sampled_from([
    "{}", '{"a": 1}', '{"a": null}', f'{{"a": {HUGE}}}', f'{{"a": {DEEP}}}', '{"a": ' + "9" * 30 + "}",
    "[1, 2]", '{"a": {"b": {"c": [1, 2, {"d": "e"}]}}}', '{"a": NaN}', '"x"', DEEP]))
_note = st.sampled_from(["project_alpha_beta.md", "feedback_gamma_delta.md", "project_alpha_beta", "nope.md",
                         "INDEX.md", "../../etc/passwd", ".agent.lock", "b" * 300 + ".md", "omega.md"])
_agent = st.sampled_from(["bob", "eve", "Bob", "nobody", "../bob", "a" * 300, "_cache", "bob/memory"])
_date = st.one_of(st.sampled_from(["2026-05-06", "2026-02-30", "20260506", "yesterday", "9999-99-99", ""]), _text)
_key = st.sampled_from(["name", "description", "type", "captured", "confidence", "pinned", "tags", "sources",
                        "superseded_by", "schema_version", "x", "", "a b", "na\udce9me"])
_set = st.builds(lambda k, v: f"{k}={v}", _key, _yamlish) | _text
_scope = st.sampled_from([["--agent-id", "bob", "--user-id", "ann"], ["--agent-id", "", "--user-id", "ann"],
                          ["--agent-id", "bob"], []])
_any_arg = st.one_of(_text, _note, _agent, _date, st.sampled_from(["--json", "--wiki", "--all", "--help", "-x"]))

_commands = st.one_of(
    st.builds(lambda a, f, s, j: ["vault", "update", a, f, "--set", s] + j, _agent, _note, _set, st.sampled_from([[], ["--json"]])),
    st.builds(lambda a, f, s1, s2: ["vault", "update", a, f, "--set", s1, "--set", s2, "--touch"], _agent, _note, _set, _set),
    st.builds(lambda a, f, w: ["vault", "show", a, f] + w, _agent, _note, st.sampled_from([[], ["--wiki"], ["--json"]])),
    st.builds(lambda a, t, p, n, d, s, e: ["vault", "new", a, "--type", t, "--topic", p, "--name", n, "--description", d,
                                           "--source", s, "--expires-at", e],
              _agent, st.sampled_from(["project", "feedback", "wiki", "nope", ""]),
              st.one_of(st.sampled_from(["new_topic", "alpha_beta", "x" * 300, "Bad Topic"]), _text),
              _text, _text, _text, _date),
    st.builds(lambda a, o, n: ["vault", "supersede", a, o, n], _agent, _note, _note),
    st.builds(lambda x: ["vault", "validate"] + x, st.sampled_from([[], ["bob"], ["eve"], ["--json"]])),
    st.builds(lambda x: ["vault", "lint"] + x, st.sampled_from([[], ["bob"], ["eve"], ["--json"]])),
    st.builds(lambda a, x: ["vault", "list", a] + x, _agent, st.sampled_from([[], ["--all"], ["--wiki"], ["--json"]])),
    st.builds(lambda a, x: ["vault", "index", x, a], _agent, st.sampled_from(["rebuild", "show"])),
    st.builds(lambda a, h, d: ["vault", "journal", "add", a, "--happened", h, "--date", d], _agent, _text, _date),
    st.builds(lambda a, d: ["vault", "journal", "show", a, "--date", d], _agent, _date),
    st.builds(lambda a, e: ["vault", "log", "add", a, "--entry", e], _agent, _jsonish),
    st.builds(lambda a, d, s: ["vault", "log", "query", a, "--since", d, "--status", s], _agent, _date,
              st.sampled_from(["ok", "error", "failed", ""])),
    st.builds(lambda s, c, m: ["memory", "remember", *s, c, "--metadata", m], _scope, _text, _jsonish),
    st.builds(lambda s, f: ["memory", "list", *s, "--filter", f], _scope, st.builds(lambda k, v: f"{k}={v}", _key, _jsonish)),
    st.builds(lambda s, f: ["memory", "list", *s, "--filters", f], _scope, _jsonish),
    st.builds(lambda s, q: ["memory", "search", *s, q], _scope, _text),
    st.builds(lambda s, q, f: ["memory", "search-hybrid", *s, q, "--filters", f], _scope, _text, _jsonish),
    st.builds(lambda i: ["memory", "get", i], _text),
    st.builds(lambda i, m: ["memory", "edit", i, "--metadata", m], _text, _jsonish),
    st.builds(lambda p: ["memory", "import", p], st.sampled_from(["{root}/export.jsonl", "{root}/import.jsonl",
                                                                  "{root}/missing.jsonl", "{root}", "{root}/bob/tools.md"])),
    st.builds(lambda x: ["migrate", *x], st.sampled_from([["--status"], ["--list-snapshots"], ["--to", "v1", "--dry-run"],
                                                           ["--to", "v1"], ["--to", "１"], ["--rollback", "nope"],
                                                           ["--to", "v999", "--dry-run"], ["--status", "--json"]])),
    st.builds(lambda t: ["migrate", "--to", t, "--dry-run"], _text),
    st.lists(_any_arg, min_size=1, max_size=6).map(lambda xs: ["vault", *xs]),
    st.lists(_any_arg, min_size=1, max_size=6).map(lambda xs: ["memory", *xs]),
)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                      HealthCheck.too_slow, HealthCheck.data_too_large])
@given(args=_commands, hostile=st.booleans())
def test_cli_never_tracebacks_and_failures_change_nothing(templates: dict[bool, Path], args: list[str],
                                                         hostile: bool) -> None:
    with tempfile.TemporaryDirectory(prefix="fuzz-") as tmp:
        root = Path(tmp) / "agents"
        shutil.copytree(templates[hostile], root, symlinks=True)
        # templates hold their own paths in nothing but the SQLite file; the copy is self-contained
        argv = [a.replace("{root}", str(root)) for a in args]
        migrate = argv[:1] == ["migrate"]
        before = _snapshot(root, migrate=migrate)
        with _env({"ATOMIC_AGENTS_ROOT": str(root), "ATOMIC_AGENTS_EMBEDDER": "hashing"}):
            old_cwd = os.getcwd()
            os.chdir(tmp)  # anything that writes to a relative path lands in the scratch folder
            try:
                code, out, err = _run(argv)
            finally:
                os.chdir(old_cwd)
        assert code in (0, 1, 2), (argv, code, out[-2000:], err[-2000:])
        assert "Traceback" not in out and "Traceback" not in err, (argv, out[-2000:], err[-2000:])
        if code != 0:
            after = _snapshot(root, migrate=migrate)
            changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
            assert not changed, (argv, code, err[-500:], changed)


def test_snapshot_sees_a_changed_byte(templates: dict[bool, Path], tmp_path: Path) -> None:
    """The property's 'nothing changed' check is not vacuous."""
    root = tmp_path / "agents"
    shutil.copytree(templates[False], root)
    before = _snapshot(root, migrate=False)
    note = root / "bob" / "memory" / "project_alpha_beta.md"
    note.write_bytes(note.read_bytes() + b" ")
    assert _snapshot(root, migrate=False) != before


def test_hostile_template_fails_whole_vault_commands_cleanly(templates: dict[bool, Path], tmp_path: Path) -> None:
    root = tmp_path / "agents"
    shutil.copytree(templates[True], root)
    with _env({"ATOMIC_AGENTS_ROOT": str(root), "ATOMIC_AGENTS_EMBEDDER": "hashing"}):
        for args in (["vault", "validate"], ["vault", "lint"], ["migrate", "--to", "v1", "--dry-run"]):
            code, out, err = _run(args)
            assert code == 1 and "Traceback" not in out + err
            assert "feedback_latin.md:2" in out + err and "feedback_bomb.md:2" in out + err
        code, out, err = _run(["vault", "log", "query", "bob"])
        assert code == 0 and "1 runs" in out and "2026-05-06.jsonl:2" in out
