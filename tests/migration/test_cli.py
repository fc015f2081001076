"""`atomic-agents migrate` and `python -m atomic_agents.migrate`: output and exit codes 0 / 1 / 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from atomic_agents.cli import main as cli_main
from atomic_agents.migrate import main as module_main

from ._vault import V0_TO_V1, V1_TO_V2_SPEC, make_vault, tree, write_script


def run(entry, args: list[str], capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        entry(args)
    out, err = capsys.readouterr()
    return exc.value.code or 0, out, err


@pytest.fixture(params=["atomic-agents migrate", "python -m atomic_agents.migrate"])
def cli(request):
    if request.param == "atomic-agents migrate":
        return lambda args: cli_main(["migrate", *args])
    return module_main


@pytest.fixture
def legacy(agents_root: Path) -> Path:
    make_vault(agents_root, version=None)
    write_script(agents_root, "v0_to_v1.py", V0_TO_V1)
    return agents_root


def test_cli_status_counts_legacy_units(cli, legacy: Path, capsys) -> None:
    code, out, _ = run(cli, ["--status", "--agents-root", str(legacy)], capsys)
    assert code == 0
    assert "vault at v0" in out and "12 legacy without schema_version" in out and "v0_to_v1.py" in out
    code, out, _ = run(cli, ["--status", "--agents-root", str(legacy), "--json"], capsys)
    data = json.loads(out)
    assert (data["vault_version"], data["legacy_units"], data["units"]) == (0, 12, 12)


def test_cli_dry_run_prints_per_unit_key_changes_and_writes_nothing(cli, vault: Path, capsys) -> None:
    write_script(vault, "v1_to_v2.py", V1_TO_V2_SPEC)
    before = tree(vault)
    code, out, _ = run(cli, ["--to", "v2", "--dry-run", "--agents-root", str(vault)], capsys)
    assert tree(vault) == before
    assert "caldwell/memory/feedback_topic_0.md: +provenance sources->evidence ~schema_version" in out
    assert "Dry run: nothing was written" in out
    assert code == 1  # the version cliff: a real run would roll back, and the dry run says so


def test_cli_real_run_prints_snapshot_then_succeeds(cli, legacy: Path, capsys) -> None:
    code, out, _ = run(cli, ["--to", "v1", "--agents-root", str(legacy)], capsys)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("Snapshot created: ") and "--rollback " in lines[1]
    name = lines[1].split("--rollback ")[1].split()[0]
    code, out, _ = run(cli, ["--list-snapshots", "--agents-root", str(legacy)], capsys)
    assert code == 0 and name in out
    code, out, _ = run(cli, ["--rollback", name, "--agents-root", str(legacy)], capsys)
    assert code == 0 and "the vault is at v0" in out


def test_cli_rolled_back_run_exits_1(cli, vault: Path, capsys) -> None:
    write_script(vault, "v1_to_v2.py", V1_TO_V2_SPEC)
    code, out, _ = run(cli, ["--to", "v2", "--agents-root", str(vault), "--json"], capsys)
    assert code == 1
    snapshot_line, result_line = out.splitlines()
    assert json.loads(snapshot_line)["snapshot_ref"]["backend_id"] == "filesystem"
    result = json.loads(result_line)
    assert result["rolled_back"] is True and result["validation_errors"]


def test_cli_refused_run_exits_1(cli, vault: Path, capsys) -> None:
    code, _, err = run(cli, ["--to", "v3", "--agents-root", str(vault)], capsys)
    assert code == 1 and "missing migration script" in err


@pytest.mark.parametrize(
    "args",
    [[], ["--to", "two"], ["--status", "--list-snapshots"], ["--dry-run"], ["--to", "v1", "--status"], ["--bogus"]],
)
def test_cli_usage_errors_exit_2(cli, vault: Path, args: list[str], capsys) -> None:
    code, _, _ = run(cli, [*args, "--agents-root", str(vault)], capsys)
    assert code == 2


def test_cli_agents_root_from_environment(vault: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("ATOMIC_AGENTS_ROOT", str(vault))
    code, out, _ = run(module_main, ["--status", "--json"], capsys)
    assert code == 0 and json.loads(out)["units"] == 12


def test_cli_every_option_has_help(capsys) -> None:
    code, out, _ = run(module_main, ["--help"], capsys)
    assert code == 0
    for opt in ("--to", "--dry-run", "--status", "--rollback", "--list-snapshots", "--agents-root", "--json"):
        assert opt in out


def test_python_dash_m_entry_point(legacy: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "atomic_agents.migrate", "--status", "--agents-root", str(legacy)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "vault at v0" in proc.stdout
