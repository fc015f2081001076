"""An adversarial review's findings, each pinned: tolerant read, closure, self-verification, echoes, fences."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from atomic_agents.atp import Ledger
from atomic_agents.exceptions import ConflictError, NotFoundError, SecretRejectedError, ValidationError
from atomic_agents.memory import Fence, LeaseHeldError, MemoryStore, Scope

from .conftest import ACTION, GREEN, PLAN, RED, Cli

Roles = Callable[[str], Ledger]
SECRET = "AKIAIOSFODNN7EXAMPLQ"


def _lite(as_role: Roles, gid: str = "g1") -> str:
    as_role("dispatcher").start("Fix the billing deploy", requester="alice", goal_id=gid)
    as_role("dispatcher").write("plan_record", gid, PLAN)
    return gid


def _raw(store: MemoryStore, content: str, **meta: object) -> str:
    return store.remember(content, meta, Scope("other", "u", "acme", "acme/web"))


# -- tolerant read ----------------------------------------------------------------------
def test_every_reader_sees_the_same_chain_and_doctor_names_what_it_left_out(as_role: Roles, store: MemoryStore) -> None:
    gid = _lite(as_role)
    content_only = _raw(store, f"Goal: {gid} | Record ID: x | Stage: escalation | Owner: dispatcher\nstop", stored_at="2030-01-01T00:00:00Z")
    no_kind = _raw(store, "did things", goal_id=gid, owner_role="builder", stage="implementation")
    ledger = as_role("router")
    one, every = ledger.status(gid)[0], [d for d in ledger.status() if d.goal_id == gid][0]
    assert one == every and one.state == "continueable"
    found = {f.record_id: f.problem for f in ledger.doctor()}
    assert "identity line" in found[content_only] and "no record kind" in found[no_kind]


@pytest.mark.parametrize("status,state", [("Green", "continueable"), ("BLOCKED", "blocked")])
def test_status_values_are_case_folded(as_role: Roles, store: MemoryStore, status: str, state: str) -> None:
    gid = _lite(as_role)
    kind = "verdict" if status == "Green" else "action_record"
    owner = "verifier" if kind == "verdict" else "builder"
    _raw(store, "x", goal_id=gid, record_type=kind, stage="verification" if kind == "verdict" else "action",
         owner_role=owner, status=status, stored_at="2030-01-01T00:00:00Z")  # fmt: skip
    d = as_role("router").decide(gid)
    assert d.state == state and (d.next_role == "archivist" if kind == "verdict" else d.blocker)
    assert any("read as" in f.problem for f in as_role("router").doctor())


@pytest.mark.parametrize("stored", [1764590000000, 1e20, "0001-01-01T00:00:00+14:00", "not a time", True])
def test_a_drifted_stored_at_never_crashes_and_falls_back(as_role: Roles, store: MemoryStore, stored: object) -> None:
    gid = _lite(as_role)
    mid = _raw(store, "did it", goal_id=gid, record_type="action_record", stage="action", owner_role="builder", stored_at=stored)
    ledger = as_role("router")
    shown = ledger.show(gid)
    assert mid in [r["id"] for r in shown["records"]] and ledger.graph(gid).startswith("flowchart")
    view = [r for r in ledger.records(gid) if r.id == mid][0]
    assert 0 < view.stored_at < 32503680000
    if stored == 1764590000000:
        assert int(view.stored_at) == 1764590000  # epoch milliseconds, as JavaScript tools write them


# -- closure, self-verification ------------------------------------------------------------
def test_no_archival_over_a_later_red_verdict_or_without_any_action(as_role: Roles) -> None:
    gid = _lite(as_role)
    as_role("builder").write("action_record", gid, ACTION)
    green = as_role("v1").write("verdict", gid, GREEN)
    as_role("v2").write("verdict", gid, RED)
    with pytest.raises(ValidationError) as err:
        as_role("archivist").write("archival_record", gid, {"outcome": "done", "verdict_id": green.id})
    assert err.value.rule == "green-verdict"
    with pytest.raises(ValidationError):
        as_role("archivist").write("archival_record", gid, {"outcome": "done"})  # the default is no better
    other = _lite(as_role, "g2")
    as_role("v1").write("verdict", other, GREEN)  # a verdict with nothing to verify
    with pytest.raises(ValidationError):
        as_role("archivist").write("archival_record", other, {"outcome": "done"})


def test_a_new_instance_name_under_the_same_agent_is_still_the_builder(as_role: Roles) -> None:
    gid = _lite(as_role)
    as_role("claude-code-cli").write("action_record", gid, ACTION)  # names no instance of its own
    with pytest.raises(ValidationError) as err:
        as_role("claude-code-cli").write("verdict", gid, {**GREEN, "owner_instance": "totally-someone-else"})
    assert err.value.rule == "self-verification"
    # Sessions sharing the default agent id that each name their instance are told apart.
    g2 = _lite(as_role, "g2")
    as_role("claude-code-cli").write("action_record", g2, {**ACTION, "owner_instance": "builder-1"})
    assert as_role("claude-code-cli").write("verdict", g2, {**GREEN, "owner_instance": "verifier-1"}).kind == "verdict"


# -- nothing echoed -------------------------------------------------------------------------
@pytest.mark.parametrize(
    "call",
    [
        lambda L, g: L.write("plan_record", g, {**PLAN, "owner_role": SECRET}),
        lambda L, g: L.write("plan_record", g, {**PLAN, "stage": SECRET}),
        lambda L, g: L.write(SECRET, g, PLAN),
        lambda L, g: L.write("plan_record", SECRET, PLAN),
        lambda L, g: L.handoff(g, SECRET, "x"),
        lambda L, g: L.status(role=SECRET),
        lambda L, g: L.decide(SECRET),
        lambda L, g: L.claim(g, SECRET),
    ],
)
def test_a_secret_given_anywhere_is_never_echoed(as_role: Roles, call: Callable[[Ledger, str], object]) -> None:
    gid = _lite(as_role)
    with pytest.raises((ValidationError, NotFoundError, SecretRejectedError)) as err:
        call(as_role("dispatcher"), gid)
    assert SECRET not in str(err.value) and SECRET not in repr(err.value.args)


# -- hand-offs, blocked and pending records -----------------------------------------------
def test_hand_off_rules(as_role: Roles) -> None:
    gid = _lite(as_role)
    b = as_role("builder")
    for data, needle in (({"output_record_ids": []}, "output"), ({"to_role": "router"}, "router")):
        with pytest.raises(ValidationError) as err:
            b.write("hand_off_record", gid, {"to_role": "verifier", "reason": "x", **data})
        assert needle in str(err.value)


def test_any_blocked_record_carries_its_unblock_condition(as_role: Roles) -> None:
    gid = _lite(as_role)
    with pytest.raises(ValidationError) as err:
        as_role("builder").write("action_record", gid, {**ACTION, "status": "blocked"})
    assert "unblock_condition" in str(err.value)
    as_role("builder").write("action_record", gid, {**ACTION, "status": "blocked", "unblock_condition": "staging back"})
    d = as_role("router").decide(gid)
    assert (d.state, d.blocker) == ("blocked", "staging back")
    with pytest.raises(ValidationError):
        as_role("router").write("run_log", gid, {"summary": "s", "status": "blocked"})


def test_a_pending_status_on_any_record_can_be_approved(as_role: Roles) -> None:
    gid = _lite(as_role)
    as_role("builder").write("action_record", gid, {**ACTION, "status": "pending_authorisation"})
    assert as_role("router").decide(gid).state == "pending_authorisation"
    as_role("alice").approve(gid, approved_by="alice")
    d = as_role("router").decide(gid)
    assert (d.state, d.next_role) == ("continueable", "builder")
    with pytest.raises(ConflictError):
        as_role("alice").approve(gid, approved_by="alice")


def test_a_run_log_takes_the_stage_the_goal_is_in(as_role: Roles) -> None:
    gid = _lite(as_role)
    as_role("builder").write("action_record", gid, ACTION)
    w = as_role("builder").write("run_log", gid, {"summary": "ran the deploy script"})
    assert w.record["stage"] == "action"


def test_charter_records_live_on_their_own_goal_and_can_be_shown(as_role: Roles) -> None:
    with pytest.raises(ValidationError) as err:
        as_role("archivist").write("charter_ratification", "any-goal", {})
    assert err.value.field == "goal_id"
    with pytest.raises(NotFoundError):
        as_role("archivist").show("charter-ratification")


# -- fences ------------------------------------------------------------------------------
def test_a_claim_granted_after_an_unclaimed_writer_looked_still_refuses_its_write(as_role: Roles, store: MemoryStore) -> None:
    gid = _lite(as_role)
    ledger = as_role("builder")
    fence = ledger._fence(gid, None)  # the writer looked: no claim
    assert fence == Fence(f"atp:acme:acme/web:{gid}", 0)
    as_role("verifier").claim(gid, "verifier")  # then someone claimed the goal
    with pytest.raises(LeaseHeldError):
        store.remember("late", {"goal_id": gid}, ledger.identity.scope, fence=fence)


# -- CLI ---------------------------------------------------------------------------------
def test_reading_commands_never_create_a_store(cli: Cli, tmp_path: Path) -> None:
    if cli.backend == "postgres":  # a DSN names a running server: reading an empty one is an empty table
        assert cli("team", "status")[1] == {"goals": []}
        return
    db = Path(str(tmp_path / "store" / "memory.db"))
    for argv in (["team", "status"], ["team", "status", "--as-of", "2026-01-01T00:00:00Z"], ["team", "show", "g"], ["team", "doctor"]):
        code, out, _ = cli(*argv, ok=False)
        assert code == 1 and out["error"] == "NotFoundError"
    assert not db.exists()
    cli("team", "start", "first goal")
    assert db.exists() and cli("team", "status")[1]["goals"][0]["state"] == "continueable"


def test_a_numeric_org_id_in_the_team_config_is_an_id(cli: Cli) -> None:
    (cli.root / ".claude").mkdir()
    (cli.root / ".claude" / "agentic-team-config.yaml").write_text("org_id: 5\nworkspace_id: 42\n")
    _, out, _ = cli("team", "start", "numbered org")
    assert (out["record"]["org_id"], out["record"]["workspace_id"]) == ("5", "42")


@pytest.mark.parametrize(
    "text",
    [
        "collected 3 items\n\ntests/test_x.py ..F\n=== 1 failed, 2 passed in 0.1s ===",
        "> app@1.0.0 test\n> jest\n\nFAIL src/x.test.js\n",
        "expect(received).toBe(expected)\n    at Object.<anonymous> (src/x.test.js:12:5)",
    ],
)
def test_test_runner_output_is_raw_output(as_role: Roles, text: str) -> None:
    gid = _lite(as_role)
    as_role("builder").write("action_record", gid, ACTION)
    with pytest.raises(ValidationError) as err:
        as_role("verifier").write("verdict", gid, {**RED, "evidence": text})
    assert err.value.rule == "raw-output"


def test_json_errors_keep_their_shape(cli: Cli) -> None:
    goal = cli("team", "start", "a goal")[1]["goal_id"]
    code, out, _ = cli("team", "claim", goal, "--role", "builder", "--ttl", "0s", ok=False)
    assert code == 1 and out["field"] == "ttl"
    assert json.dumps(out)  # one object on stdout
    assert uuid.UUID(cli("team", "status", goal)[1]["goals"][0]["latest_record_id"])
