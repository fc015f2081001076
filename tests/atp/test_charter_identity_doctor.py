"""Charter ratification, identity resolution, and the tolerant reader with `team doctor`."""

from __future__ import annotations

import hashlib
import uuid
from pathlib import Path

import pytest

from atomic_agents.atp import resolve_identity
from atomic_agents.exceptions import ValidationError
from atomic_agents.memory import MemoryStore, Scope

from .conftest import Cli

CHARTER = """# Billing team charter
Roles: dispatcher, builder, verifier and archivist.
The runtime role is not active; live operations need the owner's approval.
"""


def _project(cli: Cli, charter: str, roles: list[str]) -> Path:
    claude = cli.root / ".claude"
    claude.mkdir(exist_ok=True)
    (claude / "agentic-team-charter.md").write_text(charter, encoding="utf-8")
    (claude / "agentic-team-config.yaml").write_text("active_roles: [" + ", ".join(roles) + "]\n", encoding="utf-8")
    return claude / "agentic-team-charter.md"


def test_a_clean_charter_is_ratified_proceed_with_its_full_hash(cli: Cli) -> None:
    path = _project(cli, CHARTER, ["dispatcher", "builder", "verifier", "archivist"])
    _, out, _ = cli("team", "charter", "--non-interactive", "--rater", "alice")
    rec = out["record"]
    full = hashlib.sha256(path.read_bytes()).hexdigest()
    assert (rec["charter_version"], rec["version"], rec["proceed"], rec["status"]) == (full, full[:16], True, "proceed")
    assert (rec["goal_id"], rec["kind"], rec["stage"], rec["owner_role"]) == (
        "charter-ratification", "charter_ratification", "charter_ratification", "archivist",
    )  # fmt: skip
    assert rec["charter_path"] == ".claude/agentic-team-charter.md" and "previous_record_id" not in rec
    # Re-ratification is a new record linked to the previous one.
    _, again, _ = cli("team", "charter", "--non-interactive")
    assert again["record"]["previous_record_id"] == out["id"] and again["id"] != out["id"]


def test_placeholders_and_a_missing_active_role_mean_no_proceed(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    _project(cli, CHARTER + "Project: <PROJECT_NAME>\nBoundary: <Boundary 2>\n", ["dispatcher", "builder", "researcher"])
    monkeypatch.setenv("CI", "1")  # non-interactive without the flag
    _, out, _ = cli("team", "charter", "--defer", "security review=waiting on legal")
    rec = out["record"]
    assert (rec["proceed"], rec["status"]) == (False, "no-proceed")
    assert any("PROJECT_NAME" in b for b in rec["blockers"]) and any("Boundary 2" in b for b in rec["blockers"])
    assert any("researcher" in b for b in rec["blockers"])
    assert rec["deferrals"] == [{"item": "security review", "reason": "waiting on legal"}]
    assert "PROJECT_NAME" in rec["reason"]


def test_deferral_alone_means_no_proceed_and_runtime_gating_is_warned(cli: Cli) -> None:
    _project(cli, "# Charter\nRoles: dispatcher, builder, runtime.\n", ["dispatcher", "builder", "runtime"])
    _, out, _ = cli("team", "charter", "--non-interactive", "--defer", "budget=next quarter")
    rec = out["record"]
    assert rec["blockers"] == [] and rec["proceed"] is False and rec["status"] == "no-proceed"
    assert any("runtime gating" in w for w in rec["warnings"])


def test_a_missing_charter_is_a_clean_error(cli: Cli) -> None:
    code, out, err = cli("team", "charter", "--non-interactive", ok=False)
    assert code == 1 and out["error"] == "NotFoundError" and "agentic-team-charter.md" in err


def test_identity_order_config_then_environment_then_dotenv_then_home(tmp_path: Path) -> None:
    project, home = tmp_path / "p", tmp_path / "h"
    (project / ".claude").mkdir(parents=True)
    (home / ".eden-memory").mkdir(parents=True)
    (home / ".eden-memory" / ".env").write_text("EDEN_ORG_ID=home-org\nEDEN_WORKSPACE_ID=home/ws\nEDEN_AGENT_ID=home-agent\n")
    assert resolve_identity(project, environ={}, home=home).org_id == "home-org"
    (project / ".env").write_text("EDEN_ORG_ID=dot-org\nEDEN_WORKSPACE_ID=dot/ws\n")
    ident = resolve_identity(project, environ={}, home=home)
    assert (ident.org_id, ident.workspace_id, ident.agent_id) == ("dot-org", "dot/ws", "home-agent")
    env = {"EDEN_ORG_ID": "env-org", "EDEN_WORKSPACE_ID": "env/ws"}
    assert resolve_identity(project, environ=env, home=home).workspace_id == "env/ws"
    (project / ".claude" / "agentic-team-config.yaml").write_text("org_id: cfg-org\n")  # one of two: not used
    assert resolve_identity(project, environ=env, home=home).org_id == "env-org"
    (project / ".claude" / "agentic-team-config.yaml").write_text("org_id: cfg-org\nworkspace_id: cfg/ws\n")
    assert resolve_identity(project, environ=env, home=home).org_id == "cfg-org"
    assert resolve_identity(project, environ=env, home=home, org_id="cli-org").org_id == "cli-org"


def test_no_identity_is_one_error_naming_what_to_set(tmp_path: Path) -> None:
    with pytest.raises(ValidationError) as err:
        resolve_identity(tmp_path, environ={}, home=tmp_path)
    assert "EDEN_ORG_ID" in str(err.value) and "EDEN_WORKSPACE_ID" in str(err.value) and err.value.rule == "identity"


@pytest.mark.parametrize("text", ["a: &x [1]\nb: *x\n", "org_id: [unclosed\n", "\xff"])
def test_a_hostile_team_config_is_a_typed_error(tmp_path: Path, text: str) -> None:
    (tmp_path / ".claude").mkdir()
    (tmp_path / ".claude" / "agentic-team-config.yaml").write_bytes(text.encode("latin-1"))
    with pytest.raises(ValidationError) as err:
        resolve_identity(tmp_path, environ={"EDEN_ORG_ID": "o", "EDEN_WORKSPACE_ID": "w"}, home=tmp_path)
    assert err.value.path and err.value.path.endswith("agentic-team-config.yaml")


def _foreign(store: MemoryStore, agent: str, goal: str, content: str, **meta: object) -> str:
    return store.remember(content, {"goal_id": goal, **meta}, Scope(agent, "u", "acme", "acme/web"))


def test_records_of_other_atp_tools_are_read_and_doctor_reports_them(as_role, store: MemoryStore) -> None:  # type: ignore[no-untyped-def]
    g = "legacy-goal"
    goal = _foreign(store, "dispatcher", g, "Goal: legacy-goal | Record ID: x | Stage: goal_receipt | Owner: dispatcher\nship it",
                    stage="goal_receipt", owner_role="dispatcher", stored_at="2026-11-01T10:00:00Z")  # no record_type at all
    plan = _foreign(store, "dispatcher", g, "the plan", record_type="plan", stage="plan", owner_role="dispatcher",
                    target_role="builder", input_record_ids=[goal], stored_at="2026-11-01T10:05:00Z")  # fmt: skip
    act = _foreign(store, "builder", g, "did it", kind="action_record", stage="action", owner_role="builder",
                   input_record_ids=[plan], stored_at="2026-11-01T11:00:00Z")  # fmt: skip
    hand = _foreign(store, "builder", g, "over to verify", record_type="hand_off_or_closure", stage="hand_off_or_closure",
                    owner_role="builder", to_role="verifier", input_record_ids=[str(uuid.uuid4())],
                    stored_at="2026-11-01T11:05:00Z")  # fmt: skip
    fix = _foreign(store, "dispatcher", g, "Correction: fix the broken links of the plan", record_type="run_log",
                   stage="plan", owner_role="router", input_record_ids=["other-goal-id"], stored_at="2026-11-01T11:06:00Z")  # fmt: skip
    ledger = as_role("verifier")
    kinds = [r.kind.value for r in ledger.records(g)]
    assert kinds == ["goal_record", "plan_record", "action_record", "hand_off_record", "run_log"]
    d = ledger.decide(g)
    assert (d.mode, d.next_role, d.next_stage) == ("lite", "verifier", "verification")
    found = {(f.record_id, f.problem) for f in ledger.doctor()}
    problems = {rid: [p for r, p in found if r == rid] for rid in (goal, plan, act, hand, fix)}
    assert any("inferred goal_record" in p for p in problems[goal])
    assert any("'plan' mapped to plan_record" in p for p in problems[plan])
    assert any("taken from kind" in p for p in problems[act])
    assert any("hand_off_or_closure" in p for p in problems[hand]) and any("resolves to nothing" in p for p in problems[hand])
    assert any("correction record" in p for p in problems[fix]) and any("resolves to nothing" in p for p in problems[fix])


def test_doctor_on_a_clean_ledger_reports_nothing(as_role) -> None:  # type: ignore[no-untyped-def]
    d = as_role("dispatcher")
    gid = d.start("clean goal", requester="alice").goal_id
    d.continue_(gid)
    assert d.doctor() == []


def test_capitalised_roles_and_string_id_lists_are_read(as_role, store: MemoryStore) -> None:  # type: ignore[no-untyped-def]
    g = "caps-goal"
    goal = _foreign(store, "dispatcher", g, "goal", record_type="goal_record", stage="Goal Receipt", owner_role="Dispatcher",
                    stored_at="2026-11-01T10:00:00+00:00")  # fmt: skip
    _foreign(store, "dispatcher", g, "handing over", record_type="hand_off_record", stage="hand_off_or_closure",
             owner_role="Dispatcher", to_role="Builder", input_record_ids=f"{goal}, ", stored_at="2026-11-01T10:01:00Z")  # fmt: skip
    views = as_role("x").records(g)
    assert [(v.stage, v.owner_role) for v in views] == [("goal_receipt", "dispatcher"), ("hand_off_or_closure", "dispatcher")]
    assert views[1].input_ids == [goal]
    assert as_role("x").decide(g).next_role == "builder"
    assert any("read as goal_receipt" in f.problem for f in as_role("x").doctor())


def test_roles_the_charter_declares_active_must_be_active_in_the_config(cli: Cli) -> None:
    _project(cli, CHARTER + "Active roles: dispatcher, builder, verifier, archivist, researcher\n",
             ["dispatcher", "builder", "verifier", "archivist"])  # fmt: skip
    rec = cli("team", "charter", "--non-interactive")[1]["record"]
    assert rec["proceed"] is False and any("makes researcher active" in b for b in rec["blockers"])
