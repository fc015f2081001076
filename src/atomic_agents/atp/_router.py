"""The router: where a goal stands and who runs next, as a pure function of its records.

``decide(records)`` follows the router table of ``atp-protocol-notes.md``; it
reads nothing, writes nothing and takes an ``as_of`` time for replay, so the
same records always give the same answer (unlike the public Go router, which
treats any hand-off as terminal, has no tie-break and no lite mode).

Rules marked **(ours)** are choices where the notes are silent.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from ._kinds import (
    CHAIN_KINDS,
    ROLE_OF_PACKAGE,
    Kind,
    Mode,
    PackageType,
    RecordStatus,
    Role,
    Stage,
    State,
    VerdictStatus,
    stage_for_role,
)
from ._view import RecordView

__all__ = ["Decision", "decide", "goal_mode"]

_MAIN_CHECKOUT = "main checkout"
_ROLES = {r.value for r in Role}
_STAGES = {s.value for s in Stage}


@dataclass(frozen=True)
class Decision:
    """A goal's place in its lifecycle at ``as_of`` (``None``: now), and what comes next."""

    goal_id: str
    mode: str
    stage: str
    owner_role: str
    state: str
    next_stage: str | None
    next_role: str | None
    latest_record_id: str
    latest_kind: str
    deadline: str | None
    escalation_trigger: str | None
    location: str
    blocker: str | None
    records: int
    as_of: str | None = None

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def goal_mode(records: Sequence[RecordView]) -> Mode:
    """The goal record's ``mode``; else lite if a plan record exists; else full (notes).

    (ours) An escalation that promotes a lite goal to full makes it full from then on.
    """
    if any(r.kind == Kind.ESCALATION and r.get("promote_to_full") is True for r in records):
        return Mode.FULL
    for r in records:
        if r.kind == Kind.GOAL and r.get("mode") in (Mode.LITE, Mode.FULL):
            return Mode(r.get("mode"))
    return Mode.LITE if any(r.kind == Kind.PLAN for r in records) else Mode.FULL


def decide(records: Sequence[RecordView], *, as_of: float | None = None) -> Decision | None:
    """The decision for one goal's records (any order); ``None`` if none exist at ``as_of``."""
    recs = sorted(
        (r for r in records if r.kind in CHAIN_KINDS and (as_of is None or r.stored_at <= as_of)),
        key=RecordView.sort_key,
    )
    if not recs:
        return None
    mode = goal_mode(recs)
    # notes: run logs are skipped; decide from the newest record that is not a run log.
    # A chain of run logs only (no goal record) is read from its first one, so appending run logs changes nothing.
    work = [r for r in recs if r.kind != Kind.RUN_LOG] or recs[:1]
    latest = work[-1]
    state, next_stage, next_role, blocker = _next(work, latest, mode)
    terms = _terms(work)
    return Decision(
        goal_id=latest.goal_id,
        mode=mode.value,
        stage=latest.stage or latest.kind.value,
        owner_role=latest.owner_role,
        state=state.value,
        next_stage=next_stage,
        next_role=next_role,
        latest_record_id=latest.id,
        latest_kind=latest.kind.value,
        deadline=terms[0],
        escalation_trigger=terms[1],
        location=_location(work),
        blocker=blocker,
        records=len(recs),
        as_of=_iso(as_of) if as_of is not None else None,
    )


def _next(work: list[RecordView], latest: RecordView, mode: Mode) -> tuple[State, str | None, str | None, str | None]:
    k = latest.kind
    if k == Kind.ARCHIVAL or _closure_hand_off(work):
        return State.CLOSED, None, None, None
    if k == Kind.ESCALATION:
        question = latest.get("question") or latest.get("reason") or "the escalation needs an answer"
        return State.BLOCKED, None, None, f"escalation awaiting an answer: {question}"
    if latest.blocked:
        cond = latest.get("unblock_condition") or latest.get("reason") or latest.get("evidence") or "no unblock condition recorded"
        return State.BLOCKED, None, None, str(cond)
    waiting = _waiting_for_authorisation(work)
    if waiting is not None:
        what = waiting.get("action") or waiting.get("summary") or "the pending step"
        return State.PENDING, None, None, f"waiting for authorisation: {what}"
    if k == Kind.PENDING:  # an approval: the role that asked resumes the action
        role = latest.owner_role if latest.owner_role in (Role.BUILDER, Role.RUNTIME) else Role.BUILDER.value
        return State.CONTINUEABLE, Stage.ACTION.value, role, None
    if latest.status == RecordStatus.IN_PROGRESS and k != Kind.GOAL:
        # (ours) a record still in progress means its role is at work: the goal is active.
        return State.ACTIVE, latest.stage or None, latest.owner_role or None, None
    stage, routed = _route(work, latest, mode)
    if routed is None:
        return State.BLOCKED, None, None, f"cannot route after {latest.kind.value} {latest.id}: {stage}"
    return State.CONTINUEABLE, stage, routed, None


def _route(work: list[RecordView], latest: RecordView, mode: Mode) -> tuple[str, str | None]:
    k = latest.kind
    role: str | None
    if k == Kind.GOAL:
        return (Stage.PLAN if mode == Mode.LITE else Stage.ROUTING).value, Role.DISPATCHER.value
    if k == Kind.PLAN:
        role = _role(latest.get("target_role")) or Role.BUILDER.value
        return stage_for_role(role, mode).value, role
    if k == Kind.DISPATCH:
        package = latest.get("package_type") or _goal_field(work, "package_type")
        role = _role(latest.get("target_role"))
        if package == PackageType.RESEARCH or role == Role.RESEARCHER:
            return Stage.CONTEXT.value, Role.RESEARCHER.value
        role = role or ROLE_OF_PACKAGE.get(str(package), Role.BUILDER).value
        return stage_for_role(role, mode).value, role
    if k == Kind.CONTEXT:
        role = _planned_role(work)
        return stage_for_role(role, mode).value, role
    if k in (Kind.ACTION, Kind.CLEANUP):
        return Stage.VERIFICATION.value, Role.VERIFIER.value
    if k == Kind.VERDICT:
        if latest.verdict == VerdictStatus.GREEN:
            return Stage.ARCHIVAL.value, Role.ARCHIVIST.value
        if latest.verdict == VerdictStatus.RED:  # rework goes back to the dispatcher
            return (Stage.PLAN if mode == Mode.LITE else Stage.ROUTING).value, Role.DISPATCHER.value
        return f"verdict status {latest.verdict!r} is not green, red or blocked", None
    if k == Kind.HAND_OFF:  # a hand-off is not terminal: it names who runs next
        role = _role(latest.get("to_role")) or _role(latest.get("next_role"))
        if role is None:
            return "the hand-off names no to_role", None
        stage = latest.get("next_stage")
        return (stage if stage in _STAGES else stage_for_role(role, mode).value), role
    return f"no rule for {k.value}", None


def _closure_hand_off(work: list[RecordView]) -> bool:
    """(ours) The archivist's hand-off right after an archival record, back to the dispatcher
    (or naming no worker), is stage 7's closure; a hand-off to a working role reopens the goal."""
    if len(work) < 2 or work[-1].kind != Kind.HAND_OFF or work[-2].kind != Kind.ARCHIVAL:
        return False
    last = work[-1]
    closing = last.get("to_role") in (Role.DISPATCHER, Role.ARCHIVIST, Role.ROUTER, None)
    return closing and Role.ARCHIVIST in (last.owner_role, last.get("from_role"))


def _waiting_for_authorisation(work: list[RecordView]) -> RecordView | None:
    """The unapproved pending step, if any: only an approval (or a new plan) lifts the stop."""
    for r in reversed(work):
        if r.kind == Kind.PENDING or r.status == RecordStatus.PENDING:
            approved = r.kind == Kind.PENDING and r.get("approved") is True
            return None if approved else r
        if r.kind in (Kind.PLAN, Kind.DISPATCH, Kind.ARCHIVAL):
            return None
    return None


def _planned_role(work: list[RecordView]) -> str:
    """The role the latest dispatch/plan assigned the work to, if it is not the researcher."""
    for r in reversed(work):
        if r.kind in (Kind.DISPATCH, Kind.PLAN):
            role = _role(r.get("target_role"))
            if role and role != Role.RESEARCHER:
                return role
            package = r.get("package_type") or _goal_field(work, "package_type")
            fallback = ROLE_OF_PACKAGE.get(str(package))
            if fallback and fallback != Role.RESEARCHER:
                return fallback.value
            break
    return Role.BUILDER.value


def _terms(work: list[RecordView]) -> tuple[str | None, str | None]:
    """Deadline and escalation trigger in force: from the newest dispatch, plan, hand-off or goal record."""
    for r in reversed(work):
        if r.kind in (Kind.DISPATCH, Kind.PLAN, Kind.HAND_OFF, Kind.GOAL) and (r.get("deadline") or r.get("escalation_trigger")):
            return _str(r.get("deadline")), _str(r.get("escalation_trigger"))
    return None, None


def _location(work: list[RecordView]) -> str:
    for r in reversed(work):
        if r.kind == Kind.ACTION:
            path = r.get("worktree_path")
            return path if isinstance(path, str) and path else _MAIN_CHECKOUT
    return _MAIN_CHECKOUT


def _goal_field(work: list[RecordView], key: str) -> object:
    for r in work:
        if r.kind == Kind.GOAL:
            return r.get(key)
    return None


def _role(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    v = value.strip().lower()  # other tools wrote "Builder"
    return v if v in _ROLES else None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _iso(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")
