"""Golden tests for the ATP router: record sequences -> (state, next stage, next role).

``decide`` is a pure function of a goal's records, so every case builds its
records in memory (through ``view_of``, the tolerant reader the ledger uses)
and needs no store. The table follows the router table of
``/work/shared/spec/atp-protocol-notes.md`` row by row, lite and full mode.

Where the router disagrees with the notes, the case states what the notes say
and is marked ``xfail(strict=True)``: it turns red the day the router is fixed,
so the mark has to be removed with the fix.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from atomic_agents.atp import Decision, Kind, RecordView, decide, view_of
from atomic_agents.atp._kinds import KIND_RULES

GOAL = "goal-7f3a"
T0 = 1_750_000_000  # whole seconds: stored_at survives the ISO round trip exactly
STEP = 60

Step = tuple[str, dict[str, Any]]

# Short step names -> (kind, metadata every such record carries). Extra metadata in a
# step overrides these; the private keys ``_id`` and ``_t`` set the record id and the
# stored_at offset (seconds from T0) when a case needs ties or a chosen order.
_TEMPLATES: dict[str, tuple[Kind, dict[str, Any]]] = {
    "goal": (Kind.GOAL, {"request": "add a retry to the billing deploy", "requester": "alice"}),
    "plan": (Kind.PLAN, {"plan": "retry with backoff", "success_criteria": "tests green",
                         "deadline": "2030-01-01T00:00:00Z", "escalation_trigger": "build fails twice"}),
    "dispatch": (Kind.DISPATCH, {"success_criteria": "tests green", "deadline": "2030-01-01T00:00:00Z",
                                 "escalation_trigger": "build fails twice"}),
    "context": (Kind.CONTEXT, {"question": "where to retry", "recommended_next_step": "dispatch to builder"}),
    "action": (Kind.ACTION, {"summary": "added retry", "rollback_steps": "git revert"}),
    "cleanup": (Kind.CLEANUP, {"summary": "removed temp files"}),
    "green": (Kind.VERDICT, {"status": "green", "evidence": "suite passed", "scope_verified": "retry"}),
    "red": (Kind.VERDICT, {"status": "red", "evidence": "2 tests fail", "scope_verified": "retry"}),
    "blocked_verdict": (Kind.VERDICT, {"status": "blocked", "evidence": "staging is down", "scope_verified": "retry",
                                       "unblock_condition": "staging back up"}),
    "escalation": (Kind.ESCALATION, {"reason": "needs prod access", "question": "may we deploy on Friday?",
                                     "recommended_default": "wait for Monday", "risk_of_waiting": "low"}),
    "archival": (Kind.ARCHIVAL, {"outcome": "retry shipped"}),
    "hand_off": (Kind.HAND_OFF, {"owner_role": "router", "from_role": "router", "reason": "next stage",
                                 "current_stage": "action"}),
    "run_log": (Kind.RUN_LOG, {"owner_role": "router", "stage": "action", "summary": "router ran"}),
    "pending": (Kind.PENDING, {"action": "run the prod migration", "reason": "touches prod",
                               "status": "pending_authorisation"}),
    "approval": (Kind.PENDING, {"action": "run the prod migration", "reason": "approved by bob",
                                "approved": True, "approved_by": "bob", "status": "completed"}),
    "charter": (Kind.CHARTER, {"charter_path": ".claude/agentic-team-charter.md", "proceed": True}),
}


def _iso(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).isoformat().replace("+00:00", "Z")


def build(steps: Sequence[Step | str], goal: str = GOAL) -> list[RecordView]:
    """The records of one goal, as the tolerant reader turns stored memories into views."""
    views: list[RecordView] = []
    for i, step in enumerate(steps):
        name, extra = (step, {}) if isinstance(step, str) else step
        kind, defaults = _TEMPLATES[name]
        extra = dict(extra)
        rid = extra.pop("_id", f"rec-{i:02d}")
        ts = T0 + extra.pop("_t", STEP * i)
        rule = KIND_RULES[kind]
        meta: dict[str, Any] = {
            "goal_id": goal, "record_type": kind.value, "kind": kind.value,
            "stage": rule.default_stage.value, "owner_role": rule.default_role.value,
            "input_record_ids": [views[-1].id] if views else [], "stored_at": _iso(ts),
            **defaults, **extra,
        }  # fmt: skip
        content = f"Goal: {goal} | Record ID: {rid} | Stage: {meta['stage']} | Owner: {meta['owner_role']}\n{name}"
        view = view_of(rid, content, meta, float(ts), agent_id=f"agent-{meta['owner_role']}")
        assert view is not None and view.kind == kind and view.stored_at == ts
        views.append(view)
    return views


@dataclass(frozen=True)
class Case:
    name: str
    mode: str  # the mode the decision must report
    steps: tuple[Step, ...]
    expect: tuple[str, str | None, str | None]  # (state, next_stage, next_role)
    also: dict[str, Any] = field(default_factory=dict)  # other Decision fields to check
    given: str = "in_order"  # or "reversed": records handed to decide out of order
    as_of_step: int | None = None  # decide as of the stored_at of this step
    xfail: str | None = None  # the router disagrees with the notes: why

    @property
    def stops(self) -> bool:
        return self.expect[0] in ("blocked", "pending_authorisation")


def c(name: str, mode: str, steps: Sequence[Step | str], expect: tuple[str, str | None, str | None], **kw: Any) -> Case:
    return Case(name, mode, tuple((s, {}) if isinstance(s, str) else s for s in steps), expect, **kw)


LITE: Step = ("goal", {"mode": "lite"})
FULL: Step = ("goal", {"mode": "full"})
NO_MODE: Step = ("goal", {"mode": None})


def dispatch(**kw: Any) -> Step:
    return ("dispatch", {"target_role": "builder", **kw})


def hand_off(to_role: str, **kw: Any) -> Step:
    return ("hand_off", {"to_role": to_role, **kw})


def archivist_hand_off(to_role: str) -> Step:
    return hand_off(to_role, owner_role="archivist", from_role="archivist", current_stage="recording_and_archival",
                    reason="goal closed")  # fmt: skip


CONT, BLOCKED, PENDING, ACTIVE, CLOSED = "continueable", "blocked", "pending_authorisation", "active", "closed"
PLAN_D, ROUTE_D = ("plan", "dispatcher"), ("routing_and_assignment", "dispatcher")
ACT_B, ACT_R, VERIFY, ARCHIVE = ("action", "builder"), ("action", "runtime"), ("verification", "verifier"), (
    "recording_and_archival", "archivist")
CTX = ("context_gathering", "researcher")
STOP = (None, None)

LITE_CLOSED: list[Step | str] = [LITE, "plan", "action", "green", "archival"]
FULL_CLOSED: list[Step | str] = [FULL, dispatch(), "action", "green", "archival"]

CASES: list[Case] = [
    # -- goal_record only ---------------------------------------------------------------
    c("lite goal only", "lite", [LITE], (CONT, *PLAN_D)),
    c("full goal only", "full", [FULL], (CONT, *ROUTE_D)),
    c("goal without mode and no plan is full", "full", [NO_MODE], (CONT, *ROUTE_D)),
    # -- plan_record (lite) ---------------------------------------------------------------
    c("plan without target_role -> builder", "lite", [LITE, ("plan", {})], (CONT, *ACT_B)),
    c("plan with target_role builder", "lite", [LITE, ("plan", {"target_role": "builder"})], (CONT, *ACT_B)),
    c("plan with target_role runtime", "lite", [LITE, ("plan", {"target_role": "runtime"})], (CONT, *ACT_R)),
    c("plan makes a mode-less goal lite", "lite", [NO_MODE, "plan"], (CONT, *ACT_B)),
    c("plan only, no goal record: lite", "lite", ["plan"], (CONT, *ACT_B)),
    # -- dispatch_instruction (full) --------------------------------------------------------
    c("dispatch research package -> researcher", "full",
      [FULL, dispatch(package_type="research", target_role="researcher")], (CONT, *CTX)),
    c("dispatch research package wins over a builder target", "full",
      [FULL, dispatch(package_type="research")], (CONT, *CTX)),
    c("goal's research package_type -> researcher", "full",
      [("goal", {"mode": "full", "package_type": "research"}), dispatch()], (CONT, *CTX)),
    c("dispatch build -> target builder", "full", [FULL, dispatch(package_type="build")], (CONT, *ACT_B)),
    c("dispatch build -> target runtime", "full",
      [FULL, dispatch(package_type="build", target_role="runtime")], (CONT, *ACT_R)),
    c("dispatch without target_role -> builder", "full",
      [FULL, ("dispatch", {"package_type": "build"})], (CONT, *ACT_B)),
    c("dispatch without target_role or package -> builder", "full", [FULL, ("dispatch", {})], (CONT, *ACT_B)),
    c("dispatch run package -> runtime", "full", [FULL, ("dispatch", {"package_type": "run"})], (CONT, *ACT_R)),
    c("goal's run package_type -> runtime", "full",
      [("goal", {"mode": "full", "package_type": "run"}), ("dispatch", {})], (CONT, *ACT_R)),
    # -- context_summary (full) -------------------------------------------------------------
    c("context summary -> builder by default", "full",
      [FULL, dispatch(package_type="research", target_role="researcher"), "context"], (CONT, *ACT_B)),
    c("context summary -> the dispatch's target runtime", "full",
      [FULL, dispatch(package_type="research", target_role="runtime"), "context"], (CONT, *ACT_R)),
    c("context summary -> run package's runtime", "full",
      [("goal", {"mode": "full", "package_type": "run"}), dispatch(target_role="researcher"), "context"],
      (CONT, *ACT_R)),
    # -- action_record, cleanup_record -------------------------------------------------------
    c("lite action -> verifier", "lite", [LITE, "plan", "action"], (CONT, *VERIFY)),
    c("full action -> verifier", "full", [FULL, dispatch(), "action"], (CONT, *VERIFY)),
    c("lite cleanup -> verifier", "lite", [LITE, "plan", "action", "cleanup"], (CONT, *VERIFY)),
    c("full cleanup -> verifier", "full",
      [FULL, dispatch(package_type="research", target_role="researcher"), "context", "action", "cleanup"],
      (CONT, *VERIFY)),
    c("runtime action -> verifier", "full",
      [FULL, ("dispatch", {"package_type": "run"}), ("action", {"owner_role": "runtime"})], (CONT, *VERIFY)),
    # -- verdict red: rework by the dispatcher ----------------------------------------------
    c("lite red verdict -> plan rework", "lite", [LITE, "plan", "action", "red"], (CONT, *PLAN_D)),
    c("full red verdict -> routing rework", "full", [FULL, dispatch(), "action", "red"], (CONT, *ROUTE_D)),
    c("lite rework plan after red -> builder", "lite", [LITE, "plan", "action", "red", "plan"], (CONT, *ACT_B)),
    c("full re-dispatch after red -> runtime", "full",
      [FULL, dispatch(), "action", "red", dispatch(target_role="runtime")], (CONT, *ACT_R)),
    c("lite second action after rework -> verifier", "lite",
      [LITE, "plan", "action", "red", "plan", "action"], (CONT, *VERIFY)),
    # -- verdict blocked, or any record with status blocked ------------------------------------
    c("lite blocked verdict stops with its unblock condition", "lite",
      [LITE, "plan", "action", "blocked_verdict"], (BLOCKED, *STOP), also={"blocker": "staging back up"}),
    c("full blocked verdict stops with its unblock condition", "full",
      [FULL, dispatch(), "action", "blocked_verdict"], (BLOCKED, *STOP), also={"blocker": "staging back up"}),
    c("action with status blocked", "full",
      [FULL, dispatch(), ("action", {"status": "blocked", "unblock_condition": "CI runner back"})],
      (BLOCKED, *STOP), also={"blocker": "CI runner back"}),
    c("plan with status blocked", "lite",
      [LITE, ("plan", {"status": "blocked", "unblock_condition": "requester answers"})],
      (BLOCKED, *STOP), also={"blocker": "requester answers"}),
    c("goal with status blocked", "full", [("goal", {"mode": "full", "status": "blocked",
                                                     "unblock_condition": "budget approved"})],
      (BLOCKED, *STOP), also={"blocker": "budget approved"}),
    c("a run log does not lift a block", "lite",
      [LITE, "plan", "action", "blocked_verdict", "run_log"], (BLOCKED, *STOP), also={"blocker": "staging back up"}),
    c("a newer record resumes a blocked goal (lite)", "lite",
      [LITE, "plan", "action", "blocked_verdict", "plan"], (CONT, *ACT_B)),
    c("a newer record resumes a blocked goal (full)", "full",
      [FULL, dispatch(), ("action", {"status": "blocked", "unblock_condition": "x"}), "action"], (CONT, *VERIFY)),
    # -- pending_authorisation -------------------------------------------------------------
    c("lite pending authorisation stops", "lite", [LITE, "plan", "pending"], (PENDING, *STOP),
      also={"blocker": "waiting for authorisation: run the prod migration"}),
    c("full pending authorisation stops", "full", [FULL, dispatch(), "pending"], (PENDING, *STOP)),
    c("any record with status pending_authorisation stops", "full",
      [FULL, dispatch(), ("action", {"status": "pending_authorisation"})], (PENDING, *STOP)),
    c("a run log does not approve", "full", [FULL, dispatch(), "pending", "run_log"], (PENDING, *STOP)),
    c("lite approval -> builder", "lite", [LITE, "plan", "pending", "approval"], (CONT, *ACT_B)),
    c("full approval -> builder", "full", [FULL, dispatch(), "pending", "approval"], (CONT, *ACT_B)),
    c("dispatcher's pending, approved -> builder", "full",
      [FULL, dispatch(), ("pending", {"owner_role": "dispatcher"}), ("approval", {"owner_role": "dispatcher"})],
      (CONT, *ACT_B)),
    # (ours) the notes say "then action / builder"; a live operation the runtime asked to run goes back to it.
    c("runtime's pending, approved -> runtime (ours)", "full",
      [FULL, dispatch(target_role="runtime"), ("pending", {"owner_role": "runtime"}),
       ("approval", {"owner_role": "runtime"})], (CONT, "action", "runtime")),
    c("a hand-off does not bypass a pending authorisation (notes: stop until approved)", "lite",
      [LITE, "plan", "pending", hand_off("builder", current_stage="pending_authorisation")], (PENDING, *STOP)),
    c("a new plan replaces the step waiting for authorisation", "lite",
      [LITE, "plan", "pending", "plan"], (CONT, *ACT_B)),
    # -- verdict green ----------------------------------------------------------------------
    c("lite green -> archivist", "lite", [LITE, "plan", "action", "green"], (CONT, *ARCHIVE)),
    c("full green -> archivist", "full", [FULL, dispatch(), "action", "green"], (CONT, *ARCHIVE)),
    c("green after rework -> archivist", "full",
      [FULL, dispatch(), "action", "red", dispatch(), "action", "green"], (CONT, *ARCHIVE)),
    # -- hand_off_record: its to_role, never terminal ----------------------------------------
    c("lite hand-off to builder", "lite", [LITE, "plan", hand_off("builder")], (CONT, *ACT_B)),
    c("full hand-off to researcher", "full", [FULL, dispatch(), hand_off("researcher")], (CONT, *CTX)),
    c("full hand-off to archivist after green", "full",
      [FULL, dispatch(), "action", "green", hand_off("archivist", owner_role="verifier", from_role="verifier")],
      (CONT, *ARCHIVE)),
    c("hand-off to verifier", "lite", [LITE, "plan", "action", hand_off("verifier")], (CONT, *VERIFY)),
    c("lite hand-off to dispatcher -> plan", "lite", [LITE, "plan", hand_off("dispatcher")], (CONT, *PLAN_D)),
    c("full hand-off to dispatcher -> routing", "full", [FULL, dispatch(), hand_off("dispatcher")], (CONT, *ROUTE_D)),
    c("hand-off's next_stage is kept", "full",
      [FULL, dispatch(), "action", hand_off("builder", next_stage="cleanup")], (CONT, "cleanup", "builder")),
    c("hand-off to builder after archival reopens (lite)", "lite",
      [*LITE_CLOSED, hand_off("builder", reason="follow-up fix")], (CONT, *ACT_B)),
    c("hand-off to builder after archival reopens (full)", "full",
      [*FULL_CLOSED, hand_off("builder", reason="follow-up fix")], (CONT, *ACT_B)),
    c("hand-off to builder after the closing hand-off reopens", "lite",
      [*LITE_CLOSED, archivist_hand_off("dispatcher"), hand_off("builder", owner_role="dispatcher",
                                                                 from_role="dispatcher")], (CONT, *ACT_B)),
    c("archivist's hand-off to builder after archival (notes: hand-off -> to_role)", "full",
      [*FULL_CLOSED, archivist_hand_off("builder")], (CONT, *ACT_B)),
    # -- run_log: decide from the newest record that is not a run log --------------------------
    c("lite run log skipped", "lite", [LITE, "plan", "run_log"], (CONT, *ACT_B), also={"latest_record_id": "rec-01"}),
    c("full run logs skipped", "full", [FULL, dispatch(), "action", "run_log", "run_log"], (CONT, *VERIFY),
      also={"latest_record_id": "rec-02", "latest_kind": "action_record", "records": 5}),
    c("a blocked run log is still skipped", "lite",
      [LITE, ("run_log", {"status": "blocked", "unblock_condition": "n/a"})], (CONT, *PLAN_D)),
    # -- archival_record -------------------------------------------------------------------
    c("lite archival closes", "lite", LITE_CLOSED, (CLOSED, *STOP)),
    c("full archival closes", "full", FULL_CLOSED, (CLOSED, *STOP)),
    c("run log after archival: still closed", "full", [*FULL_CLOSED, "run_log"], (CLOSED, *STOP)),
    c("lite newer action after archival -> verifier (reopened)", "lite", [*LITE_CLOSED, "action"], (CONT, *VERIFY)),
    c("full newer action after archival -> verifier (reopened)", "full", [*FULL_CLOSED, "action"], (CONT, *VERIFY)),
    c("reopened goal closes again", "full", [*FULL_CLOSED, "action", "green", "archival"], (CLOSED, *STOP)),
    c("lite archivist's hand-off after archival closes", "lite",
      [*LITE_CLOSED, archivist_hand_off("dispatcher")], (CLOSED, *STOP)),
    c("full archivist's hand-off after archival closes", "full",
      [*FULL_CLOSED, archivist_hand_off("dispatcher")], (CLOSED, *STOP)),
    c("archivist's hand-off after archival and a run log closes", "full",
      [*FULL_CLOSED, "run_log", archivist_hand_off("dispatcher")], (CLOSED, *STOP)),
    # -- escalation_record -------------------------------------------------------------------
    c("lite escalation stops", "lite", [LITE, "plan", "escalation"], (BLOCKED, *STOP),
      also={"blocker": "escalation awaiting an answer: may we deploy on Friday?"}),
    c("full escalation stops", "full", [FULL, dispatch(), "action", "escalation"], (BLOCKED, *STOP)),
    c("a run log does not answer an escalation", "full", [FULL, dispatch(), "escalation", "run_log"],
      (BLOCKED, *STOP)),
    c("a newer record answers the escalation", "full", [FULL, dispatch(), "escalation", dispatch()], (CONT, *ACT_B)),
    c("promote_to_full makes a lite goal full (still stopped)", "full",
      [LITE, "plan", ("escalation", {"promote_to_full": True})], (BLOCKED, *STOP)),
    c("promoted goal routes as full: dispatch research", "full",
      [LITE, "plan", ("escalation", {"promote_to_full": True}), dispatch(package_type="research")], (CONT, *CTX)),
    c("promoted goal's red verdict -> routing rework", "full",
      [LITE, "plan", ("escalation", {"promote_to_full": True}), dispatch(), "action", "red"], (CONT, *ROUTE_D)),
    c("promoted goal as of before the escalation is still lite", "lite",
      [LITE, "plan", "action", "red", ("escalation", {"promote_to_full": True}), dispatch()], (CONT, *PLAN_D),
      as_of_step=3),
    c("escalation without promotion keeps lite", "lite",
      [LITE, "plan", "action", "red", ("escalation", {"promote_to_full": False}), "action", "red"],
      (CONT, *PLAN_D)),
    # -- mode inference ------------------------------------------------------------------------
    c("goal's mode full wins over a plan", "full", [FULL, "plan"], (CONT, *ACT_B)),
    c("goal's mode lite wins over a dispatch: red -> plan", "lite", [LITE, dispatch(), "action", "red"],
      (CONT, *PLAN_D)),
    c("mode-less goal with a plan: red -> plan rework", "lite", [NO_MODE, "plan", "action", "red"], (CONT, *PLAN_D)),
    c("mode-less goal with a dispatch: red -> routing rework", "full", [NO_MODE, dispatch(), "action", "red"],
      (CONT, *ROUTE_D)),
    # -- order: ties by id, input in any order ------------------------------------------------
    c("tie in stored_at: the greater id is latest (verdict)", "lite",
      [LITE, "plan", ("action", {"_id": "rec-a", "_t": 600}), ("green", {"_id": "rec-b", "_t": 600})],
      (CONT, *ARCHIVE), also={"latest_record_id": "rec-b"}),
    c("tie in stored_at: the greater id is latest (action)", "lite",
      [LITE, "plan", ("green", {"_id": "rec-a", "_t": 600}), ("action", {"_id": "rec-b", "_t": 600})],
      (CONT, *VERIFY), also={"latest_record_id": "rec-b"}),
    c("tie against the archival: greater id wins", "full",
      [FULL, dispatch(), "action", "green", ("archival", {"_id": "rec-z", "_t": 900}),
       ("action", {"_id": "rec-y", "_t": 900})], (CLOSED, *STOP)),
    c("records given newest first (full)", "full", FULL_CLOSED[:-1], (CONT, *ARCHIVE), given="reversed"),
    c("records given newest first (lite)", "lite", [LITE, "plan", "action", "red"], (CONT, *PLAN_D),
      given="reversed"),
    c("stored_at, not input order, decides", "lite",
      [LITE, ("plan", {"_t": 100}), ("green", {"_t": 400}), ("action", {"_t": 300})], (CONT, *ARCHIVE)),
    # -- as_of replay ------------------------------------------------------------------------
    c("as of the action of a closed lite goal", "lite", LITE_CLOSED, (CONT, *VERIFY), as_of_step=2),
    c("as of the dispatch of a closed full goal", "full", FULL_CLOSED, (CONT, *ACT_B), as_of_step=1),
    c("as of a blocked verdict later lifted", "full",
      [FULL, dispatch(), "action", "blocked_verdict", "action", "green"], (BLOCKED, *STOP), as_of_step=3),
    # -- in progress: the role is at work ------------------------------------------------------
    c("lite action in progress -> active", "lite", [LITE, "plan", ("action", {"status": "in_progress"})],
      (ACTIVE, *ACT_B)),
    c("full context summary in progress -> active", "full",
      [FULL, dispatch(package_type="research", target_role="researcher"), ("context", {"status": "in_progress"})],
      (ACTIVE, *CTX)),
    c("full dispatch in progress -> active", "full", [FULL, ("dispatch", {"status": "in_progress"})],
      (ACTIVE, *ROUTE_D)),
    # -- charter ratifications sit outside the chain ------------------------------------------
    c("a charter ratification is not part of the chain", "lite", [LITE, "charter"], (CONT, *PLAN_D),
      also={"records": 1, "latest_record_id": "rec-00"}),
    # -- location and terms in force -------------------------------------------------------
    c("location: worktree_path of the latest action", "full",
      [FULL, dispatch(), ("action", {"worktree_path": "/w/one"}), "red", dispatch(),
       ("action", {"worktree_path": "/w/two"}), "cleanup", "green"], (CONT, *ARCHIVE), also={"location": "/w/two"}),
    c("location: latest action without a worktree -> main checkout", "lite",
      [LITE, "plan", ("action", {"worktree_path": "/w/one"}), "red", "plan", "action"], (CONT, *VERIFY),
      also={"location": "main checkout"}),
    c("location: no action yet -> main checkout", "full", [FULL, dispatch()], (CONT, *ACT_B),
      also={"location": "main checkout", "deadline": "2030-01-01T00:00:00Z",
            "escalation_trigger": "build fails twice"}),
    c("terms: the newest hand-off's deadline and trigger", "full",
      [FULL, dispatch(), "action", "green",
       hand_off("archivist", deadline="2030-02-02T00:00:00Z", escalation_trigger="archive fails")],
      (CONT, *ARCHIVE), also={"deadline": "2030-02-02T00:00:00Z", "escalation_trigger": "archive fails"}),
    c("terms: the rework plan replaces the first plan's", "lite",
      [LITE, "plan", "action", "red", ("plan", {"deadline": "2030-03-03T00:00:00Z", "escalation_trigger": "again"})],
      (CONT, *ACT_B), also={"deadline": "2030-03-03T00:00:00Z", "escalation_trigger": "again"}),
    c("terms: a newer dispatch replaces an older hand-off's", "full",
      [FULL, hand_off("dispatcher", deadline="2030-04-04T00:00:00Z", escalation_trigger="old"),
       dispatch(deadline="2030-05-05T00:00:00Z", escalation_trigger="new")],
      (CONT, *ACT_B), also={"deadline": "2030-05-05T00:00:00Z", "escalation_trigger": "new"}),
    c("terms: none before a plan or dispatch", "lite", [LITE], (CONT, *PLAN_D),
      also={"deadline": None, "escalation_trigger": None}),
]


def _param(case: Case) -> Any:
    marks = [pytest.mark.xfail(strict=True, reason=case.xfail)] if case.xfail else []
    return pytest.param(case, id=f"{case.mode}: {case.name}", marks=marks)


def test_the_table_is_large_and_covers_both_modes() -> None:
    assert len(CASES) >= 40
    assert len({case.name for case in CASES}) == len(CASES), "case names must be unique"
    assert sum(case.mode == "lite" for case in CASES) >= 20
    assert sum(case.mode == "full" for case in CASES) >= 20


@pytest.mark.parametrize("case", [_param(case) for case in CASES])
def test_golden(case: Case) -> None:
    views = build(case.steps)
    given_views = list(reversed(views)) if case.given == "reversed" else views
    as_of = views[case.as_of_step].stored_at if case.as_of_step is not None else None
    d = decide(given_views, as_of=as_of)
    assert d is not None
    assert (d.state, d.next_stage, d.next_role) == case.expect
    assert d.mode == case.mode
    assert d.goal_id == GOAL
    for key, want in case.also.items():
        assert getattr(d, key) == want, key
    if case.stops:
        assert d.blocker, "a goal that stops must say why"
    else:
        assert d.blocker is None


# -- the router's contract beyond the table ---------------------------------------------------


def test_no_records_no_decision() -> None:
    assert decide([]) is None
    assert decide(build([LITE, "plan"]), as_of=T0 - 1) is None


def test_as_of_reports_its_time_and_otherwise_equals_the_prefix() -> None:
    views = build(LITE_CLOSED)
    t = views[2].stored_at
    d = decide(views, as_of=t)
    assert d is not None and d.as_of == _iso(t).replace("Z", ".000000Z")
    assert dataclasses.replace(d, as_of=None) == decide(views[:3])


def test_decide_does_not_touch_its_input() -> None:
    views = build([*FULL_CLOSED, "action"])
    shuffled = [views[3], views[0], views[5], views[1], views[4], views[2]]
    before = list(shuffled)
    decide(shuffled)
    assert shuffled == before


def test_decision_serialises() -> None:
    d = decide(build([FULL, dispatch(), ("action", {"worktree_path": "/w/x"})]))
    assert d is not None
    assert d.to_dict() == {
        "goal_id": GOAL, "mode": "full", "stage": "action", "owner_role": "builder", "state": "continueable",
        "next_stage": "verification", "next_role": "verifier", "latest_record_id": "rec-02",
        "latest_kind": "action_record", "deadline": "2030-01-01T00:00:00Z",
        "escalation_trigger": "build fails twice", "location": "/w/x", "blocker": None, "records": 3, "as_of": None,
    }  # fmt: skip


# -- properties (hypothesis) ------------------------------------------------------------------

_POOL: list[Step] = [
    LITE, FULL, NO_MODE, ("plan", {}), ("plan", {"target_role": "runtime"}), dispatch(),
    dispatch(package_type="research", target_role="researcher"), ("dispatch", {"package_type": "run"}),
    ("context", {}), ("action", {}), ("action", {"worktree_path": "/w/p"}), ("action", {"status": "in_progress"}),
    ("cleanup", {}), ("green", {}), ("red", {}), ("blocked_verdict", {}), ("escalation", {}),
    ("escalation", {"promote_to_full": True}), ("archival", {}), hand_off("builder"), hand_off("verifier"),
    archivist_hand_off("dispatcher"), ("run_log", {}), ("pending", {}), ("approval", {}), ("charter", {}),
    ("plan", {"status": "blocked", "unblock_condition": "u"}),
]  # fmt: skip


@st.composite
def goal_records(draw: st.DrawFn) -> list[RecordView]:
    """A goal's records: steps from the pool at times drawn from a small range, so ties are common."""
    picks = draw(st.lists(st.sampled_from(_POOL), min_size=1, max_size=12))
    times = draw(st.lists(st.integers(0, 8), min_size=len(picks), max_size=len(picks)))
    ids = draw(st.permutations([f"rec-{i:02d}" for i in range(len(picks))]))
    steps = [(name, {**extra, "_t": 60 * t, "_id": rid}) for (name, extra), t, rid in zip(picks, times, ids)]
    return build(steps)


def _without_as_of(d: Decision | None) -> Decision | None:
    return None if d is None else dataclasses.replace(d, as_of=None)


@settings(max_examples=300, deadline=None)
@given(records=goal_records(), data=st.data())
def test_decide_is_deterministic_and_order_independent(records: list[RecordView], data: st.DataObject) -> None:
    shuffled = data.draw(st.permutations(records))
    first = decide(records)
    assert decide(records) == first
    assert decide(shuffled) == first
    assert decide(tuple(reversed(records))) == first


@settings(max_examples=300, deadline=None)
@given(records=goal_records(), t=st.integers(-1, 9), data=st.data())
def test_as_of_equals_the_prefix(records: list[RecordView], t: int, data: st.DataObject) -> None:
    as_of = float(T0 + 60 * t)
    shuffled = data.draw(st.permutations(records))
    replay = decide(shuffled, as_of=as_of)
    prefix = decide([r for r in records if r.stored_at <= as_of])
    assert _without_as_of(replay) == prefix
    if replay is not None:
        assert replay.as_of is not None and replay.as_of.startswith(_iso(as_of)[:19])


@settings(max_examples=200, deadline=None)
@given(records=goal_records())
def test_a_newest_run_log_changes_nothing_but_the_count(records: list[RecordView]) -> None:
    before = decide(records)
    assume(before is not None and any(r.kind != Kind.RUN_LOG for r in records))
    assert before is not None
    newest = max(r.stored_at for r in records) - T0 + 60
    extra = build([("run_log", {"_t": newest, "_id": "rec-zz"})])
    after = decide([*records, *extra])
    assert after == dataclasses.replace(before, records=before.records + 1)
