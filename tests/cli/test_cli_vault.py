"""Item 11: every vault command has help and --json; user mistakes give one line, no traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer

from atomic_agents.cli import app, main


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    out, err = capsys.readouterr()
    return int(exc.value.code or 0), out, err


def _commands(group: Any, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    """Every command and group under ``group`` (typer vendors click, so duck-type groups)."""
    found = []
    for name, cmd in group.commands.items():
        path = prefix + (name,)
        found.append((path, cmd))
        if hasattr(cmd, "commands"):
            found.extend(_commands(cmd, path))
    return found


ROOT = typer.main.get_command(app)
ALL = _commands(ROOT)  # type: ignore[arg-type]
VAULT = [(p, c) for p, c in ALL if p[0] == "vault" and not hasattr(c, "commands")]


@pytest.mark.parametrize("path,cmd", ALL, ids=[" ".join(p) for p, _ in ALL])
def test_every_command_has_help_text(path: tuple[str, ...], cmd: Any) -> None:
    assert (cmd.help or cmd.short_help or "").strip(), f"{' '.join(path)} has no help"


@pytest.mark.parametrize("path,cmd", VAULT, ids=[" ".join(p) for p, _ in VAULT])
def test_every_vault_command_has_json(path: tuple[str, ...], cmd: Any) -> None:
    assert any("--json" in p.opts for p in cmd.params)


def test_end_to_end_json(capsys: pytest.CaptureFixture[str], agents_root: Path) -> None:
    r = ["--agents-root", str(agents_root), "--json"]
    code, out, _ = run(capsys, "vault", "init", "finance", *r)
    assert code == 0 and "memory/INDEX.md" in json.loads(out)["created"]
    code, out, _ = run(capsys, "vault", "new", "finance", "--type", "decision", "--topic", "income_target",
                       "--period", "2026-q3", "--name", "Q3 target", "--description", "9k/month",
                       "--source", "conversation_x", "--confidence", "high", *r)
    assert code == 0 and json.loads(out)["file"] == "decision_2026-q3_income_target.md"
    run(capsys, "vault", "new", "finance", "--type", "decision", "--topic", "income_target_revised", "--period",
        "2026-q3", "--name", "Q3 target v2", "--description", "8k/month", "--source", "conversation_y", *r)
    code, out, _ = run(capsys, "vault", "supersede", "finance", "decision_2026-q3_income_target.md",
                       "decision_2026-q3_income_target_revised.md", *r)
    assert json.loads(out)["old"]["meta"]["superseded_by"] == "decision_2026-q3_income_target_revised.md"
    code, out, _ = run(capsys, "vault", "list", "finance", *r)
    assert [n["file"] for n in json.loads(out)["notes"]] == ["decision_2026-q3_income_target_revised.md"]
    code, out, _ = run(capsys, "vault", "update", "finance", "decision_2026-q3_income_target_revised.md",
                       "--set", "tags=[q3, income]", *r)
    assert json.loads(out)["meta"]["tags"] == ["q3", "income"]
    code, out, _ = run(capsys, "vault", "index", "show", "finance", *r)
    sections = {e["section"] for e in json.loads(out)["entries"]}
    assert sections == {"Locked Decisions", "Archive (superseded)"}
    code, out, _ = run(capsys, "vault", "validate", "finance", *r)
    assert code == 0 and json.loads(out) == {"ok": True, "errors": []}
    code, out, _ = run(capsys, "vault", "lint", *r)
    assert code == 0 and json.loads(out)["reports"][0]["notes"] == 2
    code, out, _ = run(capsys, "vault", "journal", "add", "finance", "--date", "2026-05-06", "--happened", "Fees!", *r)
    code, out, _ = run(capsys, "vault", "journal", "promote", "finance", "--date", "2026-05-06", "--item", "1",
                       "--type", "feedback", "--topic", "flag_fees", *r)
    assert json.loads(out)["meta"]["sources"] == ["journal/2026-05/2026-05-06.md"]
    code, out, _ = run(capsys, "vault", "log", "add", "finance", "--ts", "2026-05-06T07:00:00Z", "--trigger", "cron",
                       "--model", "m", "--input-tokens", "7", "--output-tokens", "3", "--status", "ok", "--summary", "s", *r)
    code, out, _ = run(capsys, "vault", "log", "query", "finance", "--status", "ok", *r)
    assert json.loads(out)["totals"]["input_tokens"] == 7


@pytest.mark.parametrize(
    "args,needle",
    [
        (["vault", "show", "finance", "feedback_nope.md"], "no such note"),
        (["vault", "list", "ghost"], "does not exist"),
        (["vault", "update", "finance", "user_x_y.md", "--set", "type=idea"], "no such note"),
        (["vault", "journal", "add", "finance", "--date", "2026-02-30", "--happened", "x"], "not a date"),
        (["vault", "init", "../evil"], "[safe-path]"),
    ],
)
def test_user_mistakes_are_one_line_errors(capsys: pytest.CaptureFixture[str], agents_root: Path, args: list[str],
                                           needle: str) -> None:
    run(capsys, "vault", "init", "finance", "--agents-root", str(agents_root))
    code, out, err = run(capsys, *args, "--agents-root", str(agents_root))
    assert code == 1
    assert err.startswith("error: ") and err.count("\n") == 1 and needle in err
    assert "Traceback" not in err


def test_validation_error_as_json(capsys: pytest.CaptureFixture[str], agents_root: Path) -> None:
    run(capsys, "vault", "init", "finance", "--agents-root", str(agents_root))
    code, out, _ = run(capsys, "vault", "new", "finance", "--type", "user", "--topic", "x_y", "--name", "n",
                       "--description", "d", "--source", "s", "--expires-at", "2026-02-30", "--agents-root", str(agents_root), "--json")
    payload = json.loads(out)
    assert code == 1 and (payload["field"], payload["rule"]) == ("expires_at", "date")
    assert payload["path"].endswith("user_x_y.md")


def test_usage_error_exit_2_and_script_entry_point(agents_root: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "atomic_agents.cli", "vault", "list", "--bogus"],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "No such option" in proc.stderr and "Traceback" not in proc.stderr


def test_lint_exit_code_on_errors(capsys: pytest.CaptureFixture[str], agents_root: Path) -> None:
    r = ["--agents-root", str(agents_root)]
    run(capsys, "vault", "init", "finance", *r)
    (agents_root / "finance" / "memory" / "user_bad.md").write_text("---\ntype: user\n---\n")
    code, out, _ = run(capsys, "vault", "lint", "finance", *r)
    assert code == 1 and "user_bad.md" in out
    code, _, _ = run(capsys, "vault", "validate", *r)
    assert code == 1
