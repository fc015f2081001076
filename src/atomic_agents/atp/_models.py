"""Typed records: one pydantic model per kind, strict on write.

Each model carries the common metadata of the spec (goal, stage, owner, the
three id lists, verdict id) plus ``status``, ``mode``, org/workspace, and its
kind's own fields. Unknown fields are refused (a typo must not vanish into
metadata); free-form extras go under ``extra``. Field checks here are the ones
that need only the record; checks against the goal's chain live in ``_checks``.
"""

from __future__ import annotations

import re
import uuid
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ._kinds import Kind, Mode, PackageType, RecordStatus, Role, Stage, VerdictStatus
from ._view import parse_time

__all__ = ["MODELS", "Record", "model_for"]

#: Goal ids may be UUIDs or slugs (notes); nothing that breaks the identity line.
GOAL_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,199}$")

Text = Annotated[str, Field(min_length=1, max_length=8000)]
ShortText = Annotated[str, Field(min_length=1, max_length=2000)]
TextList = list[Annotated[str, Field(min_length=1, max_length=2000)]]


def _uuid(value: str) -> str:
    try:
        return str(uuid.UUID(value))
    except ValueError:
        raise ValueError(f"{value!r} is not a record id (a UUID)") from None


class Record(BaseModel):
    """Common metadata of every record (spec, "Common metadata")."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_enum_values=True, str_strip_whitespace=True)

    kind: ClassVar[Kind]

    goal_id: str
    stage: Stage
    owner_role: Role
    owner_instance: str | None = Field(default=None, max_length=200)
    input_record_ids: list[str] = Field(default_factory=list)
    output_record_ids: list[str] = Field(default_factory=list)
    recalled_memory_ids: list[str] = Field(default_factory=list)
    verdict_id: str | None = None
    status: RecordStatus = RecordStatus.COMPLETED
    mode: Mode | None = None
    org_id: str | None = None
    workspace_id: str | None = None
    #: What would let the goal proceed; required when ``status`` is blocked.
    unblock_condition: str | None = Field(default=None, max_length=2000)
    #: The fencing token of the writer's claim on the goal (``team claim``), if any.
    lease_token: int | None = Field(default=None, ge=1)
    #: Free-form data of the caller's own; stored, never interpreted.
    extra: dict[str, Any] = Field(default_factory=dict)

    @field_validator("goal_id")
    @classmethod
    def _goal_id(cls, v: str) -> str:
        if not GOAL_ID.match(v):
            raise ValueError("must be a UUID or a slug of letters, digits and . _ : / @ + - (at most 200)")
        return v

    @field_validator("input_record_ids", "output_record_ids", "recalled_memory_ids")
    @classmethod
    def _id_list(cls, v: list[str]) -> list[str]:
        return list(dict.fromkeys(_uuid(x) for x in v))

    @field_validator("verdict_id")
    @classmethod
    def _verdict_id(cls, v: str | None) -> str | None:
        return None if v is None else _uuid(v)

    @model_validator(mode="after")
    def _blocked_says_how_to_unblock(self) -> Record:
        blocked = self.status == RecordStatus.BLOCKED or getattr(self, "status", None) == VerdictStatus.BLOCKED
        if blocked and not self.unblock_condition:
            raise ValueError("a blocked record needs unblock_condition (what would let the goal proceed)")
        return self

    def headline(self) -> str:
        """The one-line readable summary that follows the identity line in ``content``."""
        return self.kind.value

    def typed_fields(self) -> dict[str, Any]:
        """The kind's own fields (what the content lists after the summary)."""
        common = set(Record.model_fields)
        return {k: v for k, v in self.model_dump(mode="json").items() if k not in common and v not in (None, [], {}, "")}


def _iso8601(value: str | None, name: str = "deadline") -> str | None:
    if value is not None and parse_time(value) is None:
        raise ValueError(f"{name} must be an ISO 8601 date-time, e.g. 2026-12-01T17:00:00Z")
    return value


class GoalRecord(Record):
    kind: ClassVar[Kind] = Kind.GOAL
    request: Text
    requester: ShortText
    constraints: TextList = Field(default_factory=list)
    package_type: PackageType = PackageType.BUILD
    mode: Mode | None = Mode.LITE
    #: Optional terms set at the start; with all three, the first hand-off can copy them.
    success_criteria: str | None = Field(default=None, max_length=8000)
    deadline: str | None = None
    escalation_trigger: str | None = Field(default=None, max_length=2000)

    @field_validator("deadline")
    @classmethod
    def _deadline(cls, v: str | None) -> str | None:
        return _iso8601(v)

    def headline(self) -> str:
        return f"goal_record: {self.request}"


class _Terms(Record):
    """Success criteria, deadline and escalation trigger: what a hand-off copies."""

    success_criteria: Text
    deadline: str
    escalation_trigger: ShortText

    @field_validator("deadline")
    @classmethod
    def _deadline(cls, v: str) -> str:
        return _iso8601(v) or v


class PlanRecord(_Terms):
    """The lite-mode plan, written by the dispatcher acting as planner."""

    kind: ClassVar[Kind] = Kind.PLAN
    plan: Text
    steps: TextList = Field(default_factory=list)
    target_role: Role = Role.BUILDER

    def headline(self) -> str:
        return f"plan_record: {self.plan} -> {self.target_role}"


class DispatchInstruction(_Terms):
    kind: ClassVar[Kind] = Kind.DISPATCH
    target_role: Role
    owner: str | None = Field(default=None, max_length=200)
    package_type: PackageType | None = None

    def headline(self) -> str:
        return f"dispatch_instruction: to {self.target_role}, done when {self.success_criteria}"


class ContextSummary(Record):
    kind: ClassVar[Kind] = Kind.CONTEXT
    question: Text
    sources: TextList = Field(min_length=1)
    options: TextList = Field(default_factory=list)
    trade_offs: str = Field(default="", max_length=8000)
    confidence: str | None = Field(default=None, max_length=200)
    recommended_next_step: Text

    def headline(self) -> str:
        return f"context_summary: {self.question} -> {self.recommended_next_step}"


class ActionRecord(Record):
    kind: ClassVar[Kind] = Kind.ACTION
    summary: Text
    files_changed: TextList = Field(default_factory=list)
    rollback_steps: Text
    build_result: str | None = Field(default=None, max_length=8000)
    phase: str | None = Field(default=None, max_length=200)
    worktree_path: str | None = Field(default=None, max_length=1000)

    def headline(self) -> str:
        return f"action_record: {self.summary}"


class CleanupRecord(Record):
    kind: ClassVar[Kind] = Kind.CLEANUP
    summary: Text
    files_changed: TextList = Field(default_factory=list)
    rollback_steps: str | None = Field(default=None, max_length=8000)

    def headline(self) -> str:
        return f"cleanup_record: {self.summary}"


class Verdict(Record):
    kind: ClassVar[Kind] = Kind.VERDICT
    status: VerdictStatus  # type: ignore[assignment]  # the spec names the verdict's colour `status`
    evidence: Text
    scope_verified: Text
    scope_not_verified: str = Field(default="", max_length=8000)
    residual_risks: str = Field(default="", max_length=8000)

    def headline(self) -> str:
        return f"verdict: {self.status} on {self.scope_verified}"


class EscalationRecord(Record):
    kind: ClassVar[Kind] = Kind.ESCALATION
    reason: Text
    consulted_roles: list[Role] = Field(default_factory=list)
    recommended_default: Text
    question: Text
    risk_of_waiting: Text
    promote_to_full: bool = False
    level: int = Field(default=1, ge=1, le=4)

    def headline(self) -> str:
        return f"escalation_record: {self.question} (level {self.level})"


class CharterRatification(Record):
    kind: ClassVar[Kind] = Kind.CHARTER
    status: Literal["proceed", "no-proceed"]  # type: ignore[assignment]
    charter_path: ShortText
    charter_version: str = Field(pattern=r"^[0-9a-f]{64}$")
    version: str = Field(pattern=r"^[0-9a-f]{16}$")
    rater: ShortText
    proceed: bool
    reason: str = Field(default="", max_length=8000)
    blockers: TextList = Field(default_factory=list)
    warnings: TextList = Field(default_factory=list)
    deferrals: list[dict[str, str]] = Field(default_factory=list)
    previous_record_id: str | None = None

    @field_validator("previous_record_id")
    @classmethod
    def _previous(cls, v: str | None) -> str | None:
        return None if v is None else _uuid(v)

    @model_validator(mode="after")
    def _consistent(self) -> CharterRatification:
        if self.proceed != (self.status == "proceed"):
            raise ValueError("proceed and status disagree")
        if self.version != self.charter_version[:16]:
            raise ValueError("version must be the first 16 hex characters of charter_version")
        return self

    def headline(self) -> str:
        return f"charter_ratification: {self.charter_path} {self.version} {self.status}"


class ArchivalRecord(Record):
    kind: ClassVar[Kind] = Kind.ARCHIVAL
    outcome: Text
    conventions: TextList = Field(default_factory=list)

    def headline(self) -> str:
        return f"archival_record: {self.outcome}"


class HandOffRecord(_Terms):
    kind: ClassVar[Kind] = Kind.HAND_OFF
    from_role: Role
    to_role: Role
    reason: Text
    current_stage: Stage
    next_stage: Stage | None = None
    #: The notes' "next role": always the receiving role (written so readers need not know).
    next_role: Role | None = None

    @model_validator(mode="after")
    def _next_role_is_to_role(self) -> HandOffRecord:
        if self.to_role == Role.ROUTER:
            raise ValueError("to_role: the router is not a worker (use `team continue` to route the goal)")
        if not self.input_record_ids or not self.output_record_ids:
            raise ValueError("a hand-off names its input and output records (input_record_ids, output_record_ids)")
        if self.next_role is None:
            object.__setattr__(self, "next_role", self.to_role)
        elif self.next_role != self.to_role:
            raise ValueError("next_role, when given, must equal to_role")
        return self

    def headline(self) -> str:
        return f"hand_off_record: {self.from_role} -> {self.to_role}: {self.reason}"


class RunLog(Record):
    kind: ClassVar[Kind] = Kind.RUN_LOG
    summary: Text
    event: str | None = Field(default=None, max_length=200)
    next_stage: Stage | None = None
    next_role: Role | None = None

    @field_validator("status")
    @classmethod
    def _never_stops(cls, v: str) -> str:
        # The router skips run logs; a status that would stop the goal belongs on the stopping record.
        if v in (RecordStatus.BLOCKED, RecordStatus.PENDING):
            raise ValueError("a run log is in_progress or completed; write the blocked or pending record itself")
        return v

    def headline(self) -> str:
        return f"run_log: {self.summary}"


class PendingAuthorisation(Record):
    kind: ClassVar[Kind] = Kind.PENDING
    action: Text
    reason: Text
    approver: str | None = Field(default=None, max_length=200)
    approved: bool = False
    approved_by: str | None = Field(default=None, max_length=200)
    status: RecordStatus = RecordStatus.PENDING

    @model_validator(mode="after")
    def _approval(self) -> PendingAuthorisation:
        if self.approved and not self.approved_by:
            raise ValueError("an approval needs approved_by (who authorised it)")
        if self.approved == (self.status == RecordStatus.PENDING):
            raise ValueError("status is pending_authorisation until approved, then completed")
        return self

    def headline(self) -> str:
        if self.approved:
            return f"pending_authorisation: approved by {self.approved_by}: {self.action}"
        return f"pending_authorisation: waiting for approval: {self.action}"


MODELS: dict[Kind, type[Record]] = {
    m.kind: m
    for m in (
        GoalRecord, PlanRecord, DispatchInstruction, ContextSummary, ActionRecord, CleanupRecord, Verdict,
        EscalationRecord, CharterRatification, ArchivalRecord, HandOffRecord, RunLog, PendingAuthorisation,
    )
}  # fmt: skip


def model_for(kind: Kind) -> type[Record]:
    return MODELS[kind]
