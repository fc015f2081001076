"""What the ledger writes (content, metadata, ids) and everything it refuses, by field."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable

import pytest

from atomic_agents.atp import Identity, Ledger
from atomic_agents.exceptions import ConflictError, SecretRejectedError, ValidationError
from atomic_agents.memory import MemoryStore, Scope

from .conftest import ACTION, GREEN, PLAN, RED

Roles = Callable[[str], Ledger]


def _lite_to_action(as_role: Roles) -> tuple[str, str]:
    d = as_role("dispatcher")
    gid = d.start("Fix the billing deploy", requester="alice").goal_id
    d.write("plan_record", gid, PLAN)
    return gid, as_role("builder").write("action_record", gid, ACTION).id


def test_a_record_is_one_memory_that_names_itself(as_role: Roles, store: MemoryStore) -> None:
    w = as_role("dispatcher").start("Fix the billing deploy", requester="alice", constraints=["no downtime"])
    mem = store.get(w.id)
    first, second = mem.content.splitlines()[:2]
    assert first == f"Goal: {w.goal_id} | Record ID: {w.id} | Stage: goal_receipt | Owner: dispatcher"
    assert second == "goal_record: Fix the billing deploy"
    assert "constraints: no downtime" in mem.content
    meta = mem.metadata
    assert meta["record_type"] == meta["kind"] == "goal_record"
    assert (meta["goal_id"], meta["stage"], meta["owner_role"], meta["mode"], meta["status"]) == (
        w.goal_id, "goal_receipt", "dispatcher", "lite", "completed",
    )  # fmt: skip
    assert (meta["org_id"], meta["workspace_id"]) == ("acme", "acme/web")
    stored = dt.datetime.fromisoformat(meta["stored_at"].replace("Z", "+00:00"))
    assert stored.tzinfo == dt.timezone.utc and meta["stored_at"].endswith("Z")
    assert (mem.agent_id, mem.org_id, mem.workspace_id) == ("dispatcher", "acme", "acme/web")
    assert uuid.UUID(w.id).version == 5  # derived from the goal: one goal record per goal
    assert uuid.UUID(as_role("dispatcher").write("plan_record", w.goal_id, PLAN).id).version == 7  # time-ordered


def test_records_are_found_by_goal_id_and_by_the_status_query(as_role: Roles, store: MemoryStore) -> None:
    gid, action = _lite_to_action(as_role)
    scope = Scope("builder", "alice", "acme", "acme/web")
    assert action in {h.id for h in store.search(gid, scope)}
    # The protocol's status command searches eight words at once, any of them.
    words = "goal_record dispatch_instruction context_summary action_record verdict escalation_record archival_record hand_off_record"
    assert action in {h.id for h in store.search(words, scope)}


def test_a_goal_is_read_across_the_agents_of_its_workspace(as_role: Roles) -> None:
    gid, action = _lite_to_action(as_role)
    assert [r.agent_id for r in as_role("verifier").records(gid)] == ["dispatcher", "dispatcher", "builder"]
    other_ws = Ledger(as_role("x").store, Identity("acme", "acme/api", "verifier"))
    assert other_ws.records(gid) == []


@pytest.mark.parametrize(
    "kind,data,field,rule",
    [
        ("plan_record", {k: v for k, v in PLAN.items() if k != "success_criteria"}, "success_criteria", "required"),
        ("plan_record", {**PLAN, "deadline": "next friday"}, "deadline", "schema"),
        ("plan_record", {**PLAN, "deadline": "2026-13-45"}, "deadline", "schema"),
        ("plan_record", {**PLAN, "stage": "action"}, "stage", "kind-fit"),
        ("plan_record", {**PLAN, "owner_role": "builder"}, "owner_role", "kind-fit"),
        ("plan_record", {**PLAN, "sucess_criteria": "typo"}, "sucess_criteria", "unknown-field"),
        ("plan_record", {**PLAN, "target_role": "janitor"}, "target_role", "schema"),
        ("plan_record", {**PLAN, "input_record_ids": []}, "input_record_ids", "required"),
        ("plan_record", {**PLAN, "input_record_ids": ["nope"]}, "input_record_ids", "schema"),
        ("plan_record", {**PLAN, "input_record_ids": [str(uuid.uuid4())]}, "input_record_ids", "link"),
        ("plan_record", {**PLAN, "recalled_memory_ids": [str(uuid.uuid4())]}, "recalled_memory_ids", "link"),
        ("plan_record", {**PLAN, "status": "done"}, "status", "schema"),
        ("plan_record", {**PLAN, "workspace_id": "acme/api"}, "workspace_id", "identity"),
        ("plan_record", {**PLAN, "record_type": "plan"}, "record_type", "kind"),
        ("verdict", {**GREEN, "stage": "action"}, "stage", "kind-fit"),
        ("verdict", {"status": "amber", "evidence": "x", "scope_verified": "y"}, "status", "schema"),
        ("verdict", {"status": "blocked", "evidence": "x", "scope_verified": "y"}, "record", "schema"),
        ("action_record", {**ACTION, "owner_role": "verifier"}, "owner_role", "kind-fit"),
        ("archival_record", {"outcome": "done"}, "verdict_id", "green-verdict"),
        ("hand_off_record", {"to_role": "builder", "reason": "over to you"}, "success_criteria", "required"),
        ("context_summary", {"question": "which?", "recommended_next_step": "build", "sources": []}, "sources", "schema"),
    ],
)
def test_refused_at_write_naming_the_field(as_role: Roles, kind: str, data: dict[str, object], field: str, rule: str) -> None:
    d = as_role("dispatcher")
    gid = d.start("Fix the billing deploy", requester="alice").goal_id
    writer = {"verdict": "verifier", "action_record": "builder", "archival_record": "archivist", "context_summary": "researcher"}
    ledger = as_role(writer.get(kind, "dispatcher"))
    data = dict(data)
    data.setdefault("owner_role", {"verdict": "verifier", "archival_record": "archivist", "context_summary": "researcher"}.get(kind, data.get("owner_role", None)))
    if data["owner_role"] is None:
        del data["owner_role"]
    with pytest.raises(ValidationError) as err:
        ledger.write(kind, gid, data)
    assert (err.value.field, err.value.rule) == (field, rule), str(err.value)
    assert len(ledger.records(gid)) == 1  # nothing was written


def test_links_must_stay_inside_the_goal(as_role: Roles, store: MemoryStore) -> None:
    gid, action = _lite_to_action(as_role)
    other, _ = _lite_to_action(as_role)
    v = as_role("verifier")
    background = store.remember("deploys are flaky on Mondays", None, Scope("verifier", "alice", "acme", "acme/web"))
    cases = [
        ([gid], "link"),  # the goal id is not a record
        ([as_role("x").records(other)[-1].id], "cross-goal"),
        ([background], "cross-goal"),  # a memory belongs in recalled_memory_ids
    ]
    for ids, rule in cases:
        with pytest.raises(ValidationError) as err:
            v.write("verdict", gid, {**GREEN, "input_record_ids": ids})
        assert (err.value.field, err.value.rule) == ("input_record_ids", rule)
        assert "recalled_memory_ids" in str(err.value) or rule == "link"
    ok = v.write("verdict", gid, {**GREEN, "input_record_ids": [action], "recalled_memory_ids": [background]})
    assert store.get(ok.id).metadata["recalled_memory_ids"] == [background]


def test_the_verifier_never_verifies_its_own_work(as_role: Roles) -> None:
    gid, _ = _lite_to_action(as_role)
    with pytest.raises(ValidationError) as err:
        as_role("builder").write("verdict", gid, GREEN)
    assert (err.value.field, err.value.rule) == ("owner_instance", "self-verification")
    with pytest.raises(ValidationError):  # the same instance under another agent id is still itself
        as_role("other").write("verdict", gid, {**GREEN, "owner_instance": "builder"})
    assert as_role("verifier").write("verdict", gid, GREEN).kind == "verdict"


def test_verdict_id_must_name_a_verdict_of_the_goal(as_role: Roles) -> None:
    gid, action = _lite_to_action(as_role)
    with pytest.raises(ValidationError) as err:
        as_role("archivist").write("archival_record", gid, {"outcome": "done", "verdict_id": action})
    assert err.value.field == "verdict_id"


def test_archival_needs_a_green_verdict_newer_than_the_last_action(as_role: Roles) -> None:
    gid, _ = _lite_to_action(as_role)
    v, a = as_role("verifier"), as_role("archivist")
    red = v.write("verdict", gid, RED)
    with pytest.raises(ValidationError) as err:
        a.write("archival_record", gid, {"outcome": "done", "verdict_id": red.id})
    assert err.value.rule == "green-verdict"
    green = v.write("verdict", gid, GREEN)
    as_role("builder").write("action_record", gid, ACTION)  # new work after the green verdict
    with pytest.raises(ValidationError):
        a.write("archival_record", gid, {"outcome": "done", "verdict_id": green.id})
    green2 = v.write("verdict", gid, GREEN)
    w = a.write("archival_record", gid, {"outcome": "retry shipped"})  # verdict_id defaults to the latest green
    assert w.record["verdict_id"] == green2.id


def test_a_hand_off_copies_the_terms_of_the_latest_plan(as_role: Roles) -> None:
    gid, action = _lite_to_action(as_role)
    w = as_role("builder").handoff(gid, "verifier", "ready for checks")
    rec = w.record
    assert (rec["from_role"], rec["to_role"], rec["owner_role"]) == ("builder", "verifier", "builder")
    assert (rec["success_criteria"], rec["deadline"], rec["escalation_trigger"]) == (
        PLAN["success_criteria"], PLAN["deadline"], PLAN["escalation_trigger"],
    )  # fmt: skip
    assert rec["current_stage"] == "action" and rec["input_record_ids"] == [action] and rec["output_record_ids"] == [action]


@pytest.mark.parametrize(
    "text",
    [
        "Traceback (most recent call last):\n  File \"deploy.py\", line 3, in <module>\nKeyError: 'x'",
        "$ make test\n==== 3 failed ====\nFAILED test_deploy.py::test_retry\n",
        "deploy failed \x1b[31mERROR\x1b[0m",
        "Exception in thread main\n    at com.acme.Deploy.run(Deploy.java:42)\n    at com.acme.Main.main(Main.java:7)\n",
        "goroutine 1 [running]:\nmain.main()\n",
    ],
)
def test_raw_command_output_is_refused(as_role: Roles, text: str) -> None:
    gid, _ = _lite_to_action(as_role)
    with pytest.raises(ValidationError) as err:
        as_role("verifier").write("verdict", gid, {**RED, "evidence": text})
    assert (err.value.field, err.value.rule) == ("evidence", "raw-output")


def test_ordinary_evidence_mentioning_commands_is_kept(as_role: Roles) -> None:
    gid, _ = _lite_to_action(as_role)
    text = "Ran `make test` and `pytest -q tests/deploy`; 212 passed.\nThe $ sign in prices renders."
    assert as_role("verifier").write("verdict", gid, {**GREEN, "evidence": text}).kind == "verdict"


def test_a_secret_in_any_field_is_refused_and_never_echoed(as_role: Roles) -> None:
    gid, _ = _lite_to_action(as_role)
    secret = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    with pytest.raises(SecretRejectedError) as err:
        as_role("verifier").write("verdict", gid, {**GREEN, "evidence": f"used token {secret} to call the API"})
    assert err.value.field == "evidence"
    assert secret not in str(err.value) and secret not in repr(err.value.args)


def test_kinds_are_exact_on_write_with_a_hint(as_role: Roles) -> None:
    gid = as_role("dispatcher").start("x goal", requester="alice").goal_id
    with pytest.raises(ValidationError) as err:
        as_role("dispatcher").write("plan", gid, PLAN)
    assert err.value.field == "kind" and "plan_record" in str(err.value)


def test_unknown_goal_and_second_goal_record_are_refused(as_role: Roles) -> None:
    d = as_role("dispatcher")
    with pytest.raises(ValidationError) as err:
        d.write("plan_record", "no-such-goal", PLAN)
    assert (err.value.field, err.value.rule) == ("goal_id", "unknown-goal")
    gid = d.start("x goal", requester="alice", goal_id="goal-1").goal_id
    with pytest.raises(ConflictError):
        d.start("again", requester="alice", goal_id=gid)
    with pytest.raises(ValidationError) as err:
        d.start("bad id", requester="alice", goal_id="has space | pipe")
    assert err.value.field == "goal_id"


def test_owner_instance_and_next_role_are_always_written(as_role: Roles) -> None:
    gid, _ = _lite_to_action(as_role)
    w = as_role("builder").handoff(gid, "verifier", "ready for checks")
    assert (w.record["owner_instance"], w.record["next_role"]) == ("builder", "verifier")
    with pytest.raises(ValidationError) as err:
        as_role("builder").write("hand_off_record", gid, {"to_role": "verifier", "next_role": "archivist", "reason": "x"})
    assert "next_role" in str(err.value)


@pytest.mark.parametrize("goal_id", ["billing-retry-7f3a", "5b0e8f3c-2d1a-4c6e-9f7b-3a2d1c0e9b8a", "acme/web:goal.42"])
def test_sqlite_keyword_search_finds_records_by_goal_id_and_status_words(tmp_path, goal_id: str) -> None:  # type: ignore[no-untyped-def]
    from atomic_agents.memory import HashingEmbedder, SQLiteMemoryStore

    store = SQLiteMemoryStore(tmp_path / "m.db", embedder=HashingEmbedder())
    ledger = Ledger(store, Identity("acme", "acme/web", "dispatcher", "alice"))
    other = ledger.start("An unrelated goal about invoices", requester="alice", goal_id="other-goal").goal_id
    ledger.write("plan_record", other, PLAN)
    w = ledger.start("Fix the billing deploy", requester="alice", goal_id=goal_id)
    p = ledger.write("plan_record", goal_id, PLAN)
    scope = ledger.identity.scope
    assert {h.id for h in store.search(goal_id, scope, limit=50)} >= {w.id, p.id}
    assert all(h.memory.metadata["goal_id"] == goal_id for h in store.search(goal_id, scope, limit=50)[:2])
    words = "goal_record dispatch_instruction context_summary action_record verdict escalation_record archival_record hand_off_record"
    assert w.id in {h.id for h in store.search(words, scope, limit=50)}
    store.close()


@pytest.mark.parametrize(
    "data",
    [
        {"ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8": "x"},
        {"extra": {"ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8": "x"}},
        {"extra": {"note": ["ok", {"deep": "ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"}]}},
        {"files_changed": ["ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"]},
    ],
)
def test_a_secret_key_or_nested_value_is_never_echoed(as_role: Roles, data: dict[str, object]) -> None:
    gid, _ = _lite_to_action(as_role)
    secret = "ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    with pytest.raises(SecretRejectedError) as err:
        as_role("builder").write("action_record", gid, {**ACTION, **data})
    text = str(err.value) + repr(err.value.args) + str(err.value.to_dict())
    assert secret not in text and secret[:12] not in text
    assert err.value.field in {"data", "extra", "files_changed"}


def test_two_agents_starting_the_same_goal_at_once_make_one_goal_record(as_role: Roles, store: MemoryStore) -> None:
    from atomic_agents.atp import Kind

    a, b = as_role("dispatcher-a"), as_role("dispatcher-b")
    data = {"request": "ship it", "requester": "alice", "goal_id": "race-goal"}
    # Both read an empty chain before either writes (the race): the store's unique id decides.
    first = a._write(Kind.GOAL, "race-goal", dict(data), [], None)
    with pytest.raises(ConflictError) as err:
        b._write(Kind.GOAL, "race-goal", dict(data), [], None)
    assert "already has a goal_record" in str(err.value)
    assert [r.id for r in a.records("race-goal")] == [first.id]
