"""The protocol's vocabulary: kinds, stages, roles, statuses, and which fits which.

Pure data, no pydantic: the router, the tolerant reader and ``status`` import
this and stay cheap to load. Rules cite ``atp-record-kinds.md`` ("spec") or
``atp-protocol-notes.md`` ("notes").
"""

from __future__ import annotations

from enum import StrEnum

__all__ = [
    "CHAIN_KINDS",
    "DRIFTED_KINDS",
    "KIND_RULES",
    "ROLE_OF_PACKAGE",
    "Kind",
    "KindRule",
    "Mode",
    "PackageType",
    "RecordStatus",
    "Role",
    "Stage",
    "State",
    "VerdictStatus",
    "normalise_kind",
    "stage_for_role",
]


class Kind(StrEnum):
    GOAL = "goal_record"
    PLAN = "plan_record"
    DISPATCH = "dispatch_instruction"
    CONTEXT = "context_summary"
    ACTION = "action_record"
    CLEANUP = "cleanup_record"
    VERDICT = "verdict"
    ESCALATION = "escalation_record"
    CHARTER = "charter_ratification"
    ARCHIVAL = "archival_record"
    HAND_OFF = "hand_off_record"
    RUN_LOG = "run_log"
    PENDING = "pending_authorisation"


class Stage(StrEnum):
    GOAL_RECEIPT = "goal_receipt"
    PLAN = "plan"
    ROUTING = "routing_and_assignment"
    CONTEXT = "context_gathering"
    ACTION = "action"
    CLEANUP = "cleanup"
    VERIFICATION = "verification"
    ARCHIVAL = "recording_and_archival"
    HAND_OFF = "hand_off_or_closure"
    ESCALATION = "escalation"
    CHARTER = "charter_ratification"
    BLOCKED = "blocked"
    PENDING = "pending_authorisation"


class Role(StrEnum):
    DISPATCHER = "dispatcher"
    RESEARCHER = "researcher"
    BUILDER = "builder"
    RUNTIME = "runtime"
    VERIFIER = "verifier"
    ARCHIVIST = "archivist"
    ROUTER = "router"


class PackageType(StrEnum):
    RESEARCH = "research"
    BUILD = "build"
    RUN = "run"
    VERIFY = "verify"
    ARCHIVE = "archive"


class RecordStatus(StrEnum):
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"
    BLOCKED = "blocked"
    PENDING = "pending_authorisation"


class VerdictStatus(StrEnum):
    GREEN = "green"
    RED = "red"
    BLOCKED = "blocked"


class Mode(StrEnum):
    LITE = "lite"
    FULL = "full"


class State(StrEnum):
    """A goal's state (notes, "Status of a goal")."""

    ACTIVE = "active"
    BLOCKED = "blocked"
    PENDING = "pending_authorisation"
    CONTINUEABLE = "continueable"
    CLOSED = "closed"


class KindRule:
    """Where a kind may be written: its default stage, the stages and roles that fit it."""

    __slots__ = ("default_role", "default_stage", "roles", "stages")

    def __init__(self, stages: tuple[Stage, ...], roles: tuple[Role, ...]) -> None:
        self.stages, self.roles = stages, roles
        self.default_stage, self.default_role = stages[0], roles[0]


_ALL_ROLES = tuple(Role)
KIND_RULES: dict[Kind, KindRule] = {
    Kind.GOAL: KindRule((Stage.GOAL_RECEIPT,), (Role.DISPATCHER,)),
    Kind.PLAN: KindRule((Stage.PLAN,), (Role.DISPATCHER,)),
    Kind.DISPATCH: KindRule((Stage.ROUTING,), (Role.DISPATCHER,)),
    Kind.CONTEXT: KindRule((Stage.CONTEXT,), (Role.RESEARCHER,)),
    Kind.ACTION: KindRule((Stage.ACTION,), (Role.BUILDER, Role.RUNTIME)),
    Kind.CLEANUP: KindRule((Stage.CLEANUP, Stage.ACTION), (Role.BUILDER, Role.RUNTIME)),
    Kind.VERDICT: KindRule((Stage.VERIFICATION,), (Role.VERIFIER,)),
    Kind.ESCALATION: KindRule((Stage.ESCALATION,), (Role.DISPATCHER,)),
    Kind.CHARTER: KindRule((Stage.CHARTER,), (Role.ARCHIVIST,)),
    Kind.ARCHIVAL: KindRule((Stage.ARCHIVAL,), (Role.ARCHIVIST,)),
    # notes: "Every role records a hand_off_record when it passes the goal on."
    Kind.HAND_OFF: KindRule((Stage.HAND_OFF,), _ALL_ROLES),
    # A run log is written at whatever stage the goal is in, by the role doing the work.
    Kind.RUN_LOG: KindRule(tuple(Stage), (Role.ROUTER, Role.BUILDER, Role.RUNTIME)),
    Kind.PENDING: KindRule((Stage.PENDING, Stage.ACTION), (Role.BUILDER, Role.RUNTIME, Role.DISPATCHER)),
}

#: Kinds that make up a goal's chain; a charter ratification sits outside it (spec).
CHAIN_KINDS = frozenset(Kind) - {Kind.CHARTER}

# Names seen in the wild for our kinds (the public audit of 502 ATP records found
# `plan` and `hand_off_or_closure` used as types). Keys are normalised (see below).
DRIFTED_KINDS: dict[str, Kind] = {
    "plan": Kind.PLAN,
    "lite_plan": Kind.PLAN,
    "goal": Kind.GOAL,
    "goal_receipt": Kind.GOAL,
    "dispatch": Kind.DISPATCH,
    "routing_and_assignment": Kind.DISPATCH,
    "dispatch_record": Kind.DISPATCH,
    "context": Kind.CONTEXT,
    "context_gathering": Kind.CONTEXT,
    "research_summary": Kind.CONTEXT,
    "action": Kind.ACTION,
    "build_record": Kind.ACTION,
    "cleanup": Kind.CLEANUP,
    "verification": Kind.VERDICT,
    "verdict_record": Kind.VERDICT,
    "verification_record": Kind.VERDICT,
    "escalation": Kind.ESCALATION,
    "charter": Kind.CHARTER,
    "charter_record": Kind.CHARTER,
    "archival": Kind.ARCHIVAL,
    "archive": Kind.ARCHIVAL,
    "archive_record": Kind.ARCHIVAL,
    "recording_and_archival": Kind.ARCHIVAL,
    "closure": Kind.ARCHIVAL,
    "hand_off": Kind.HAND_OFF,
    "handoff": Kind.HAND_OFF,
    "handoff_record": Kind.HAND_OFF,
    "hand_off_or_closure": Kind.HAND_OFF,
    "runlog": Kind.RUN_LOG,
    "run_log_record": Kind.RUN_LOG,
    "pending_authorization": Kind.PENDING,
    "authorisation_request": Kind.PENDING,
}

# Inferring a missing kind from the stage a record was written at (tolerant read).
_KIND_OF_STAGE: dict[str, Kind] = {
    Stage.GOAL_RECEIPT: Kind.GOAL,
    Stage.PLAN: Kind.PLAN,
    Stage.ROUTING: Kind.DISPATCH,
    Stage.CONTEXT: Kind.CONTEXT,
    Stage.ACTION: Kind.ACTION,
    Stage.CLEANUP: Kind.CLEANUP,
    Stage.VERIFICATION: Kind.VERDICT,
    Stage.ARCHIVAL: Kind.ARCHIVAL,
    Stage.HAND_OFF: Kind.HAND_OFF,
    Stage.ESCALATION: Kind.ESCALATION,
    Stage.CHARTER: Kind.CHARTER,
    Stage.PENDING: Kind.PENDING,
}

#: Full mode, package type -> the role that owns the work (notes).
ROLE_OF_PACKAGE: dict[str, Role] = {
    PackageType.RESEARCH: Role.RESEARCHER,
    PackageType.BUILD: Role.BUILDER,
    PackageType.RUN: Role.RUNTIME,
    PackageType.VERIFY: Role.VERIFIER,
    PackageType.ARCHIVE: Role.ARCHIVIST,
}

_KINDS = {k.value: k for k in Kind}


def _norm(name: str) -> str:
    return name.strip().lower().replace("-", "_").replace(" ", "_")


def normalise_kind(name: object) -> Kind | None:
    """Our kind for a type name written by any ATP tool, or ``None`` if it is not one.

    >>> normalise_kind("Hand-Off"), normalise_kind("plan"), normalise_kind("notes")
    (<Kind.HAND_OFF: 'hand_off_record'>, <Kind.PLAN: 'plan_record'>, None)
    """
    if not isinstance(name, str):
        return None
    n = _norm(name)
    return _KINDS.get(n) or DRIFTED_KINDS.get(n)


def kind_of_stage(stage: object) -> Kind | None:
    return _KIND_OF_STAGE.get(_norm(stage)) if isinstance(stage, str) else None


def stage_for_role(role: str, mode: Mode) -> Stage:
    """The stage a role works in when it picks the goal up (used after hand-offs)."""
    if role == Role.DISPATCHER:
        return Stage.PLAN if mode == Mode.LITE else Stage.ROUTING
    stages: dict[str, Stage] = {
        Role.RESEARCHER: Stage.CONTEXT,
        Role.BUILDER: Stage.ACTION,
        Role.RUNTIME: Stage.ACTION,
        Role.VERIFIER: Stage.VERIFICATION,
        Role.ARCHIVIST: Stage.ARCHIVAL,
        Role.ROUTER: Stage.HAND_OFF,
    }
    return stages.get(role, Stage.ACTION)
