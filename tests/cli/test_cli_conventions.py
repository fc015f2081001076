"""CLI conventions (issue 7, section 6): what a new user expects of a Python CLI.

--version, completion, ``python -m atomic_agents``; fixed choices are usage
errors; group-wide options declared once and accepted before or after the
subcommand; help text on every command and option; JSON errors on stdout for
JSON commands; indented JSON on a terminal; no folder made by a typo; cold start.
"""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

import pytest
import typer

from atomic_agents import __version__
from atomic_agents.cli import app, main
from atomic_agents.cli import _common

ROOT_CMD = typer.main.get_command(app)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    out, err = capsys.readouterr()
    return int(exc.value.code or 0), out, err


def _leaves(group: Any, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    found = []
    for name, cmd in group.commands.items():
        if hasattr(cmd, "commands"):
            found.extend(_leaves(cmd, prefix + (name,)))
        else:
            found.append((prefix + (name,), cmd))
    return found


LEAVES = _leaves(ROOT_CMD)
IDS = [" ".join(p) for p, _ in LEAVES]


def _opts(cmd: Any) -> set[str]:
    return {o for p in cmd.params for o in p.opts}


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# ------------------------------------------------------------------ help, version, entry points
@pytest.mark.parametrize("path,cmd", LEAVES, ids=IDS)
def test_every_command_and_option_has_help_text(path: tuple[str, ...], cmd: Any) -> None:
    assert (cmd.help or "").strip(), f"{' '.join(path)} has no help"
    for param in cmd.params:
        if param.param_type_name == "option":
            assert (param.help or "").strip(), f"{' '.join(path)} {param.opts} has no help"


@pytest.mark.parametrize("path,cmd", LEAVES, ids=IDS)
def test_every_command_renders_help(capsys: pytest.CaptureFixture[str], path: tuple[str, ...], cmd: Any) -> None:
    code, out, _ = run(capsys, *path, "--help")
    assert code == 0 and "Usage:" in out


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--version")
    assert (code, out) == (0, f"atomic-agents {__version__}\n")


def test_python_dash_m_atomic_agents() -> None:
    proc = subprocess.run([sys.executable, "-m", "atomic_agents", "--version"], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout == f"atomic-agents {__version__}\n"


def test_shell_completion_completes_groups_and_choices() -> None:
    assert {"--install-completion", "--show-completion"} <= _opts(ROOT_CMD)
    env = {**os.environ, "_ATOMIC_AGENTS_COMPLETE": "complete_bash", "COMP_WORDS": "atomic-agents vault list --type ",
           "COMP_CWORD": "4"}
    proc = subprocess.run([sys.executable, "-m", "atomic_agents.cli"], capture_output=True, text=True, env=env)
    assert proc.stdout.split() == ["user", "feedback", "project", "decision", "reference"]


# ------------------------------------------------------------------ choices
def test_choices_match_the_spec_constants() -> None:
    from atomic_agents.vault import CONFIDENCE_LEVELS, NOTE_TYPES, LogEntry

    assert tuple(t.value for t in _common.NoteType) == NOTE_TYPES
    assert tuple(c.value for c in _common.Confidence) == CONFIDENCE_LEVELS
    fields = LogEntry.model_fields
    assert tuple(s.value for s in _common.RunStatus) == typing.get_args(fields["status"].annotation)
    assert tuple(t.value for t in _common.RunTrigger) == typing.get_args(fields["trigger"].annotation)


NEW = ["vault", "new", "finance", "--topic", "x_y", "--name", "n", "--description", "d", "--source", "s"]
BAD_CHOICES = [
    (NEW + ["--type", "idea"], "--type"),
    (NEW + ["--type", "user", "--confidence", "sure"], "--confidence"),
    (["vault", "list", "finance", "--type", "wiki"], "--type"),
    (["vault", "log", "query", "finance", "--status", "failed"], "--status"),
    (["vault", "log", "query", "finance", "--trigger", "cronjob"], "--trigger"),
    (["vault", "log", "add", "finance", "--trigger", "cron", "--model", "m", "--input-tokens", "1", "--output-tokens",
      "1", "--status", "fine", "--summary", "s"], "--status"),
    (["vault", "journal", "promote", "finance", "--item", "1", "--type", "idea", "--topic", "x_y"], "--type"),
]


@pytest.mark.parametrize("args,option", BAD_CHOICES, ids=[a[1] + " " + " ".join(a[0][:3]) for a in BAD_CHOICES])
def test_a_value_outside_the_choices_is_a_usage_error(capsys: pytest.CaptureFixture[str], agents_root: Path,
                                                       args: list[str], option: str) -> None:
    run(capsys, "vault", "init", "finance", "--agents-root", str(agents_root))
    before = _tree(agents_root)
    code, out, err = run(capsys, *args, "--agents-root", str(agents_root))
    assert code == 2 and option in err and "Traceback" not in err and out == ""
    assert _tree(agents_root) == before


@pytest.mark.parametrize("args,choices", [
    (["vault", "new"], ["user", "feedback", "project", "decision", "reference", "wiki"]),
    (["vault", "log", "query"], ["ok", "error", "skipped", "cron", "skill", "api", "manual"]),
    (["vault", "new"], ["high", "medium", "low"]),
])
def test_help_lists_the_choices(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, args: list[str],
                                choices: list[str]) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # a narrow help table clips long choice lists with an ellipsis
    _, out, _ = run(capsys, *args, "--help")
    flat = "".join(out.split())  # rich wraps long choice lists across lines
    for c in choices:
        assert c in flat


# ------------------------------------------------------------------ group-wide options
def test_location_options_are_declared_once_and_offered_everywhere() -> None:
    for path, cmd in LEAVES:
        assert "--agents-root" in _opts(cmd), path
        if path[0] == "memory":
            assert "--db" in _opts(cmd), path
    assert "--agents-root" in _opts(ROOT_CMD)
    groups = {name: cmd for name, cmd in ROOT_CMD.commands.items() if hasattr(cmd, "commands")}
    assert "--agents-root" in _opts(groups["vault"]) and {"--agents-root", "--db"} <= _opts(groups["memory"])


def test_embedder_only_on_commands_that_embed() -> None:
    with_embedder = {p[1] for p, c in LEAVES if p[0] == "memory" and "--embedder" in _opts(c)}
    assert with_embedder == {"remember", "recall", "search-semantic", "search-hybrid", "edit", "import", "reindex", "health",
                             "export"}  # export --with-vectors labels the vectors with the model id
    # serve's tools embed (remember, recall); the bridge's commands embed too: mirroring notes,
    # searching them, recalling for a context; the memory daemon loads the model its commands use
    others = {p for p, c in LEAVES if p[0] != "memory" and "--embedder" in _opts(c)}
    assert others == {("serve",), ("vault", "sync"), ("vault", "search"), ("context",), ("daemon", "start")}


def test_one_spelling_of_filter() -> None:
    for path, cmd in LEAVES:
        for p in cmd.params:
            if "--filters" in p.opts:
                assert p.hidden, path  # the old spelling still parses, but help shows only --filter


@pytest.mark.parametrize("where", ["root", "group", "command"])
def test_agents_root_before_or_after_the_subcommand(capsys: pytest.CaptureFixture[str], agents_root: Path,
                                                    where: str) -> None:
    run(capsys, "vault", "init", "finance", "--agents-root", str(agents_root))
    r = ["--agents-root", str(agents_root)]
    args = {"root": [*r, "vault", "list", "--json"], "group": ["vault", *r, "list", "--json"],
            "command": ["vault", "list", "--json", *r]}[where]
    code, out, _ = run(capsys, *args)
    assert code == 0 and json.loads(out) == {"agents": ["finance"]}


def test_the_commands_own_flag_wins_over_the_groups(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    run(capsys, "vault", "init", "alpha", "--agents-root", str(a))
    run(capsys, "vault", "init", "beta", "--agents-root", str(b))
    monkeypatch.setenv("ATOMIC_AGENTS_ROOT", str(tmp_path / "nowhere"))
    _, out, _ = run(capsys, "vault", "--agents-root", str(a), "list", "--agents-root", str(b), "--json")
    assert json.loads(out) == {"agents": ["beta"]}
    _, out, _ = run(capsys, "vault", "--agents-root", str(a), "list", "--json")  # group flag beats the env
    assert json.loads(out) == {"agents": ["alpha"]}


def test_db_before_the_subcommand(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATOMIC_AGENTS_EMBEDDER", "hashing")
    db = tmp_path / "m.db"
    code, out, _ = run(capsys, "memory", "--db", str(db), "remember", "--agent-id", "a", "--user-id", "u", "hello")
    assert code == 0 and db.is_file()
    code, out, _ = run(capsys, "memory", "list", "--agent-id", "a", "--user-id", "u", "--db", str(db))
    assert [m["content"] for m in json.loads(out)["memories"]] == ["hello"]


# ------------------------------------------------------------------ messages
def test_a_missing_vault_root_is_an_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = run(capsys, "vault", "list", "--agents-root", str(tmp_path / "typo"))
    assert code == 1 and "does not exist" in err and "(no agents" not in out
    code, out, err = run(capsys, "vault", "list", "--agents-root", str(tmp_path / "typo"), "--json")
    assert code == 1 and json.loads(out)["error"] == "NotFoundError"


def test_no_folder_is_made_by_a_typo_or_a_missing_root(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATOMIC_AGENTS_EMBEDDER", "hashing")
    monkeypatch.chdir(tmp_path)
    scope = ["--agent-id", "a", "--user-id", "u"]
    code, out, err = run(capsys, "memory", "remember", *scope, "hello", "--db", str(tmp_path / "typo" / "dir" / "x.db"))
    assert code == 1 and json.loads(out)["field"] == "db" and "does not exist" in err
    code, out, err = run(capsys, "memory", "remember", *scope, "hello")  # no root set: ./agents is not created
    assert code == 1 and json.loads(out)["error"] == "NotFoundError"
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    (tmp_path / "agents").mkdir()  # an existing root: its _memory/ folder is made, as the default location
    code, _, _ = run(capsys, "memory", "remember", *scope, "hello")
    assert code == 0 and (tmp_path / "agents" / "_memory" / "memory.db").is_file()


def test_memory_errors_are_json_on_stdout_without_the_flag(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATOMIC_AGENTS_DB", str(tmp_path / "m.db"))
    code, out, err = run(capsys, "memory", "get", "00000000-0000-4000-8000-000000000000")
    assert code == 1 and json.loads(out)["error"] == "NotFoundError" and err.startswith("error: ")
    code, out, err = run(capsys, "memory", "remember", "--agent-id", "a", "--user-id", "u", "x", "--metadata", "[1]")
    assert code == 1 and json.loads(out)["field"] == "metadata"


def test_vault_errors_stay_off_stdout_without_json(capsys: pytest.CaptureFixture[str], agents_root: Path) -> None:
    code, out, err = run(capsys, "vault", "show", "ghost", "x.md", "--agents-root", str(agents_root))
    assert code == 1 and out == "" and err.startswith("error: ")


def test_bad_dates_show_the_value(capsys: pytest.CaptureFixture[str], agents_root: Path) -> None:
    r = ["--agents-root", str(agents_root)]
    run(capsys, "vault", "init", "finance", *r)
    code, _, err = run(capsys, "vault", "journal", "show", "finance", "--date", "20260506", *r)
    assert code == 1 and "'20260506' is not a date" in err
    (agents_root / "finance" / "memory" / "user_n.md").write_text(
        "---\nschema_version: 1\nname: n\ndescription: d\ntype: user\ncaptured: 20260506\nlast_seen: 2026-05-06\n"
        "sources: [s]\nconfidence: high\n---\n")
    _, out, _ = run(capsys, "vault", "validate", "finance", "--json", *r)
    messages = [e["message"] for e in json.loads(out)["errors"] if e["field"] == "captured"]
    assert messages == ["must be a date in YYYY-MM-DD form, got 20260506"]
    assert "{value" not in out


def test_a_bad_log_entry_reports_every_problem_in_our_words(capsys: pytest.CaptureFixture[str], agents_root: Path) -> None:
    r = ["--agents-root", str(agents_root)]
    run(capsys, "vault", "init", "finance", *r)
    entry = {"ts": "2026-05-06T07:00:00", "trigger": "cron", "model": "", "input_tokens": -1, "output_tokens": "3",
             "status": "ok"}
    code, out, err = run(capsys, "vault", "log", "add", "finance", "--entry", json.dumps(entry), "--json", *r)
    payload = json.loads(out)
    assert code == 1 and payload["field"] == "ts, model, input_tokens, output_tokens, summary"
    for words in ("ts: must carry a timezone", "model: must not be empty", "input_tokens: must be 0 or more",
                  "output_tokens: must be an integer", "summary: required field is missing"):
        assert words in payload["message"], words
    for pydantic_words in ("Input should", "Value error", "pydantic", "Field required"):
        assert pydantic_words not in err
    assert not (agents_root / "finance" / "log").exists() or not any((agents_root / "finance" / "log").rglob("*.jsonl"))


# ------------------------------------------------------------------ output
def test_summaries_are_text_not_python_reprs(capsys: pytest.CaptureFixture[str], agents_root: Path) -> None:
    r = ["--agents-root", str(agents_root)]
    run(capsys, "vault", "init", "finance", *r)
    for status in ("ok", "ok", "error"):
        run(capsys, "vault", "log", "add", "finance", "--ts", "2026-05-06T07:00:00Z", "--trigger", "cron", "--model", "m",
            "--input-tokens", "1", "--output-tokens", "1", "--status", status, "--summary", "s", *r)
    _, out, _ = run(capsys, "vault", "log", "query", "finance", *r)
    assert "by status: error 1, ok 2" in out and "{" not in out


def test_json_is_indented_on_a_terminal_and_one_line_when_piped(agents_root: Path) -> None:
    args = [sys.executable, "-m", "atomic_agents.cli", "vault", "init", "finance", "--agents-root", str(agents_root), "--json"]
    piped = subprocess.run(args, capture_output=True, text=True)
    assert piped.returncode == 0 and piped.stdout.count("\n") == 1
    leader, follower = pty.openpty()
    proc = subprocess.Popen(args, stdout=follower, stderr=subprocess.DEVNULL)
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    proc.wait()
    os.close(leader)
    text = b"".join(chunks).decode().replace("\r\n", "\n")
    assert proc.returncode == 0 and text.startswith("{\n  ") and json.loads(text)["agent"] == "finance"


def test_vault_list_rows_are_plain_text(capsys: pytest.CaptureFixture[str], agents_root: Path) -> None:
    r = ["--agents-root", str(agents_root)]
    run(capsys, "vault", "init", "finance", *r)
    run(capsys, "vault", "new", "finance", "--type", "user", "--topic", "risk_level", "--name", "Risk [bold]level[/bold]",
        "--description", "d", "--source", "s", "--pinned", *r)
    (agents_root / "finance" / "memory" / "user_broken.md").write_text("---\nname: [unclosed\n---\n")
    code, out, _ = run(capsys, "vault", "list", "finance", *r)
    lines = out.splitlines()
    assert lines[0].startswith("* user_risk_level.md") and lines[0].endswith("Risk [bold]level[/bold]")
    assert lines[1].startswith("! ") and "user_broken.md" in lines[1]


# ------------------------------------------------------------------ cold start
@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["vault", "list", "--help"], ["memory", "remember", "--help"],
                                  ["migrate", "--help"]])
def test_help_and_version_import_nothing_heavy(argv: list[str]) -> None:
    code = (
        "import sys\nfrom atomic_agents.cli import main\n"
        f"try:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
        "heavy = ('numpy', 'onnxruntime', 'tokenizers', 'atomic_agents.vault', 'atomic_agents.memory', "
        "'atomic_agents.migration')\n"
        "print(sorted(m for m in heavy if m in sys.modules), file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.stderr.strip().splitlines()[-1] == "[]"


def test_vault_commands_do_not_import_the_memory_store(agents_root: Path) -> None:
    code = (
        "import sys\nfrom atomic_agents.cli import main\n"
        f"try:\n    main(['vault', 'list', '--agents-root', {str(agents_root)!r}])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in ('numpy', 'onnxruntime', 'atomic_agents.memory') if m in sys.modules), file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.stderr.strip().splitlines()[-1] == "[]"
