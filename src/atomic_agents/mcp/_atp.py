"""ATP tools: thin wrappers over :class:`~atomic_agents.atp.Ledger`, one call each.

The writer's identity comes from the call's ``org_id``/``workspace_id``/``agent_id``/
``user_id`` when given, else from the team config, ``EDEN_ORG_ID``/``EDEN_WORKSPACE_ID``/
``EDEN_AGENT_ID`` and ``.env`` (:func:`~atomic_agents.atp.resolve_identity`). The
answers are the JSON ``atomic-agents team ... --json`` prints.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..exceptions import UnsafePathError, ValidationError
from ._tools import Args, ToolSpec, boolean, integer, obj, schema, string, strings

if TYPE_CHECKING:
    from ._context import Services

__all__ = ["ATP_TOOLS"]

_ID = {
    "agent_id": string("Writer (default EDEN_AGENT_ID)."),
    "org_id": string(),
    "workspace_id": string(),
    "user_id": string(),
}
_GOAL = {"goal_id": string()}
_TOKEN = {"token": integer("Fencing token of your claim.")}
_ROLE = string("dispatcher, researcher, builder, runtime, verifier, archivist or router.")
_STATUS_KEYS = ("goal_id", "stage", "owner_role", "mode", "state", "next_stage", "next_role", "latest_record_id",
                "deadline", "escalation_trigger", "location", "blocker")  # fmt: skip  # = cli/_team.py


def _row(d: Any) -> dict[str, Any]:
    return {k: getattr(d, k) for k in _STATUS_KEYS}


def _as_of(a: Args) -> float | None:
    from ..atp import parse_as_of

    return parse_as_of(a.text("as_of"))


def _written(w: Any) -> dict[str, Any]:
    return {"id": w.id, "record": w.record}


def start(s: Services, a: Args) -> Any:
    ledger = s.ledger(a)
    mode = "full" if a.flag("full") else "lite"
    w = ledger.start(a.text("request", required=True), requester=a.text("requester") or ledger.identity.user_id,
                     constraints=a.texts("constraints"), package_type=a.text("package_type", default="build"),
                     mode=mode, goal_id=a.text("goal_id"))  # fmt: skip
    return {"goal_id": w.goal_id, "record_id": w.id, "record": w.record}


def record(s: Services, a: Args) -> Any:
    kind, goal, data = a.text("kind", required=True), a.text("goal_id", required=True), a.mapping("data", required=True)
    return _written(s.ledger(a).write(kind, goal, data, token=a.integer("token")))


def chain(s: Services, a: Args) -> Any:
    return s.ledger(a).show(a.text("goal_id", required=True), as_of=_as_of(a))


def status(s: Services, a: Args) -> Any:
    rows = s.ledger(a).status(a.text("goal_id"), role=a.text("role"), as_of=_as_of(a))
    return {"goals": [_row(d) for d in rows]}


def continue_(s: Services, a: Args) -> Any:
    goal = a.text("goal_id", required=True)
    r = s.ledger(a).continue_(goal, token=a.integer("token"))
    return {"goal_id": r.goal_id, "next_stage": r.next_stage, "next_role": r.next_role, "state": r.state,
            "blocker": r.blocker, "written": r.written}  # fmt: skip


def handoff(s: Services, a: Args) -> Any:
    w = s.ledger(a).handoff(
        a.text("goal_id", required=True), a.text("to_role", required=True), a.text("reason", required=True),
        from_role=a.text("from_role"), token=a.integer("token"), success_criteria=a.text("success_criteria"),
        deadline=a.text("deadline"), escalation_trigger=a.text("escalation_trigger"),
    )  # fmt: skip
    return _written(w)


def escalate(s: Services, a: Args) -> Any:
    w = s.ledger(a).escalate(
        a.text("goal_id", required=True), reason=a.text("reason", required=True),
        question=a.text("question", required=True), recommended_default=a.text("recommended_default", required=True),
        risk_of_waiting=a.text("risk_of_waiting", required=True), consulted_roles=a.texts("consulted_roles"),
        promote_to_full=a.flag("promote_to_full"), level=a.integer("level", default=1), token=a.integer("token"),
    )  # fmt: skip
    return _written(w)


def approve(s: Services, a: Args) -> Any:
    goal = a.text("goal_id", required=True)
    return _written(s.ledger(a).approve(goal, approved_by=a.text("approved_by", required=True), token=a.integer("token")))


def _charter_path(project: Path, given: str | None, *, home: Path | None = None) -> Path | None:
    """The charter a call may name: a Markdown file inside the project folder, or the global ``~/.claude`` one.

    A client (over HTTP, perhaps from another host) must not make the server read
    any file it names. The check runs on the fully resolved path (``..`` and
    symlinks followed) and before the file is looked at, so a refusal says nothing
    about whether a file outside exists. ``None``: nothing named, the default search.
    """
    from ..atp._charter import CHARTER_PATH

    if given is None:
        return None
    if "\x00" in given:
        raise ValidationError("path must not contain NUL", field="path", rule="syntax")
    p = Path(given).expanduser()
    p = p if p.is_absolute() else project / p
    real = Path(os.path.realpath(p))
    global_charter = Path(os.path.realpath((home or Path.home()) / CHARTER_PATH))
    if real != global_charter and not real.is_relative_to(project):
        raise UnsafePathError(
            f"the charter must be inside the project folder {project} (or be ~/{CHARTER_PATH}); nothing else is read",
            path=given[:300], rule="outside-project",
        )  # fmt: skip
    if real.suffix.lower() != ".md":
        raise UnsafePathError("a charter is a Markdown file (.md); nothing else is read", path=given[:300], rule="not-markdown")
    return real


def ratify_charter(s: Services, a: Args) -> Any:
    from ..atp._charter import find_charter, review_charter

    deferrals = []
    for item, why in (a.mapping("deferrals") or {}).items():
        if not isinstance(why, str) or not why.strip() or not item.strip():
            raise ValidationError("each deferral is ITEM: REASON (a non-empty string)", field="deferrals", rule="syntax")
        deferrals.append((item.strip(), why.strip()))
    project = Path(os.path.realpath(s.config.project))
    review = review_charter(find_charter(project, _charter_path(project, a.text("path"))), project)
    ledger = s.ledger(a)
    w = ledger.ratify_charter(review, rater=a.text("rater") or ledger.identity.user_id, deferrals=deferrals)
    return _written(w)


def claim(s: Services, a: Args) -> Any:
    goal = a.text("goal_id", required=True)
    lease = s.ledger(a).claim(goal, a.text("role", required=True), ttl_ms=a.integer("ttl_ms", default=30 * 60_000))
    return {"goal_id": goal, **lease.to_dict()}


def release(s: Services, a: Args) -> Any:
    goal = a.text("goal_id", required=True)
    return {"goal_id": goal, **s.ledger(a).release(goal, a.integer("token", required=True)).to_dict()}


def ready(s: Services, a: Args) -> Any:
    return {"goals": [_row(d) for d in s.ledger(a).ready(a.text("role"))]}


_AS_OF = {"as_of": string("Replay as of this ISO 8601 time.")}

ATP_TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec("atp_start", "Start an ATP goal (writes its goal_record; lite mode unless full=true).",
             schema({**_ID, "request": string("The goal in a sentence."), "requester": string(), "constraints": strings(),
                     "package_type": string("research, build, run, verify or archive."), "full": boolean(),
                     "goal_id": string("Choose the id.")}, ("request",)), start),
    ToolSpec("atp_record", "Write one typed ATP record (plan_record, action_record, verdict, ...) for a goal.",
             schema({**_ID, **_GOAL, "kind": string(), "data": obj("The record's fields."), **_TOKEN},
                    ("kind", "goal_id", "data")), record),
    ToolSpec("atp_chain", "A goal's records as a timeline with links, and its routing decision.",
             schema({**_ID, **_GOAL, **_AS_OF}, ("goal_id",)), chain, read_only=True),
    ToolSpec("atp_status", "Status table: stage, owner, state and next role per goal (or one goal).",
             schema({**_ID, **_GOAL, "role": _ROLE, **_AS_OF}), status, read_only=True),
    ToolSpec("atp_continue", "Route a goal: log the decision and hand off to the next role, or report the blocker.",
             schema({**_ID, **_GOAL, **_TOKEN}, ("goal_id",)), continue_, idempotent=True),
    ToolSpec("atp_handoff", "Hand a goal to a role; success criteria, deadline and trigger are copied from the plan.",
             schema({**_ID, **_GOAL, "to_role": _ROLE, "reason": string(), "from_role": string(),
                     "success_criteria": string(), "deadline": string(), "escalation_trigger": string(), **_TOKEN},
                    ("goal_id", "to_role", "reason")), handoff),
    ToolSpec("atp_escalate", "Escalate a goal that cannot proceed; it stops until answered.",
             schema({**_ID, **_GOAL, "reason": string(), "question": string(), "recommended_default": string(),
                     "risk_of_waiting": string(), "consulted_roles": strings(), "promote_to_full": boolean(),
                     "level": integer("1-4.", minimum=1), **_TOKEN},
                    ("goal_id", "reason", "question", "recommended_default", "risk_of_waiting")), escalate),
    ToolSpec("atp_approve", "Authorise the step a goal waits on (pending_authorisation).",
             schema({**_ID, **_GOAL, "approved_by": string(), **_TOKEN}, ("goal_id", "approved_by")), approve),
    ToolSpec("atp_ratify_charter", "Ratify the project charter (hash, placeholder and roles check) as a record.",
             schema({**_ID, "path": string("A .md file in the project; default .claude/agentic-team-charter.md."), "rater": string(),
                     "deferrals": obj("Blocker -> reason for deferring it.")}), ratify_charter),
    ToolSpec("atp_claim", "Claim a goal for a role: a lease with a fencing token; refused while another is live.",
             schema({**_ID, **_GOAL, "role": _ROLE, "ttl_ms": integer("Default 30 min.", minimum=1)}, ("goal_id", "role")),
             claim),
    ToolSpec("atp_release", "Release your claim on a goal.",
             schema({**_ID, **_GOAL, "token": integer()}, ("goal_id", "token")), release, idempotent=True),
    ToolSpec("atp_ready", "Goals a role may pick up now: continueable, next role matches, unclaimed.",
             schema({**_ID, "role": _ROLE}), ready, read_only=True),
)
