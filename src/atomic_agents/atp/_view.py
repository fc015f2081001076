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
_ROLES = frozenset(r.value for r in Role)


_fromiso = dt.datetime.fromisoformat


def parse_time(value: object) -> float | None:
    """Unix seconds from an ISO 8601 string (``Z`` or an offset; naive means UTC), or ``None``."""
    if type(value) is str and len(value) == 27 and value[-1] == "Z":  # the ledger's own form: fast path
        try:
            return _fromiso(value).timestamp()
        except ValueError:
            pass
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        t = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.timezone.utc)
    return t.timestamp()


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
    stored = parse_time(metadata.get("stored_at"))
    if stored is None:
        stored = created_at
        repairs.append("stored_at missing or not ISO 8601; the store's created_at used")
    status = metadata.get("status")
    if kind == Kind.VERDICT and not isinstance(metadata.get("verdict_status"), str) and isinstance(status, str):
        metadata = {**metadata, "verdict_status": status}
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


def views_of(memories: Iterable[Any]) -> list[RecordView]:
    """Views of every memory that holds a record (others are skipped), in chain order."""
    out = []
    for m in memories:
        v = view_of(m.id, m.content, m.metadata, m.created_at, m.agent_id)
        if v is not None:
            out.append(v)
    out.sort(key=RecordView.sort_key)
    return out
