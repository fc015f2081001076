"""Read-only views of a goal's chain: the timeline, a Mermaid graph, metrics, and the doctor.

All are functions of records (``RecordView``) only, so they replay ``as_of`` any time.
"""

from __future__ import annotations

import datetime as dt
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ._kinds import Kind, VerdictStatus
from ._router import decide
from ._view import RecordView

__all__ = ["Finding", "doctor", "mermaid", "metrics", "timeline"]

_CORRECTION = re.compile(r"(?i)\b(correction|corrects|corrected|fix(es|ing)? (the )?(broken )?links?|supersedes record)\b")


def _iso(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _headline(v: RecordView) -> str:
    lines = v.content.splitlines()
    return lines[1] if len(lines) > 1 and lines[0].startswith("Goal:") else (lines[0] if lines else "")


def timeline(views: Sequence[RecordView]) -> list[dict[str, Any]]:
    """The chain, oldest first, with its links and anything the reader had to repair."""
    return [
        {
            "id": v.id,
            "kind": v.kind.value,
            "stage": v.stage,
            "owner_role": v.owner_role,
            "agent_id": v.agent_id,
            "stored_at": _iso(v.stored_at),
            "status": v.status,
            "summary": _headline(v),
            "input_record_ids": v.input_ids,
            "output_record_ids": [x for x in v.get("output_record_ids", []) or [] if isinstance(x, str)],
            "recalled_memory_ids": [x for x in v.get("recalled_memory_ids", []) or [] if isinstance(x, str)],
            "verdict_id": v.get("verdict_id"),
            "repairs": list(v.repairs),
        }
        for v in views
    ]


def mermaid(views: Sequence[RecordView]) -> str:
    """The chain as a Mermaid flowchart: one node per record, an edge per input link."""
    names = {v.id: f"r{i}" for i, v in enumerate(views)}
    out = ["flowchart TD"]
    for v in views:
        label = f"{v.kind.value}<br/>{v.owner_role} · {v.status}<br/>…{v.id[-8:]}"
        out.append(f'    {names[v.id]}["{label}"]')
    for v in views:
        for src in v.input_ids:
            if src in names:
                out.append(f"    {names[src]} --> {names[v.id]}")
            else:
                out.append(f'    missing_{src[-8:]}["missing …{src[-8:]}"] -.-> {names[v.id]}')
        vid = v.get("verdict_id")
        if isinstance(vid, str) and vid in names:
            out.append(f"    {names[vid]} -. verdict .-> {names[v.id]}")
    return "\n".join(out)


def metrics(views: Sequence[RecordView]) -> dict[str, Any]:
    """Per goal (notes, "Metrics"): roles, turns, records by kind, rework, reopenings, ..."""
    chain = [v for v in views if v.kind != Kind.CHARTER]
    if not chain:
        return {}
    by_kind = Counter(v.kind.value for v in chain)
    verdicts = [v for v in chain if v.kind == Kind.VERDICT]
    reopenings = sum(
        1 for i, v in enumerate(chain) if v.kind == Kind.ARCHIVAL and any(w.kind == Kind.ACTION for w in chain[i + 1 :])
    )
    human = sum(1 for v in chain if (v.kind == Kind.PENDING and v.get("approved") is True) or v.kind == Kind.ESCALATION)
    per_role: dict[str, dict[str, float]] = defaultdict(lambda: {"records": 0, "seconds_in_stage": 0.0})
    for prev, cur in zip(chain, chain[1:], strict=False):
        per_role[cur.owner_role]["seconds_in_stage"] += max(0.0, cur.stored_at - prev.stored_at)
    for v in chain:
        per_role[v.owner_role]["records"] += 1
    d = decide(chain)
    return {
        "goal_id": chain[0].goal_id,
        "state": d.state if d else None,
        "roles_involved": sorted({v.owner_role for v in chain if v.owner_role}),
        "turns": sum(1 for v in chain if v.kind != Kind.RUN_LOG),
        "records_by_kind": dict(sorted(by_kind.items())),
        "rework": sum(1 for v in verdicts if v.verdict == VerdictStatus.RED),
        "reopenings": reopenings,
        "human_interventions": human,
        "duration_seconds": round(chain[-1].stored_at - chain[0].stored_at, 3),
        "final_verdict": verdicts[-1].verdict if verdicts else None,
        "per_role": {r: {"records": int(x["records"]), "seconds_in_stage": round(x["seconds_in_stage"], 3)} for r, x in sorted(per_role.items())},
    }


@dataclass(frozen=True)
class Finding:
    """One thing ``team doctor`` had to repair, or could not place, by record id."""

    record_id: str
    goal_id: str
    problem: str
    repaired: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def doctor(goals: Mapping[str, Sequence[RecordView]], known_ids: Iterable[str] = ()) -> list[Finding]:
    """Records read with repairs, links that do not resolve or cross goals, correction records."""
    goal_of = {v.id: g for g, vs in goals.items() for v in vs}
    elsewhere = set(known_ids)
    out: list[Finding] = []
    for g, views in sorted(goals.items()):
        for v in views:
            out += [Finding(v.id, g, r, True) for r in v.repairs]
            for field in ("input_record_ids", "output_record_ids"):
                raw = v.get(field)
                if raw is None:
                    continue
                if not isinstance(raw, list):
                    out.append(Finding(v.id, g, f"{field} is not a list", False))
                    continue
                for link in (x for x in raw if isinstance(x, str)):
                    if link == g:
                        out.append(Finding(v.id, g, f"{field} names the goal id {link}, not a record", False))
                    elif link not in goal_of:
                        what = "a memory that is not a record" if link in elsewhere else "nothing"
                        out.append(Finding(v.id, g, f"{field} {link} resolves to {what}", False))
                    elif goal_of[link] != g:
                        out.append(Finding(v.id, g, f"{field} {link} belongs to goal {goal_of[link]}", False))
            if v.kind != Kind.GOAL and not v.input_ids and v.kind != Kind.CHARTER:
                out.append(Finding(v.id, g, "no input_record_ids: the record is not linked into the chain", False))
            if _CORRECTION.search(v.content) or v.get("corrects") or v.get("correction"):
                out.append(Finding(v.id, g, "a correction record (fixes an earlier record's content or links)", False))
        if views and not any(v.kind == Kind.GOAL for v in views) and g != "charter-ratification":
            out.append(Finding(views[0].id, g, "the goal has no goal_record", False))
    return out
