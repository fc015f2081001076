"""The ledger: typed ATP records written to and read from any :class:`MemoryStore`.

>>> from atomic_agents.memory import InMemoryMemoryStore, HashingEmbedder
>>> from atomic_agents.atp import Identity, Ledger
>>> ledger = Ledger(InMemoryMemoryStore(embedder=HashingEmbedder()), Identity("acme", "acme/web", "dispatcher"))
>>> goal = ledger.start("Fix the billing deploy", requester="alice")
>>> ledger.decide(goal.goal_id).next_role
'dispatcher'

Writes are strict (every refusal is a :class:`ValidationError` naming the field);
reads are tolerant (``_view``). Decisions come from the pure router (``_router``).
The ledger only ever calls the store's Protocol: ``scan`` to read a goal across the
org/workspace, ``remember`` with a chosen id (and a fence when the goal is claimed),
``get`` to resolve links, and the lease calls for claims.
"""

from __future__ import annotations

import gc
import re
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ..exceptions import ConflictError, NotFoundError, ValidationError
from ..memory import Fence, Lease, LeaseHeldError, MemoryStore
from ._content import check_clean, render_content
from ._charter import CHARTER_GOAL_ID
from ._identity import Identity
from ._ids import iso_now, new_record_id
from ._kinds import KIND_RULES, Kind, Mode, RecordStatus, Role, Stage, State, normalise_kind
from ._router import Decision, decide, goal_mode
from ._checks import shown
from ._view import RecordView, parse_time, unplaced, views_of

__all__ = ["ContinueResult", "Ledger", "RecallResult", "Written"]

_SET_BY_LEDGER = ("record_type", "kind", "stored_at")
_TERMS = ("success_criteria", "deadline", "escalation_trigger")


@dataclass(frozen=True)
class Written:
    """A record that is now in the store: its id, goal, metadata and content."""

    id: str
    goal_id: str
    kind: str
    record: dict[str, Any]
    content: str


@dataclass(frozen=True)
class ContinueResult:
    goal_id: str
    next_stage: str | None
    next_role: str | None
    state: str
    blocker: str | None
    written: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class RecallResult:
    """Memory-first context: ``relevant`` ids go in a record's ``recalled_memory_ids``."""

    query: str
    method: str  # "semantic", "keyword" (fallback) or "none"
    hits: list[dict[str, Any]]
    relevant: list[str]


@contextmanager
def _bulk_read() -> Iterator[None]:
    """Pause the cyclic GC while a whole workspace is read and decided.

    Reading 10,000 records makes ~100,000 dicts and lists that all stay alive; the
    collector's passes over them (which can free nothing) cost a quarter of ``status``.
    Reference counting still frees everything; the GC resumes when the read ends.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _slug(text: str) -> str:
    words = re.findall(r"[a-z0-9]+", text.lower())[:6]
    return "-".join(words)[:48].strip("-") or "goal"


_GOAL_NAMESPACE = uuid.UUID("6f1c2a4e-8a7b-5c3d-9e0f-a1b2c3d4e5f6")


def goal_record_id(identity: Identity, goal_id: str) -> str:
    """The goal record's id: a UUIDv5 of org, workspace and goal id (one goal record per goal)."""
    return str(uuid.uuid5(_GOAL_NAMESPACE, f"{identity.org_id}\x00{identity.workspace_id}\x00{goal_id}"))


def lease_key(identity: Identity, goal_id: str) -> str:
    return f"atp:{identity.org_id}:{identity.workspace_id}:{goal_id}"


class Ledger:
    """ATP over a memory store, as ``identity``. All decisions are replayable (``as_of``)."""

    #: ATP's relevance floor (spec, memory-first rule 1).
    RELEVANCE_FLOOR = 0.45

    def __init__(self, store: MemoryStore, identity: Identity, *, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.identity = identity
        self._clock = clock

    # -- reading -----------------------------------------------------------------------

    def records(self, goal_id: str, *, as_of: float | None = None) -> list[RecordView]:
        """The goal's records in chain order (any agent of the org/workspace wrote them)."""
        views = views_of(self.store.scan(self.identity.workspace, {"goal_id": goal_id}))
        return [v for v in views if as_of is None or v.stored_at <= as_of]

    def all_records(self, *, as_of: float | None = None) -> dict[str, list[RecordView]]:
        """Every record of the org/workspace, by goal, each list in chain order."""
        goals: dict[str, list[RecordView]] = defaultdict(list)
        with _bulk_read():
            for v in views_of(self.store.scan(self.identity.workspace)):
                if as_of is None or v.stored_at <= as_of:
                    goals[v.goal_id].append(v)
        return goals

    def decide(self, goal_id: str, *, as_of: float | None = None) -> Decision:
        d = decide(self.records(goal_id), as_of=as_of)
        if d is None:
            raise NotFoundError(f"no records of goal {shown(goal_id)} in {self.identity.org_id}/{self.identity.workspace_id}")
        return d

    def status(self, goal_id: str | None = None, *, role: str | None = None, as_of: float | None = None) -> list[Decision]:
        """The status table: one decision per goal (only those whose next role is ``role``, if given)."""
        if goal_id is not None:
            rows = [self.decide(goal_id, as_of=as_of)]
        else:
            with _bulk_read():  # one pause over the read and the decisions (re-entrant: see all_records)
                goals = self.all_records(as_of=as_of)
                rows = [d for recs in goals.values() if (d := decide(recs, as_of=as_of)) is not None]
            rows.sort(key=lambda d: d.goal_id)
        if role is not None:
            _role_arg(role)
            rows = [d for d in rows if d.next_role == role]
        return rows

    # -- writing -----------------------------------------------------------------------

    def write(self, kind: str, goal_id: str, data: Mapping[str, Any] | None = None, *, token: int | None = None) -> Written:
        """Validate and store one record of ``kind`` for ``goal_id``; returns it with its id."""
        k = _kind_arg(kind)
        if k == Kind.CHARTER and goal_id != CHARTER_GOAL_ID:
            raise ValidationError(f"charter ratifications are recorded under goal {CHARTER_GOAL_ID!r}", field="goal_id", rule="charter")
        chain = self.records(goal_id) if k != Kind.CHARTER else []
        return self._write(k, goal_id, dict(data or {}), chain, token)

    def _write(self, k: Kind, goal_id: str, data: dict[str, Any], chain: list[RecordView], token: int | None) -> Written:
        from ._checks import check_fit, check_links
        from ._models import MODELS

        for key in _SET_BY_LEDGER:
            if key in data and data.pop(key) not in (k.value, None) and key != "stored_at":
                raise ValidationError(f"is set by the ledger to {k.value}", field=key, rule="kind")
        for key in ("org_id", "workspace_id"):
            mine = getattr(self.identity, key)
            if data.setdefault(key, mine) != mine:
                raise ValidationError(f"records are written to {mine!r} (this identity's {key})", field=key, rule="identity")
        if "goal_id" in data and data["goal_id"] != goal_id:
            raise ValidationError("differs from the goal the record is written for", field="goal_id", rule="identity")
        data["goal_id"] = goal_id
        if k == Kind.GOAL and chain:
            raise ConflictError(f"goal {goal_id} already has a goal_record ({chain[0].id})")
        if k not in (Kind.GOAL, Kind.CHARTER) and not chain:
            raise ValidationError(f"no goal {shown(goal_id)}: start it first (team start)", field="goal_id", rule="unknown-goal")
        check_clean(data, _field_names(MODELS[k]))  # first: no later message may show a secret
        rule = KIND_RULES[k]
        if k == Kind.RUN_LOG and "stage" not in data and chain:
            d = decide(chain)  # a run log is written at the stage the goal is in
            data["stage"] = d.stage if d is not None and d.stage in rule.stages else rule.default_stage.value
        data.setdefault("stage", rule.default_stage.value)
        data.setdefault("owner_role", rule.default_role.value)
        data.setdefault("owner_instance", self.identity.agent_id)
        check_fit(k, data["stage"], data["owner_role"])
        self._defaults(k, data, chain)
        for key in ("input_record_ids", "output_record_ids"):
            if isinstance(data.get(key), list) and goal_id in data[key]:
                raise ValidationError(
                    "names the goal id, not a record: link the records this stage read (e.g. the goal_record's id)",
                    field=key, rule="link",
                )  # fmt: skip
        check_clean(data, _field_names(MODELS[k]))  # again: the defaults copied values in
        rec = _validated(MODELS[k], data)
        fence = self._fence(goal_id, token if token is not None else rec.lease_token)
        check_links(rec, chain, self.store, rec.owner_instance or self.identity.agent_id, self.identity.agent_id)
        return self._store(rec, fence)

    def _defaults(self, k: Kind, data: dict[str, Any], chain: list[RecordView]) -> None:
        """What a caller may leave out: links to the latest record, terms, the goal's mode."""
        if not chain:
            return
        work = [r for r in chain if r.kind != Kind.RUN_LOG]
        latest = work[-1] if work else chain[-1]
        data.setdefault("mode", goal_mode(chain).value)
        data.setdefault("input_record_ids", [latest.id])
        if k == Kind.HAND_OFF:
            data.setdefault("from_role", data["owner_role"])
            d = decide(chain)
            data.setdefault("current_stage", d.stage if d and d.stage in Stage.__members__.values() else latest.stage)
            src = _terms_source(work)
            for key in _TERMS:
                if key not in data and src is not None and src.get(key):
                    data[key] = src.get(key)
            if "output_record_ids" not in data:
                since = [r.id for r in work if r.owner_role == data["from_role"] and r.kind != Kind.GOAL]
                data["output_record_ids"] = since[-5:] or [latest.id]
        if k == Kind.ARCHIVAL and "verdict_id" not in data:
            greens = [r for r in work if r.kind == Kind.VERDICT and r.verdict == "green"]
            if greens:
                data["verdict_id"] = greens[-1].id

    def _fence(self, goal_id: str, token: int | None) -> Fence | None:
        """A claimed goal takes writes only with its live token (fencing); others take any write."""
        key = lease_key(self.identity, goal_id)
        lease = self.store.get_lease(key)
        if token is not None:
            return Fence(key, token)
        if lease is not None and lease.live(self._clock()):
            raise LeaseHeldError(
                f"goal {goal_id} is claimed by {lease.holder} (token {lease.token}); write with --token or wait "
                "for the claim to end",
                lease=lease,
            )
        # token 0: "no live claim", checked again inside the write's transaction, so a claim
        # granted between this look and the write still refuses it.
        return Fence(key, 0)

    def _store(self, rec: Any, fence: Fence | None) -> Written:
        # A goal record's id is derived from its goal, so two agents starting the same goal at
        # once cannot both succeed: the store's unique id refuses the second (no duplicate goals).
        rid = goal_record_id(self.identity, rec.goal_id) if rec.kind == Kind.GOAL else new_record_id(self._clock())
        meta = {k: v for k, v in rec.model_dump(mode="json").items() if v is not None}
        meta.pop("lease_token", None)
        if fence is not None and fence.token:
            meta["lease_token"] = fence.token
        meta["record_type"] = meta["kind"] = rec.kind.value
        meta["stored_at"] = iso_now(self._clock())
        if rec.kind == Kind.VERDICT:
            meta["verdict_status"] = meta["status"]
        content = render_content(rec.goal_id, rid, meta["stage"], meta["owner_role"], rec.headline(), rec.typed_fields())
        try:
            self.store.remember(content, meta, self.identity.scope, memory_id=rid, fence=fence)
        except ConflictError:
            if rec.kind != Kind.GOAL:
                raise
            raise ConflictError(f"goal {rec.goal_id} already has a goal_record ({rid})") from None
        return Written(rid, rec.goal_id, rec.kind.value, meta, content)

    # -- operations --------------------------------------------------------------------

    def start(
        self,
        request: str,
        *,
        requester: str,
        constraints: Sequence[str] = (),
        package_type: str = "build",
        mode: str = Mode.LITE.value,
        goal_id: str | None = None,
        extra: Mapping[str, Any] | None = None,
        **terms: str | None,
    ) -> Written:
        """Write the goal record of a new goal (lite unless ``mode="full"``).

        ``terms``: ``success_criteria``, ``deadline``, ``escalation_trigger``, if known at the start.
        """
        gid = goal_id or f"{_slug(request)}-{new_record_id()[-6:]}"
        data = {
            "request": request, "requester": requester, "constraints": list(constraints),
            "package_type": package_type, "mode": mode, **({"extra": dict(extra)} if extra else {}),
            **{k: v for k, v in terms.items() if v is not None},
        }  # fmt: skip
        return self.write(Kind.GOAL.value, gid, data)

    def continue_(self, goal_id: str, *, token: int | None = None) -> ContinueResult:
        """The router's turn: log the decision and hand off to the next role, or stop with the blocker.

        Idempotent: if the latest record already hands the goal to the next role, nothing is written.
        """
        chain = self.records(goal_id)
        d = decide(chain)
        if d is None:
            raise NotFoundError(f"no records of goal {shown(goal_id)}")
        if d.state != State.CONTINUEABLE:
            return ContinueResult(goal_id, d.next_stage, d.next_role, d.state, d.blocker, [])
        last = chain[-1]
        if last.kind in (Kind.HAND_OFF, Kind.RUN_LOG) and last.get("to_role", last.get("next_role")) == d.next_role and last.owner_role == Role.ROUTER:
            return ContinueResult(goal_id, d.next_stage, d.next_role, d.state, None, [])
        work = [r for r in chain if r.kind != Kind.RUN_LOG]
        latest = work[-1]
        log = self._write(Kind.RUN_LOG, goal_id, {
            "owner_role": Role.ROUTER.value, "stage": Stage.HAND_OFF.value, "event": "route",
            "summary": f"router: after {latest.kind.value} {latest.id}, next {d.next_stage} by {d.next_role}",
            "next_stage": d.next_stage, "next_role": d.next_role, "input_record_ids": [latest.id],
        }, chain, token)  # fmt: skip
        written = [log.id]
        if _terms_source(work) is not None:  # a hand-off copies terms; before any plan there are none
            from_role = latest.owner_role if latest.owner_role in Role.__members__.values() else Role.ROUTER.value
            hand = self._write(Kind.HAND_OFF, goal_id, {
                "owner_role": Role.ROUTER.value, "from_role": from_role, "to_role": d.next_role,
                "reason": f"router: {latest.kind.value} done; {d.next_stage} is next", "current_stage": _stage_of(d.stage),
                "next_stage": d.next_stage, "input_record_ids": [latest.id], "output_record_ids": [log.id],
            }, self.records(goal_id), token)  # fmt: skip
            written.append(hand.id)
        return ContinueResult(goal_id, d.next_stage, d.next_role, d.state, None, written)

    def handoff(
        self,
        goal_id: str,
        to_role: str,
        reason: str,
        *,
        from_role: str | None = None,
        token: int | None = None,
        **terms: Any,
    ) -> Written:
        """Pass the goal to ``to_role``, copying success criteria, deadline and trigger from the plan."""
        chain = self.records(goal_id)
        if not chain:
            raise ValidationError(f"no goal {shown(goal_id)}", field="goal_id", rule="unknown-goal")
        work = [r for r in chain if r.kind != Kind.RUN_LOG] or chain
        role = from_role or (work[-1].owner_role if work[-1].owner_role in Role.__members__.values() else Role.ROUTER.value)
        data: dict[str, Any] = {"owner_role": role, "from_role": role, "to_role": _role_arg(to_role), "reason": reason}
        data.update({k: v for k, v in terms.items() if v is not None})
        return self._write(Kind.HAND_OFF, goal_id, data, chain, token)

    def escalate(
        self,
        goal_id: str,
        *,
        reason: str,
        question: str,
        recommended_default: str,
        risk_of_waiting: str,
        consulted_roles: Sequence[str] = (),
        promote_to_full: bool = False,
        level: int = 1,
        token: int | None = None,
    ) -> Written:
        """Record that the goal needs an answer or authority beyond its owner; it stops until answered."""
        return self.write(Kind.ESCALATION.value, goal_id, {
            "reason": reason, "question": question, "recommended_default": recommended_default,
            "risk_of_waiting": risk_of_waiting, "consulted_roles": list(consulted_roles),
            "promote_to_full": promote_to_full, "level": level,
        }, token=token)  # fmt: skip

    def approve(self, goal_id: str, *, approved_by: str, token: int | None = None) -> Written:
        """Authorise the pending step of a goal waiting for authorisation; the builder resumes."""
        chain = self.records(goal_id)
        d = decide(chain)
        pending = [r for r in chain if r.kind == Kind.PENDING or r.status == RecordStatus.PENDING]
        if not pending or d is None or d.state != State.PENDING:
            raise ConflictError(f"goal {shown(goal_id)} is not waiting for authorisation")
        p = pending[-1]
        return self._write(Kind.PENDING, goal_id, {
            "owner_role": p.owner_role if p.owner_role in KIND_RULES[Kind.PENDING].roles else Role.BUILDER.value,
            "action": p.get("action") or "the pending step", "reason": f"approved by {approved_by}",
            "approved": True, "approved_by": approved_by, "status": RecordStatus.COMPLETED.value,
            "input_record_ids": [p.id],
        }, chain, token)  # fmt: skip

    # -- claims ------------------------------------------------------------------------

    def claim(self, goal_id: str, role: str, *, ttl_ms: int = 30 * 60_000) -> Lease:
        """A lease on the goal for ``role`` with a fencing token; refused while another is live."""
        r = _role_arg(role)
        d = self.decide(goal_id)
        if d.state == State.CLOSED:
            raise ConflictError(f"goal {goal_id} is closed")
        holder = f"{r}@{self.identity.agent_id}"
        return self.store.acquire_lease(lease_key(self.identity, goal_id), holder, ttl_ms)

    def release(self, goal_id: str, token: int) -> Lease:
        return self.store.release_lease(lease_key(self.identity, goal_id), token)

    def lease(self, goal_id: str) -> Lease | None:
        return self.store.get_lease(lease_key(self.identity, goal_id))

    def ready(self, role: str | None = None) -> list[Decision]:
        """Continueable goals whose next role is ``role`` and that no live claim holds."""
        now = self._clock()
        prefix = lease_key(self.identity, "")
        held = {le.key[len(prefix):] for le in self.store.leases(prefix) if le.live(now)}
        return [d for d in self.status(role=role) if d.state == State.CONTINUEABLE and d.goal_id not in held]

    # -- reports -----------------------------------------------------------------------

    def show(self, goal_id: str, *, as_of: float | None = None) -> dict[str, Any]:
        """The goal's decision and its chain as a timeline with links."""
        from ._report import timeline

        views = self.records(goal_id, as_of=as_of)
        if not views:
            raise NotFoundError(f"no records of goal {shown(goal_id)}")
        d = decide(views, as_of=as_of)  # None for the charter goal: ratifications are not a chain
        return {"goal_id": goal_id, "decision": d.to_dict() if d else None, "records": timeline(views)}

    def graph(self, goal_id: str, *, as_of: float | None = None) -> str:
        from ._report import mermaid

        views = self.records(goal_id, as_of=as_of)
        if not views:
            raise NotFoundError(f"no records of goal {shown(goal_id)}")
        return mermaid(views)

    def metrics(self, goal_id: str | None = None) -> list[dict[str, Any]]:
        from ._report import metrics

        goals = {goal_id: self.records(goal_id)} if goal_id else self.all_records()
        if goal_id and not goals[goal_id]:
            raise NotFoundError(f"no records of goal {shown(goal_id)}")
        return [m for g in sorted(goals) if (m := metrics(goals[g]))]

    def doctor(self) -> list[Any]:
        """Every record of the workspace read with repairs, or that cannot be placed in its chain."""
        from ._report import doctor

        from ._report import Finding

        mems = self.store.scan(self.identity.workspace)
        goals: dict[str, list[RecordView]] = defaultdict(list)
        for v in views_of(mems):
            goals[v.goal_id].append(v)
        lost = [Finding(mid, gid, why, False) for mid, gid, why in unplaced(mems)]
        return doctor(goals, known_ids=(m.id for m in mems)) + lost

    # -- charter -----------------------------------------------------------------------

    def ratify_charter(
        self,
        review: Any,
        *,
        rater: str,
        deferrals: Sequence[tuple[str, str]] = (),
    ) -> Written:
        """Record a ratification of the reviewed charter; a re-ratification links the previous one."""
        from ._charter import CHARTER_GOAL_ID, ratification_data

        previous = [v for v in self.records(CHARTER_GOAL_ID) if v.kind == Kind.CHARTER]
        data = ratification_data(review, rater=rater, deferrals=deferrals, previous_record_id=previous[-1].id if previous else None)
        return self._write(Kind.CHARTER, CHARTER_GOAL_ID, data, [], None)

    # -- memory first ------------------------------------------------------------------

    def recall(self, query: str, *, limit: int = 5) -> RecallResult:
        """Recall for ``query``; memories at score >= 0.45 are relevant, else fall back to keyword search."""
        hits = self.store.recall(query, self.identity.scope, limit)
        relevant = [h for h in hits if h.score >= self.RELEVANCE_FLOOR]
        method = "semantic"
        if not relevant:
            relevant = self.store.search(query, self.identity.scope, limit)
            method = "keyword" if relevant else "none"
        shown = [{"id": h.id, "score": round(h.score, 4), "content": h.memory.content, "metadata": h.memory.metadata} for h in relevant]
        return RecallResult(query, method, shown, [h.id for h in relevant])


def _terms_source(work: Sequence[RecordView]) -> RecordView | None:
    """The latest dispatch instruction (or plan record, in lite mode) a hand-off copies from;
    before either exists, a goal record that was started with all three terms."""
    for r in reversed(work):
        if r.kind in (Kind.DISPATCH, Kind.PLAN):
            return r
    for r in work:
        if r.kind == Kind.GOAL and all(r.get(t) for t in _TERMS):
            return r
    return None


def _stage_of(stage: str) -> str:
    return stage if stage in Stage.__members__.values() else Stage.HAND_OFF.value


def _kind_arg(kind: str) -> Kind:
    if kind in Kind.__members__.values():
        return Kind(kind)
    near = normalise_kind(kind)
    hint = f"; did you mean {near.value}?" if near else ""
    raise ValidationError(f"{shown(kind)} is not a record kind{hint} (one of {', '.join(k.value for k in Kind)})", field="kind", rule="kind")


def _role_arg(role: str) -> str:
    if role not in Role.__members__.values():
        raise ValidationError(f"{shown(role)} is not a role (one of {', '.join(r.value for r in Role)})", field="role", rule="role")
    return role


def _field_names(model: Any) -> frozenset[str]:
    return frozenset(model.model_fields)


def _validated(model: Any, data: dict[str, Any]) -> Any:
    """The pydantic model, or a ValidationError naming the first bad field (never echoing its value)."""
    from pydantic import ValidationError as PydanticError

    try:
        return model.model_validate(data)
    except PydanticError as exc:
        errs = exc.errors(include_input=False, include_url=False)
        first = errs[0]
        loc = ".".join(str(p) for p in first["loc"]) or "record"
        rule = {"missing": "required", "extra_forbidden": "unknown-field"}.get(first["type"], "schema")
        msg = {"missing": "is required", "extra_forbidden": "is not a field of this kind (put your own data under 'extra')"}.get(
            first["type"], first["msg"].removeprefix("Value error, ")
        )
        more = f" (and {len(errs) - 1} more)" if len(errs) > 1 else ""
        raise ValidationError(f"{msg}{more}", field=loc, rule=rule) from None


def parse_as_of(value: str | None) -> float | None:
    """``--as-of``: an ISO 8601 time (naive = UTC)."""
    if value is None:
        return None
    t = parse_time(value)
    if t is None:
        raise ValidationError("must be an ISO 8601 time, e.g. 2026-12-01T12:00:00Z", field="as_of", rule="time")
    return t
