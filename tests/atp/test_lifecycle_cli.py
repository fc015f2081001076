"""Goal lifecycles end to end through `atomic-agents team ...` (lite and full), on SQLite."""

from __future__ import annotations

import datetime as dt
import json
import time
from pathlib import Path

from .conftest import ACTION, DISPATCH, GREEN, PLAN, RED, Cli


def _rec(cli: Cli, kind: str, goal: str, data: dict[str, object], agent: str) -> str:
    _, out, _ = cli("team", "record", kind, "--goal", goal, "--data", json.dumps(data), agent=agent)
    return str(out["id"])


def _status(cli: Cli, goal: str) -> dict[str, object]:
    _, out, _ = cli("team", "status", goal)
    return dict(out["goals"][0])


def test_lite_goal_runs_to_closure(cli: Cli) -> None:
    _, out, _ = cli("team", "start", "Add a retry to the billing deploy", "--constraint", "no downtime")
    goal = out["goal_id"]
    assert set(out) == {"goal_id", "record_id", "record"} and out["record"]["mode"] == "lite"
    assert _status(cli, goal)["next_role"] == "dispatcher" and _status(cli, goal)["next_stage"] == "plan"
    _rec(cli, "plan_record", goal, PLAN, "dispatcher")
    _, c, _ = cli("team", "continue", goal, agent="router")
    assert set(c) == {"goal_id", "next_stage", "next_role", "state", "blocker", "written"}
    assert (c["next_stage"], c["next_role"], c["state"], len(c["written"])) == ("action", "builder", "continueable", 2)
    _, again, _ = cli("team", "continue", goal, agent="router")
    assert again["written"] == [] and again["next_role"] == "builder"  # idempotent
    _rec(cli, "action_record", goal, {**ACTION, "worktree_path": "/work/trees/retry"}, "builder")
    row = _status(cli, goal)
    assert (row["next_role"], row["location"]) == ("verifier", "/work/trees/retry")
    _rec(cli, "verdict", goal, GREEN, "verifier")
    assert _status(cli, goal)["next_role"] == "archivist"
    _rec(cli, "archival_record", goal, {"outcome": "retry shipped"}, "archivist")
    row = _status(cli, goal)
    assert (row["state"], row["next_role"], row["mode"]) == ("closed", None, "lite")
    assert set(row) >= {"goal_id", "stage", "owner_role", "mode", "state", "next_stage", "next_role",
                        "latest_record_id", "deadline", "escalation_trigger"}  # fmt: skip
    _, c, _ = cli("team", "continue", goal, agent="router")
    assert c["state"] == "closed" and c["written"] == []


def test_full_goal_with_research_red_verdict_and_rework(cli: Cli) -> None:
    _, out, _ = cli("team", "start", "Choose a queue for billing events", "--full", "--package-type", "research")
    goal = out["goal_id"]
    assert _status(cli, goal)["next_stage"] == "routing_and_assignment"
    _rec(cli, "dispatch_instruction", goal, {**DISPATCH, "target_role": "researcher"}, "dispatcher")
    assert (_status(cli, goal)["next_stage"], _status(cli, goal)["next_role"]) == ("context_gathering", "researcher")
    _rec(cli, "context_summary", goal, {"question": "which queue?", "sources": ["docs/queues.md"],
                                        "options": ["sqs", "redis streams"], "recommended_next_step": "build on sqs"}, "researcher")  # fmt: skip
    assert _status(cli, goal)["next_role"] == "builder"
    _rec(cli, "action_record", goal, ACTION, "builder")
    _rec(cli, "verdict", goal, RED, "verifier")
    row = _status(cli, goal)
    assert (row["next_stage"], row["next_role"]) == ("routing_and_assignment", "dispatcher")  # rework
    _rec(cli, "dispatch_instruction", goal, DISPATCH, "dispatcher")
    _rec(cli, "action_record", goal, ACTION, "builder")
    _rec(cli, "verdict", goal, GREEN, "verifier")
    _rec(cli, "archival_record", goal, {"outcome": "sqs adopted"}, "archivist")
    # Stage 7: the archivist's closing hand-off keeps the goal closed.
    cli("team", "handoff", goal, "--to", "dispatcher", "--reason", "closed; report to requester", "--from", "archivist", agent="archivist")
    assert _status(cli, goal)["state"] == "closed"
    _, m, _ = cli("team", "metrics", goal)
    g = m["goals"][0]
    assert (g["rework"], g["reopenings"], g["final_verdict"], g["state"]) == (1, 0, "green", "closed")
    assert set(g["roles_involved"]) == {"dispatcher", "researcher", "builder", "verifier", "archivist"}


def test_blocked_then_resumed_by_a_hand_off(cli: Cli) -> None:
    goal = cli("team", "start", "Rotate the deploy key")[1]["goal_id"]
    _rec(cli, "plan_record", goal, PLAN, "dispatcher")
    _rec(cli, "action_record", goal, ACTION, "builder")
    _rec(cli, "verdict", goal, {"status": "blocked", "evidence": "staging is down", "scope_verified": "none",
                               "unblock_condition": "staging back up"}, "verifier")  # fmt: skip
    row = _status(cli, goal)
    assert (row["state"], row["blocker"]) == ("blocked", "staging back up")
    _, c, _ = cli("team", "continue", goal, agent="router")
    assert (c["state"], c["blocker"], c["written"]) == ("blocked", "staging back up", [])
    cli("team", "handoff", goal, "--to", "verifier", "--reason", "staging is back", "--from", "dispatcher")
    row = _status(cli, goal)
    assert (row["state"], row["next_role"]) == ("continueable", "verifier")


def test_pending_authorisation_stops_until_approved(cli: Cli) -> None:
    goal = cli("team", "start", "Drop the old billing table")[1]["goal_id"]
    _rec(cli, "plan_record", goal, PLAN, "dispatcher")
    _rec(cli, "pending_authorisation", goal, {"action": "DROP TABLE billing_old", "reason": "irreversible"}, "builder")
    row = _status(cli, goal)
    assert row["state"] == "pending_authorisation" and "DROP TABLE" in str(row["blocker"])
    _, c, _ = cli("team", "continue", goal, agent="router")
    assert (c["state"], c["written"]) == ("pending_authorisation", [])
    _, ap, _ = cli("team", "approve", goal, "--by", "alice", agent="alice")
    assert ap["record"]["approved"] is True
    row = _status(cli, goal)
    assert (row["state"], row["next_stage"], row["next_role"]) == ("continueable", "action", "builder")
    _, m, _ = cli("team", "metrics", goal)
    assert m["goals"][0]["human_interventions"] == 1


def test_a_newer_action_reopens_a_closed_goal(cli: Cli) -> None:
    goal = cli("team", "start", "Fix the footer link")[1]["goal_id"]
    _rec(cli, "plan_record", goal, PLAN, "dispatcher")
    _rec(cli, "action_record", goal, ACTION, "builder")
    _rec(cli, "verdict", goal, GREEN, "verifier")
    _rec(cli, "archival_record", goal, {"outcome": "fixed"}, "archivist")
    assert _status(cli, goal)["state"] == "closed"
    _rec(cli, "action_record", goal, {**ACTION, "summary": "follow-up: the header link too"}, "builder")
    row = _status(cli, goal)
    assert (row["state"], row["next_role"]) == ("continueable", "verifier")
    assert cli("team", "metrics", goal)[1]["goals"][0]["reopenings"] == 1


def test_escalation_stops_the_goal_and_can_promote_it_to_full(cli: Cli) -> None:
    goal = cli("team", "start", "Migrate billing to the new region")[1]["goal_id"]
    _rec(cli, "plan_record", goal, PLAN, "dispatcher")
    _, e, _ = cli("team", "escalate", goal, "--reason", "needs a budget decision", "--question", "approve the extra spend?",
                  "--recommended-default", "stay in the old region", "--risk-of-waiting", "launch slips a week",
                  "--consulted", "builder", "--promote-to-full", "--level", "2")  # fmt: skip
    assert e["record"]["consulted_roles"] == ["builder"] and e["record"]["level"] == 2
    row = _status(cli, goal)
    assert (row["state"], row["mode"]) == ("blocked", "full") and "approve the extra spend?" in str(row["blocker"])
    cli("team", "handoff", goal, "--to", "builder", "--reason", "spend approved", "--from", "dispatcher")
    assert _status(cli, goal)["next_role"] == "builder"


def test_replay_as_of_shows_the_past_without_writing(cli: Cli) -> None:
    goal = cli("team", "start", "Add a status page")[1]["goal_id"]
    plan = _rec(cli, "plan_record", goal, PLAN, "dispatcher")
    time.sleep(0.01)
    # one clock read: the seconds and the fraction from two reads straddling a second boundary made "middle" a second early
    middle = dt.datetime.fromtimestamp(time.time(), dt.timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")
    time.sleep(0.01)
    _rec(cli, "action_record", goal, ACTION, "builder")
    past = cli("team", "status", goal, "--as-of", middle)[1]["goals"][0]
    assert (past["next_role"], past["latest_record_id"]) == ("builder", plan)
    assert _status(cli, goal)["next_role"] == "verifier"
    before = len(cli("team", "show", goal)[1]["records"])
    assert len(cli("team", "show", goal, "--as-of", middle)[1]["records"]) == before - 1
    assert len(cli("team", "show", goal)[1]["records"]) == before
    code, out, err = cli("team", "status", goal, "--as-of", "yesterday", ok=False)
    assert code == 1 and out["field"] == "as_of"


def test_show_graph_prints_mermaid(cli: Cli) -> None:
    goal = cli("team", "start", "Add a status page")[1]["goal_id"]
    plan = _rec(cli, "plan_record", goal, PLAN, "dispatcher")
    text = cli("team", "show", goal, "--graph")[1]["mermaid"]
    assert text.startswith("flowchart TD") and "r0 --> r1" in text and plan[-8:] in text


def test_refusals_are_one_line_errors_naming_the_field(cli: Cli) -> None:
    goal = cli("team", "start", "Add a status page")[1]["goal_id"]
    code, out, err = cli("team", "record", "plan_record", "--goal", goal, "--data", json.dumps({**PLAN, "deadline": "soon"}), ok=False)
    assert code == 1 and out["field"] == "deadline" and err.count("\n") == 1
    code, out, _ = cli("team", "record", "plan_record", "--goal", goal, "--data", "{not json", ok=False)
    assert code == 1 and out["field"] == "data"
    code, out, _ = cli("team", "record", "plan_record", "--goal", goal, "--data", "[" * 5000, ok=False)
    assert code == 1 and out["rule"] == "json"
    code, out, _ = cli("team", "handoff", goal, "--to", "janitor", "--reason", "x", ok=False)
    assert code == 1 and out["field"] == "role"


def test_record_reads_a_file(cli: Cli, tmp_path: Path) -> None:
    goal = cli("team", "start", "Add a status page")[1]["goal_id"]
    f = tmp_path / "plan.json"
    f.write_text(json.dumps(PLAN))
    _, out, _ = cli("team", "record", "plan_record", "--goal", goal, "--file", str(f))
    assert out["record"]["plan"] == PLAN["plan"]
    f.write_bytes(b"\xff\xfe{}")
    code, out, _ = cli("team", "record", "plan_record", "--goal", goal, "--file", str(f), ok=False)
    assert code == 1 and out["field"] == "file"


def test_claims_lease_fence_and_ready(cli: Cli) -> None:
    a = cli("team", "start", "Goal A")[1]["goal_id"]
    b = cli("team", "start", "Goal B")[1]["goal_id"]
    assert {g["goal_id"] for g in cli("team", "ready", "--role", "dispatcher")[1]["goals"]} == {a, b}
    _, lease, _ = cli("team", "claim", a, "--role", "dispatcher", "--ttl", "10m")
    assert lease["token"] == 1 and lease["holder"] == "dispatcher@dispatcher"
    code, out, _ = cli("team", "claim", a, "--role", "dispatcher", agent="other", ok=False)
    assert code == 1 and out["error"] == "LeaseHeldError"
    assert {g["goal_id"] for g in cli("team", "ready", "--role", "dispatcher")[1]["goals"]} == {b}
    code, out, _ = cli("team", "record", "plan_record", "--goal", a, "--data", json.dumps(PLAN), agent="other", ok=False)
    assert code == 1 and out["error"] == "LeaseHeldError"
    code, out, _ = cli("team", "record", "plan_record", "--goal", a, "--data", json.dumps(PLAN), "--token", "7", ok=False)
    assert code == 1 and out["error"] == "StaleFenceError"
    _rec(cli, "plan_record", a, {**PLAN, "lease_token": 1}, "dispatcher")
    cli("team", "release", a, "--token", "1")
    code, out, _ = cli("team", "record", "action_record", "--goal", a, "--data", json.dumps(ACTION), "--token", "1", agent="builder", ok=False)
    assert code == 1 and out["error"] == "StaleFenceError"
    assert cli("team", "claim", a, "--role", "builder", agent="builder")[1]["token"] == 2
    code, out, _ = cli("team", "claim", a, "--role", "builder", "--ttl", "forever", ok=False)
    assert code == 1 and out["field"] == "ttl"


def test_identity_must_be_set(cli: Cli, monkeypatch: object) -> None:
    import pytest

    mp = pytest.MonkeyPatch()
    mp.delenv("EDEN_ORG_ID")
    try:
        code, out, err = cli("team", "status", ok=False)
    finally:
        mp.undo()
    assert code == 1 and "EDEN_ORG_ID" in err and out["rule"] == "identity"


def test_a_goal_started_with_its_terms_is_handed_off_from_the_start(cli: Cli) -> None:
    _, out, _ = cli("team", "start", "Rotate the logs", "--success-criteria", "old logs gone",
                    "--deadline", "2026-12-09T12:00:00Z", "--escalation-trigger", "disk fills")  # fmt: skip
    goal = out["goal_id"]
    _, c, _ = cli("team", "continue", goal, agent="router")
    assert (c["next_role"], len(c["written"])) == ("dispatcher", 2)  # run log + hand-off
    row = _status(cli, goal)
    assert (row["deadline"], row["escalation_trigger"], row["next_stage"]) == ("2026-12-09T12:00:00Z", "disk fills", "plan")
    code, err_out, _ = cli("team", "start", "bad deadline", "--deadline", "tomorrow", ok=False)
    assert code == 1 and err_out["field"] == "deadline"
