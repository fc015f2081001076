"""Checks of a new record against its goal's chain (the ones a lone record cannot make).

Each failure is a :class:`ValidationError` naming the field and the rule, so a
caller (agent, script, supervisor) can fix exactly that and retry.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..exceptions import NotFoundError, ValidationError
from ..memory import MemoryStore
from ._kinds import KIND_RULES, Kind, VerdictStatus
from ._view import RecordView, view_of

if TYPE_CHECKING:
    from ._models import Record

__all__ = ["check_fit", "check_links"]


def shown(value: object) -> str:
    """``value`` for an error message, unless it might be a secret or is long (then a stand-in)."""
    from ..memory import find_secret

    text = value if isinstance(value, str) else repr(value)
    if len(text) > 80 or find_secret(text):
        return "the value given"
    return repr(value)


def check_fit(kind: Kind, stage: object, owner_role: object) -> None:
    """The stage and owner role fit the kind (a verdict is written at verification by the verifier)."""
    rule = KIND_RULES[kind]
    if stage not in rule.stages:
        allowed = ", ".join(s.value for s in rule.stages[:4]) + (", ..." if len(rule.stages) > 4 else "")
        raise ValidationError(f"a {kind.value} is written at stage {allowed}, not {shown(stage)}", field="stage", rule="kind-fit")
    if owner_role not in rule.roles:
        allowed = ", ".join(r.value for r in rule.roles)
        raise ValidationError(f"a {kind.value} is written by {allowed}, not {shown(owner_role)}", field="owner_role", rule="kind-fit")


def check_links(rec: Record, chain: Sequence[RecordView], store: MemoryStore, writer_instance: str, writer_agent: str) -> None:
    """Every link of ``rec`` resolves, inside its goal, to the kind of record it must be."""
    by_id = {r.id: r for r in chain}
    kind = rec.kind
    if kind not in (Kind.GOAL, Kind.CHARTER) and not rec.input_record_ids:
        raise ValidationError(
            "name the records this stage read (at least one record of the goal)",
            field="input_record_ids", rule="required",
        )  # fmt: skip
    for field in ("input_record_ids", "output_record_ids"):
        for rid in getattr(rec, field):
            _check_link(rid, field, rec.goal_id, by_id, store)
    for mid in rec.recalled_memory_ids:
        try:
            store.get(mid)
        except NotFoundError:
            raise ValidationError(f"no memory {mid}", field="recalled_memory_ids", rule="link") from None
    if rec.verdict_id is not None:
        v = by_id.get(rec.verdict_id)
        if v is None or v.kind != Kind.VERDICT:
            raise ValidationError(f"{rec.verdict_id} is not a verdict of goal {rec.goal_id}", field="verdict_id", rule="link")
    if kind == Kind.ARCHIVAL:
        _check_green(rec, chain, by_id)
    if kind == Kind.VERDICT:
        for r in chain:
            if r.kind in (Kind.ACTION, Kind.CLEANUP) and _same_writer(r, writer_instance, writer_agent):
                raise ValidationError(
                    f"{writer_instance} wrote {r.kind.value} {r.id} of this goal; a verifier never verifies its "
                    "own work (give each role its own --agent-id or --instance)",
                    field="owner_instance", rule="self-verification",
                )  # fmt: skip


def _same_writer(r: RecordView, instance: str, agent: str) -> bool:
    """Did the writer (``instance`` under agent id ``agent``) write ``r``?

    Instances decide when the earlier record named one of its own; a record that did
    not (its instance is just its agent id) can only be told apart by agent id, so a
    new instance name under the same agent id is still the same writer.
    """
    if r.instance == instance:
        return True
    named = r.instance != r.agent_id
    return not named and bool(r.agent_id) and r.agent_id == agent


def _check_link(rid: str, field: str, goal_id: str, by_id: dict[str, RecordView], store: MemoryStore) -> None:
    if rid in by_id:
        return
    if rid == goal_id:
        raise ValidationError(
            "names the goal id, not a record: link the records this stage read (e.g. the goal_record's id)",
            field=field, rule="link",
        )  # fmt: skip
    try:
        mem = store.get(rid)
    except NotFoundError:
        raise ValidationError(f"no record {rid}", field=field, rule="link") from None
    other = view_of(mem.id, mem.content, mem.metadata, mem.created_at, mem.agent_id)
    what = f"a record of goal {other.goal_id}" if other is not None else "a memory, not a record of this goal"
    raise ValidationError(
        f"{rid} is {what}; memories recalled for background belong in recalled_memory_ids",
        field=field, rule="cross-goal",
    )  # fmt: skip


def _check_green(rec: Record, chain: Sequence[RecordView], by_id: dict[str, RecordView]) -> None:
    """spec: the archivist never archives without a green verdict.

    The verdict named must be the goal's latest verdict, green, and newer than its
    last action (so work done since, or a red verdict given since, blocks closure),
    and the goal must have had an action to verify.
    """
    work = [r for r in chain if r.kind in (Kind.ACTION, Kind.CLEANUP)]
    verdicts = [r for r in chain if r.kind == Kind.VERDICT]
    v = by_id.get(rec.verdict_id) if rec.verdict_id else None
    ok = (
        v is not None and work and verdicts and v.id == verdicts[-1].id
        and v.verdict == VerdictStatus.GREEN and v.sort_key() > work[-1].sort_key()
    )  # fmt: skip
    if not ok:
        raise ValidationError(
            "an archival record needs verdict_id naming the goal's latest verdict, green and newer than its last action",
            field="verdict_id", rule="green-verdict",
        )  # fmt: skip
