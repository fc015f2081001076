"""`atomic-agents memory ...`: eden-memory's flags and JSON shapes, one-line errors, help everywhere."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from atomic_agents.cli import main
from atomic_agents.cli._memory import app as memory_app


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(["memory", *args])
    out, err = capsys.readouterr()
    data = json.loads(out) if out.strip().startswith("{") and out.count("\n") <= 1 else out
    return int(exit_info.value.code or 0), data, err


@pytest.fixture
def base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    monkeypatch.setenv("ATOMIC_AGENTS_EMBEDDER", "hashing")
    monkeypatch.setenv("ATOMIC_AGENTS_DB", str(tmp_path / "memory.db"))
    return ["--agent-id", "builder", "--user-id", "alice", "--org-id", "acme", "--workspace-id", "acme/web"]


def test_atp_script_flags_remember_and_search(capsys: pytest.CaptureFixture[str], base: list[str]) -> None:
    code, data, _ = run(capsys, "remember", *base, "--content", "Goal: g1 | Stage: action | billing deploy went green", "--metadata", '{"goal_id": "g1", "stage": "action"}')
    assert code == 0 and data["status"] == "remembered" and len(data["id"]) == 36
    code, found, _ = run(capsys, "search", *base, "--keywords", "deploy verdict blocked escalation charter handoff archival dispatch", "--limit", "5")
    assert code == 0 and [r["id"] for r in found["results"]] == [data["id"]]
    assert set(found["results"][0]) == {"id", "content", "metadata", "score"}


def test_recall_semantic_list_get_edit_forget(capsys: pytest.CaptureFixture[str], base: list[str]) -> None:
    _, a, _ = run(capsys, "remember", *base, "billing deploy failed after migration", "--metadata", '{"goal_id": "g1"}')
    _, b, _ = run(capsys, "remember", *base, "--fact", "cat sleeps on the sofa", "--metadata", '{"goal_id": "g2"}')
    _, rec, _ = run(capsys, "recall", *base, "--topic", "billing deploy failed", "--top-k", "1")
    assert [r["id"] for r in rec["results"]] == [a["id"]] and 0 <= rec["results"][0]["score"] <= 1
    _, sem, _ = run(capsys, "search-semantic", *base, "billing", "--filter", "goal_id=g2")
    assert [r["id"] for r in sem["results"]] == [b["id"]]
    _, hyb, _ = run(capsys, "search-hybrid", *base, "sofa", "--filters", '{"goal_id": "g2"}')
    assert hyb["results"][0]["id"] == b["id"] and hyb["results"][0]["score"] >= 0.5
    _, listed, _ = run(capsys, "list", *base, "--filter", "goal_id=g1")
    assert [m["id"] for m in listed["memories"]] == [a["id"]]
    _, rec2, _ = run(capsys, "recall", *base, "billing deploy failed", "--filter", "goal_id=g2")
    assert [r["id"] for r in rec2["results"]] == [b["id"]]  # filtered: the closer memory is not g2's
    _, kw2, _ = run(capsys, "search", *base, "billing sofa", "--filter", "goal_id=g1")
    assert [r["id"] for r in kw2["results"]] == [a["id"]]
    _, got, _ = run(capsys, "get", a["id"])
    assert got["workspace_id"] == "acme/web"
    _, edited, _ = run(capsys, "edit", a["id"], "--content", "billing deploy is green now", "--ttl-ms", "60000")
    assert edited["content"] == "billing deploy is green now" and edited["expires_at"] is not None
    _, gone, _ = run(capsys, "forget", a["id"])
    assert gone == {"id": a["id"], "status": "forgotten"}
    code, _, err = run(capsys, "get", a["id"])
    assert code == 1 and err.startswith("error: no memory")


def test_housekeeping_commands(capsys: pytest.CaptureFixture[str], base: list[str], tmp_path: Path) -> None:
    run(capsys, "remember", *base, "scratch one", "--ttl-ms", "1")
    run(capsys, "remember", *base, "scratch two")
    _, dry, _ = run(capsys, "prune", "--agent-id", "builder", "--keywords", "scratch")
    assert dry["dry_run"] is True and dry["matched"] == 2 and dry["removed"] == 0
    _, fe, _ = run(capsys, "forget-expired", "--agent-id", "builder")
    assert fe == {"status": "ok", "removed": 1}
    _, health, _ = run(capsys, "health")
    assert health["status"] == "ok" and health["total"] == 2 and health["embedder"] == "hashing-fake-256"
    _, exp, _ = run(capsys, "export", "-o", str(tmp_path / "b.jsonl"))
    assert exp["exported"] == 2
    _, pr, _ = run(capsys, "prune", "--agent-id", "builder", "--confirm", "--hard")
    assert pr["removed"] == 2
    _, imp, err = run(capsys, "import", str(tmp_path / "b.jsonl"))
    assert imp == {"status": "ok", "imported": 2, "skipped": 0} and "importing" in err
    _, vac, _ = run(capsys, "vacuum")
    assert vac["status"] == "ok"


def test_model_change_needs_reindex(capsys: pytest.CaptureFixture[str], base: list[str]) -> None:
    run(capsys, "remember", *base, "billing deploy failed")
    code, _, err = run(capsys, "recall", *base, "billing", "--embedder", "hashing-fake-128")
    assert code == 1 and "reindex" in err
    code, data, err = run(capsys, "reindex", "--embedder", "hashing-fake-128")
    assert code == 0 and data["reindexed"] == 1 and "reindexing" in err
    code, data, _ = run(capsys, "recall", *base, "billing", "--embedder", "hashing-fake-128")
    assert code == 0 and len(data["results"]) == 1


@pytest.mark.parametrize(
    ("args", "expect"),
    [
        (["remember", "--content", "x"], 2),  # scope flags missing: usage error
        (["remember", "--agent-id", "a", "--user-id", "u", "--content", "AKIAIOSFODNN7EXAMPLE"], 1),
        (["remember", "--agent-id", "a", "--user-id", "u", "--content", "x", "--metadata", "[1]"], 1),
        (["search", "--agent-id", "a", "--user-id", "u", "--keywords", "x", "--limit", "0"], 1),
        (["get", "not-a-uuid"], 1),
    ],
)
def test_errors_are_one_line_with_exit_codes(capsys: pytest.CaptureFixture[str], base: list[str], args: list[str], expect: int) -> None:
    code, _, err = run(capsys, *args)
    assert code == expect
    if expect == 1:
        assert err.startswith("error: ") and err.count("\n") == 1 and "AKIAIOSFODNN7EXAMPLE" not in err


def test_every_memory_command_has_help_text() -> None:
    import typer.main

    group = typer.main.get_command(memory_app)
    assert len(group.commands) >= 15  # type: ignore[attr-defined]
    for name, cmd in group.commands.items():  # type: ignore[attr-defined]
        assert cmd.help and cmd.help.strip(), name
        for param in cmd.params:
            if param.param_type_name == "option":
                assert param.help, f"{name} {param.name}"


def test_real_model_end_to_end_via_the_installed_script(tmp_path: Path) -> None:
    exe = Path(sys.executable).with_name("atomic-agents")
    env = {"PATH": str(exe.parent), "ATOMIC_AGENTS_DB": str(tmp_path / "m.db"), "HOME": str(tmp_path)}
    scope = ["--agent-id", "a", "--user-id", "u"]
    remember = subprocess.run([str(exe), "memory", "remember", *scope, "--content", "The billing deploy failed because the migration timed out"], env=env, capture_output=True, text=True)
    assert remember.returncode == 0, remember.stderr
    recall = subprocess.run([str(exe), "memory", "recall", *scope, "why did the billing deploy fail?"], env=env, capture_output=True, text=True)
    assert recall.returncode == 0, (recall.stdout, recall.stderr)
    hit = json.loads(recall.stdout)["results"][0]
    assert hit["id"] == json.loads(remember.stdout)["id"] and hit["score"] >= 0.45


_TOKEN = "ghp_" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7c"


@pytest.mark.parametrize(
    "args",
    [
        ["remember", "--content", f"deploy with {_TOKEN}"],
        ["remember", "--content", "x", "--metadata", json.dumps({_TOKEN: "v"})],
        ["remember", "--content", "x", "--metadata", json.dumps({"env": {_TOKEN: [1]}})],
        ["remember", "--content", "x", "--metadata", json.dumps({"note": f"t={_TOKEN}"})],
        ["remember", "--content", "x", "--metadata", json.dumps({"db_password": "hunter2hunter2"})],
        ["remember", "--content", "x", "--workspace-id", f"acme/{_TOKEN}"],
        ["search-semantic", "x", "--filter", _TOKEN],
    ],
)
@pytest.mark.parametrize("as_json", [False, True])
def test_a_refused_secret_is_printed_in_no_channel(
    capsys: pytest.CaptureFixture[str], base: list[str], args: list[str], as_json: bool
) -> None:
    scope = ["--agent-id", "builder", "--user-id", "alice"]
    code, data, err = run(capsys, *args[:1], *scope, *args[1:], *(["--json"] if as_json else []))
    printed = json.dumps(data) + err
    assert code == 1 and err.startswith("error: ")
    assert _TOKEN not in printed and _TOKEN[4:] not in printed and "hunter2" not in printed
    if as_json:
        assert data["error"] in ("SecretRejectedError", "ValidationError")


def test_import_of_a_bad_file_writes_nothing_and_names_the_line(
    capsys: pytest.CaptureFixture[str], base: list[str], tmp_path: Path
) -> None:
    for i in range(3):
        run(capsys, "remember", *base, f"note {i}")
    run(capsys, "export", "-o", str(tmp_path / "b.jsonl"))
    run(capsys, "prune", "--agent-id", "builder", "--confirm", "--hard")
    lines = (tmp_path / "b.jsonl").read_text(encoding="utf-8").splitlines()
    bad = json.loads(lines[2])
    bad["created_at"] = -3
    (tmp_path / "b.jsonl").write_text("\n".join([*lines[:2], json.dumps(bad)]) + "\n", encoding="utf-8")
    code, _, err = run(capsys, "import", str(tmp_path / "b.jsonl"))
    assert code == 1 and "line 3" in err and "created_at" in err
    _, health, _ = run(capsys, "health")
    assert health["total"] == 0
