"""A whole ATP goal run through MCP tools only, plus charter, claims, escalation and approval."""

from __future__ import annotations

from ._client import McpClient

PLAN = {"plan": "add a retry around the deploy step", "success_criteria": "two deploys in a row go green",
        "deadline": "2026-12-05T17:00:00Z", "escalation_trigger": "the deploy fails twice"}
ACTION = {"summary": "wrapped the deploy step in a retry", "rollback_steps": "git revert the retry commit", "files_changed": ["deploy.py"]}
GREEN = {"status": "green", "evidence": "ran the deploy twice, both green", "scope_verified": "deploy retry"}


def _as(agent: str) -> dict[str, str]:
    return {"agent_id": agent, "user_id": "alice"}


def _row(server: McpClient, goal: str) -> dict[str, object]:
    return dict(server.ok("atp_status", {"goal_id": goal})["goals"][0])


def test_a_lite_goal_runs_to_closure_through_mcp_only(server: McpClient) -> None:
    started = server.ok("atp_start", {**_as("dispatcher"), "request": "Add a retry to the billing deploy", "constraints": ["no downtime"]})
    goal = started["goal_id"]
    assert set(started) == {"goal_id", "record_id", "record"} and started["record"]["mode"] == "lite"
    assert (_row(server, goal)["next_stage"], _row(server, goal)["next_role"]) == ("plan", "dispatcher")
    server.ok("atp_record", {**_as("dispatcher"), "kind": "plan_record", "goal_id": goal, "data": PLAN})
    c = server.ok("atp_continue", {**_as("router"), "goal_id": goal})
    assert (c["next_stage"], c["next_role"], c["state"], len(c["written"])) == ("action", "builder", "continueable", 2)
    assert server.ok("atp_continue", {**_as("router"), "goal_id": goal})["written"] == []  # idempotent
    assert goal in [g["goal_id"] for g in server.ok("atp_ready", {"role": "builder"})["goals"]]
    lease = server.ok("atp_claim", {**_as("builder"), "goal_id": goal, "role": "builder", "ttl_ms": 60_000})
    assert lease["goal_id"] == goal and isinstance(lease["token"], int)
    assert goal not in [g["goal_id"] for g in server.ok("atp_ready", {"role": "builder"})["goals"]]
    held = server.error("atp_claim", {**_as("other"), "goal_id": goal, "role": "builder"})
    assert "LeaseHeld" in held["error"] or held["error"] == "ConflictError"
    server.ok("atp_record", {**_as("builder"), "kind": "action_record", "goal_id": goal, "data": ACTION, "token": lease["token"]})
    server.ok("atp_release", {**_as("builder"), "goal_id": goal, "token": lease["token"]})
    assert _row(server, goal)["next_role"] == "verifier"
    server.ok("atp_record", {**_as("verifier"), "kind": "verdict", "goal_id": goal, "data": GREEN})
    server.ok("atp_record", {**_as("archivist"), "kind": "archival_record", "goal_id": goal, "data": {"outcome": "retry shipped"}})
    row = _row(server, goal)
    assert (row["state"], row["next_role"], row["mode"]) == ("closed", None, "lite")
    chain = server.ok("atp_chain", {"goal_id": goal})
    assert chain["decision"]["state"] == "closed"
    kinds = [r["kind"] for r in chain["records"]]
    assert kinds[0] == "goal_record" and kinds[-1] == "archival_record" and "verdict" in kinds


def test_escalation_handoff_and_approval(server: McpClient) -> None:
    goal = server.ok("atp_start", {**_as("dispatcher"), "request": "Migrate billing to the new region"})["goal_id"]
    server.ok("atp_record", {**_as("dispatcher"), "kind": "plan_record", "goal_id": goal, "data": PLAN})
    e = server.ok("atp_escalate", {**_as("dispatcher"), "goal_id": goal, "reason": "needs a budget decision",
                                   "question": "approve the extra spend?", "recommended_default": "stay",
                                   "risk_of_waiting": "launch slips", "consulted_roles": ["builder"], "level": 2})
    assert e["record"]["level"] == 2
    assert _row(server, goal)["state"] == "blocked"
    server.ok("atp_handoff", {**_as("dispatcher"), "goal_id": goal, "to_role": "builder", "reason": "spend approved",
                              "from_role": "dispatcher"})
    assert _row(server, goal)["next_role"] == "builder"
    server.ok("atp_record", {**_as("builder"), "kind": "pending_authorisation", "goal_id": goal,
                             "data": {"action": "DROP TABLE billing_old", "reason": "irreversible"}})
    assert _row(server, goal)["state"] == "pending_authorisation"
    ap = server.ok("atp_approve", {**_as("alice"), "goal_id": goal, "approved_by": "alice"})
    assert ap["record"]["approved"] is True and _row(server, goal)["state"] == "continueable"


def test_the_charter_is_ratified_as_a_record(server: McpClient) -> None:
    out = server.ok("atp_ratify_charter", {**_as("archivist"), "rater": "alice"})
    assert out["record"]["proceed"] is True and out["record"]["charter_path"] == ".claude/agentic-team-charter.md"


def test_ledger_refusals_are_tool_errors(server: McpClient) -> None:
    assert server.error("atp_record", {"kind": "plan_record", "goal_id": "no-such-goal", "data": PLAN})["error"]
    bad = server.error("atp_record", {"kind": "no_such_kind", "goal_id": "g", "data": {}})
    assert bad["error"] == "ValidationError"
    assert server.error("atp_chain", {"goal_id": "never-started"})["error"] == "NotFoundError"
    assert server.ok("atp_status", {})["goals"]  # still serving
