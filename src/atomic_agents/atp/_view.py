"""Reading records tolerantly: any memory that looks like an ATP record becomes a :class:`RecordView`.

Writes are strict (``_models``); reads are not, because other ATP tools wrote
records with no ``record_type``, drifted kind names and links that go nowhere.
A view keeps what it had to repair (``repairs``) so ``team doctor`` can report it.
No pydantic here: ``status`` over 10,000 records goes through this module only.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ._kinds import Kind, RecordStatus, Role, Stage, VerdictStatus, kind_of_stage, normalise_kind

__all__ = ["RecordView", "parse_time", "view_of"]

# The identity line every record's content starts with (notes, "Content conventions").
_IDENTITY = re.compile(
    r"^Goal:\s*(?P<goal>[^|\n]+?)\s*\|\s*Record ID:\s*(?P<rid>[^|\n]+?)\s*\|\s*Stage:\s*(?P<stage>[^|\n]+?)"
    r"\s*\|\s*Owner:\s*(?P<owner>[^|\n]+?)\s*$",
    re.MULTILINE,
)


_KIND_VALUES = {k.value: k for k in Kind}
_STAGES = frozenset(s.value for s in Stage)
_VERDICTS = frozenset(v.value for v in VerdictStatus)
_STATUSES = frozenset({*(s.value for s in RecordStatus), *(v.value for v in VerdictStatus), "proceed", "no-proceed"})
_ROLES = frozenset(r.value for r in Role)


_fromiso = dt.datetime.fromisoformat


#: Times outside 1970..2999 are not a record's time (a unit mix-up, a corrupt value).
_MAX_TIME = 32503680000.0


def parse_time(value: object) -> float | None:
    """Unix seconds from an ISO 8601 string (``Z`` or an offset; naive means UTC), or ``None``.

    Numbers are unix seconds (or milliseconds, as JavaScript tools write them); a time
    outside 1970..2999 is ``None``, never an error.
    """
    if type(value) is str and len(value) == 27 and value[-1] == "Z":  # the ledger's own form: fast path
        try:
            return _in_range(_fromiso(value).timestamp())
        except ValueError:
            pass
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        v = float(value)
        if _MAX_TIME < v < _MAX_TIME * 1000:
            v /= 1000.0
        return _in_range(v)
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        t = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00").replace("z", "+00:00"))
        if t.tzinfo is None:
            t = t.replace(tzinfo=dt.timezone.utc)
        return _in_range(t.timestamp())
    except (ValueError, OverflowError, OSError):
        return None


def _in_range(t: float) -> float | None:
    return t if 0.0 <= t <= _MAX_TIME else None


@dataclass(slots=True)
class RecordView:
    """One record as the router and the status table see it (read-only by convention:
    not frozen, because frozen construction costs a third of ``status``)."""

    id: str
    goal_id: str
    kind: Kind
    stage: str
    owner_role: str
    status: str  # RecordStatus, or a verdict's green/red/blocked, or a charter's proceed/no-proceed
    stored_at: float
    metadata: Mapping[str, Any]
    content: str = ""
    agent_id: str = ""
    repairs: tuple[str, ...] = field(default=())

    @property
    def blocked(self) -> bool:
        """A blocked verdict, or any record whose status is blocked (notes, router table)."""
        return self.status == RecordStatus.BLOCKED or self.metadata.get("verdict_status") == VerdictStatus.BLOCKED

    @property
    def verdict(self) -> str | None:
        if self.kind != Kind.VERDICT:
            return None
        v = self.metadata.get("verdict_status", self.status)
        return v if isinstance(v, str) else None

    @property
    def input_ids(self) -> list[str]:
        return _ids(self.metadata.get("input_record_ids"))

    @property
    def instance(self) -> str:
        """Who wrote it, for the "never verifies its own work" rule: instance, else agent id."""
        inst = self.metadata.get("owner_instance")
        return inst if isinstance(inst, str) and inst else self.agent_id

    def get(self, key: str, default: Any = None) -> Any:
        return self.metadata.get(key, default)

    def sort_key(self) -> tuple[float, str]:
        # notes: "Latest" means greatest stored_at, ties broken by id.
        return (self.stored_at, self.id)


def _ids(value: object) -> list[str]:
    if isinstance(value, str):  # other tools wrote "id1, id2" or a JSON-ish "[id1, id2]"
        return [p for p in re.split(r"[\s,\[\]\"']+", value) if p]
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, str) and v]
    return []


def view_of(
    memory_id: str,
    content: str,
    metadata: Mapping[str, Any],
    created_at: float,
    agent_id: str = "",
) -> RecordView | None:
    """The record a memory holds, repaired where it can be; ``None`` if it is not an ATP record."""
    fast = _as_written(memory_id, content, metadata, agent_id)
    if fast is not None:
        return fast
    repairs: list[str] = []
    goal, stage, owner = metadata.get("goal_id"), metadata.get("stage"), metadata.get("owner_role")
    if not (isinstance(goal, str) and goal and isinstance(stage, str) and stage and isinstance(owner, str) and owner):
        # Only records written by other tools get here: the content's identity line fills gaps.
        head = content[:2000]
        ident = _IDENTITY.search(head) if "Goal:" in head else None
        if not isinstance(goal, str) or not goal:
            if ident is None:
                return None
            goal = ident["goal"]
            repairs.append("goal_id taken from the content's identity line")
        if not isinstance(stage, str) or not stage:
            stage = ident["stage"] if ident else ""
            if stage:
                repairs.append("stage taken from the content's identity line")
        if not isinstance(owner, str) or not owner:
            owner = ident["owner"] if ident else ""
            if owner:
                repairs.append("owner_role taken from the content's identity line")
    if stage not in _STAGES and (not stage.islower() or " " in stage or "-" in stage):
        stage, was = _norm_word(stage), stage
        repairs.append(f"stage {was!r} read as {stage}")
    if owner not in _ROLES and (not owner.islower() or " " in owner):
        owner, was = _norm_word(owner), owner
        repairs.append(f"owner_role {was!r} read as {owner}")
    kind = _kind(metadata, stage, repairs)
    if kind is None:
        return None
    raw_time = metadata.get("stored_at")
    stored = parse_time(raw_time)
    if stored is None:
        stored = created_at
        repairs.append("stored_at missing, not ISO 8601 or out of range; the store's created_at used")
    elif not isinstance(raw_time, str):
        repairs.append(f"stored_at {raw_time!r} read as unix time")
    status = metadata.get("status")
    if isinstance(status, str) and status not in _STATUSES:
        folded = _norm_word(status)
        if folded != status:
            repairs.append(f"status {status!r} read as {folded}")
            status = folded
    if kind == Kind.VERDICT:  # a verdict's colour: verdict_status, else (as the spec names it) status
        verdict = metadata.get("verdict_status", status)
        if isinstance(verdict, str):
            folded = _norm_word(verdict)
            if folded != verdict:
                repairs.append(f"verdict {verdict!r} read as {folded}")
            if metadata.get("verdict_status") != folded:
                metadata = {**metadata, "verdict_status": folded}
    if not isinstance(status, str) or not status:
        status = RecordStatus.COMPLETED
    return RecordView(
        id=memory_id,
        goal_id=goal,
        kind=kind,
        stage=stage or "",
        owner_role=owner or "",
        status=status,
        stored_at=stored,
        metadata=metadata,
        content=content,
        agent_id=agent_id,
        repairs=tuple(repairs),
    )


def _as_written(memory_id: str, content: str, metadata: Mapping[str, Any], agent_id: str) -> RecordView | None:
    """The view of a record exactly as the ledger writes it, or ``None`` (then the full, repairing path).

    ``status`` reads every record of a workspace; nearly all are the ledger's own, and
    need none of the checks and repairs that records of other tools do.
    """
    rt = metadata.get("record_type")
    if rt is None or rt != metadata.get("kind") or rt not in _KIND_VALUES:
        return None
    goal, stage, owner, status = metadata.get("goal_id"), metadata.get("stage"), metadata.get("owner_role"), metadata.get("status")
    stored = metadata.get("stored_at")
    if not (type(goal) is str and goal and stage in _STAGES and owner in _ROLES and status in _STATUSES
            and type(stored) is str and len(stored) == 27 and stored[-1] == "Z"):  # fmt: skip
        return None
    kind = _KIND_VALUES[rt]
    if kind is Kind.VERDICT and metadata.get("verdict_status") not in _VERDICTS:
        return None
    try:
        t = _fromiso(stored).timestamp()
    except ValueError:
        return None
    if not 0.0 <= t <= _MAX_TIME:
        return None
    return RecordView(memory_id, goal, kind, stage, owner, status, t, metadata, content, agent_id)


def _norm_word(text: str) -> str:
    return text.strip().lower().replace("-", "_").replace(" ", "_")


def _kind(metadata: Mapping[str, Any], stage: str, repairs: list[str]) -> Kind | None:
    rt, kd = metadata.get("record_type"), metadata.get("kind")
    if rt == kd and rt in _KIND_VALUES:  # what the ledger writes: no repair to look for
        return _KIND_VALUES[rt]
    for key, raw in (("record_type", rt), ("kind", kd)):
        k = normalise_kind(raw)
        if k is None:
            continue
        if raw != k.value:
            repairs.append(f"{key} {raw!r} mapped to {k.value}")
        elif key == "kind" and rt is None:
            repairs.append("record_type missing; taken from kind")
        return k
    k = kind_of_stage(stage)
    if k is not None:
        repairs.append(f"record_type missing; inferred {k.value} from stage {stage}")
        return k
    k = _KIND_OF_OWNER.get(str(metadata.get("owner_role", "")).strip().lower())
    if k is not None:
        repairs.append(f"record_type missing and stage {stage!r} unknown; inferred {k.value} from the owner role")
    return k


# The roles that write one kind only (notes, "Roles and who writes what"); the others write several.
_KIND_OF_OWNER = {"researcher": Kind.CONTEXT, "verifier": Kind.VERDICT}


def views_of(memories: Iterable[Any]) -> list[RecordView]:
    """Views of every memory that holds a record, in chain order.

    A record is placed in a chain by the ``goal_id`` in its metadata only: that is what
    reading one goal can look up, and every reader must see the same chain. A memory
    whose goal is named only by its content line is left out here and reported by
    ``team doctor`` (see :func:`unplaced`).
    """
    out = []
    for m in memories:
        g = m.metadata.get("goal_id")
        if not isinstance(g, str) or not g:
            continue
        v = view_of(m.id, m.content, m.metadata, m.created_at, m.agent_id)
        if v is not None:
            out.append(v)
    out.sort(key=RecordView.sort_key)
    return out


def unplaced(memories: Iterable[Any]) -> list[tuple[str, str, str]]:
    """(memory id, goal id, why) for memories that name a goal but cannot join its chain."""
    out = []
    for m in memories:
        g = m.metadata.get("goal_id")
        has_goal = isinstance(g, str) and bool(g)
        v = view_of(m.id, m.content, m.metadata, m.created_at, m.agent_id)
        if has_goal and v is None:
            out.append((m.id, str(g), "names a goal but has no record kind (record_type, kind, stage and owner give none)"))
        elif not has_goal and v is not None:
            out.append((m.id, v.goal_id, "goal_id only in the content's identity line: not placed in its chain (put goal_id in the metadata)"))
    return out
