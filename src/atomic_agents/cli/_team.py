"""`atomic-agents team ...`: the ATP ledger on the command line.

Every command opens the store, makes one :class:`~atomic_agents.atp.Ledger` call
and renders it (``--json`` for scripts and agents). The options every command
shares (store, identity, ``--json``) are the CLI's group-wide options (``_common.SHARED``),
so they may be given after the subcommand, as agents call it.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from ..exceptions import NotFoundError, ValidationError
from ._common import agents_root, db_path, emit, group_options, option, shared, wants_json

app = typer.Typer(help="The ATP ledger: goals, typed records, routing, claims and charter.", no_args_is_help=True,
                  callback=group_options("agents_root", "db"))

_ROLES = "dispatcher, researcher, builder, runtime, verifier, archivist, router"


_TEAM = ("agents_root", "db", "json", "project", "org_id", "workspace_id", "agent_id", "user_id")


def _project() -> Path:
    return option("project") or Path(".")


@contextmanager
def _ledger(*, reading: bool = False) -> Iterator[Any]:
    """The ledger as this command's identity, over the store it names; closed afterwards.

    ``reading``: a command that only reads (status, show, replay, ...) never creates a store.
    """
    from ..atp import Ledger, resolve_identity
    from ..memory import default_db_path, default_embedder, open_store

    ident = resolve_identity(
        _project(), org_id=option("org_id"), workspace_id=option("workspace_id"),
        agent_id=option("agent_id"), user_id=option("user_id"),
    )  # fmt: skip
    if reading:
        given = db_path() or os.environ.get("ATOMIC_AGENTS_DB")
        where = given if given is not None else default_db_path(agents_root())
        if "://" not in str(where) and not Path(where).exists():  # a DSN names a server: nothing to check here
            raise NotFoundError(f"no memory store at {where}: nothing has been recorded there yet", path=where)
    # The model (ATOMIC_AGENTS_EMBEDDER picks another) loads only when a write or recall embeds.
    store = open_store(db_path(), agents_root=agents_root(), embedder=default_embedder(), ann_build="off")
    try:
        yield Ledger(store, ident)
    finally:
        store.close()


def _command(name: str, help: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``fn`` as ``team <name>`` with the store and identity options (:data:`_TEAM`)."""

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        app.command(name, help=help)(shared(*_TEAM)(fn))
        return fn

    return wrap


def _json_arg(text: str, field: str) -> dict[str, Any]:
    try:
        value = json.loads(text, parse_int=_bounded_int)
    except (json.JSONDecodeError, RecursionError, ValueError) as exc:
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else "too deeply nested or too large a number"
        raise ValidationError(f"not valid JSON: {reason}", field=field, rule="json") from None
    if not isinstance(value, dict):
        raise ValidationError("must be a JSON object", field=field, rule="json")
    return value


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > 30:
        raise ValueError("integer too large")
    return int(text)


_TTL = re.compile(r"^(\d{1,7})\s*(ms|s|m|h|d)?$")


def _ttl_ms(text: str) -> int:
    m = _TTL.match(text.strip().lower())
    if not m:
        raise ValidationError("must be a duration like 90s, 30m, 2h or 1d", field="ttl", rule="duration")
    n, unit = int(m.group(1)), m.group(2) or "s"
    ms = n * {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}[unit]
    if not 0 < ms <= 86_400_000:
        raise ValidationError("must be more than 0 and at most 1d", field="ttl", rule="duration")
    return ms


def _as_of(value: str | None) -> float | None:
    from ..atp import parse_as_of

    return parse_as_of(value)


def _print(text: str) -> None:
    sys.stdout.write(text + "\n")


def _status_rows(rows: list[Any]) -> None:
    if not rows:
        _print("(no goals)")
        return
    cols = ["goal_id", "stage", "owner_role", "mode", "state", "next_role", "latest_record_id", "deadline", "escalation_trigger", "location"]
    table = [[str(getattr(d, c) or "-") for c in cols] for d in rows]
    widths = [min(40, max(len(c), *(len(r[i]) for r in table))) for i, c in enumerate(cols)]
    _print("  ".join(c.upper().ljust(w) for c, w in zip(cols, widths, strict=True)).rstrip())
    for r in table:
        _print("  ".join(v[:w].ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())
        if (blocker := rows[table.index(r)].blocker) is not None:
            _print(f"    blocker: {blocker}")


def _status_json(d: Any) -> dict[str, Any]:
    keys = ("goal_id", "stage", "owner_role", "mode", "state", "next_stage", "next_role", "latest_record_id",
            "deadline", "escalation_trigger", "location", "blocker")  # fmt: skip
    return {k: getattr(d, k) for k in keys}


@_command("start", "Start a goal: write its goal_record (lite mode unless --full).")
def start(
    text: Annotated[str, typer.Argument(help="What the goal is, in a sentence.")],
    requester: Annotated[str | None, typer.Option("--requester", help="Who asked (default: the user id).")] = None,
    constraint: Annotated[list[str] | None, typer.Option("--constraint", help="A guardrail (repeatable).")] = None,
    package_type: Annotated[str, typer.Option("--package-type", help="research, build, run, verify or archive.")] = "build",
    full: Annotated[bool, typer.Option("--full", help="Full mode: all seven stages.")] = False,
    goal_id: Annotated[str | None, typer.Option("--goal-id", help="Choose the goal id (a UUID or slug).")] = None,
    success_criteria: Annotated[str | None, typer.Option("--success-criteria", help="What done looks like, if known now.")] = None,
    deadline: Annotated[str | None, typer.Option("--deadline", help="ISO 8601 deadline, if known now.")] = None,
    escalation_trigger: Annotated[str | None, typer.Option("--escalation-trigger", help="When to escalate, if known now.")] = None,
) -> None:
    with _ledger() as ledger:
        w = ledger.start(text, requester=requester or ledger.identity.user_id, constraints=constraint or [],
                         package_type=package_type, mode="full" if full else "lite", goal_id=goal_id,
                         success_criteria=success_criteria, deadline=deadline, escalation_trigger=escalation_trigger)  # fmt: skip
    emit({"goal_id": w.goal_id, "record_id": w.id, "record": w.record}, wants_json(), lambda: _print(f"started {w.goal_id} ({w.record['mode']} mode), goal_record {w.id}"))


@_command("record", "Write one record of KIND for a goal, from --data JSON or --file.")
def record(
    kind: Annotated[str, typer.Argument(help="goal_record, plan_record, dispatch_instruction, context_summary, action_record, cleanup_record, verdict, escalation_record, archival_record, hand_off_record, run_log, pending_authorisation.")],
    goal: Annotated[str, typer.Option("--goal", help="The goal id.")],
    data: Annotated[str | None, typer.Option("--data", help="The record's fields as a JSON object.")] = None,
    file: Annotated[Path | None, typer.Option("--file", help="Read the JSON object from this file ('-' for stdin).")] = None,
    token: Annotated[int | None, typer.Option("--token", help="Fencing token of your claim on the goal.")] = None,
) -> None:
    if (data is None) == (file is None):
        raise ValidationError("give exactly one of --data or --file", field="data", rule="required")
    if file is not None:
        try:
            text = sys.stdin.read() if str(file) == "-" else file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ValidationError(f"cannot read a UTF-8 file: {getattr(exc, 'strerror', None) or exc.__class__.__name__}", path=file, field="file", rule="io") from None
    else:
        text = data or ""
    fields = _json_arg(text, "data" if file is None else "file")
    with _ledger() as ledger:
        w = ledger.write(kind, goal, fields, token=token)
    emit({"id": w.id, "record": w.record}, wants_json(), lambda: _print(f"{w.kind} {w.id} written for {w.goal_id}"))


@_command("status", "The status table: stage, owner, mode, state and next role of each goal.")
def status(
    goal: Annotated[str | None, typer.Argument(help="One goal (default: every goal of the workspace).")] = None,
    role: Annotated[str | None, typer.Option("--role", help=f"Only goals whose next role is this ({_ROLES}).")] = None,
    as_of: Annotated[str | None, typer.Option("--as-of", help="Replay: the status as of this ISO 8601 time.")] = None,
) -> None:
    when = _as_of(as_of)
    with _ledger(reading=True) as ledger:
        rows = ledger.status(goal, role=role, as_of=when)
    emit({"goals": [_status_json(d) for d in rows]}, wants_json(), lambda: _status_rows(rows))


@_command("show", "A goal's chain as a timeline with links (--graph: Mermaid).")
def show(
    goal: Annotated[str, typer.Argument(help="The goal id.")],
    graph: Annotated[bool, typer.Option("--graph", help="Print the chain as a Mermaid flowchart.")] = False,
    as_of: Annotated[str | None, typer.Option("--as-of", help="Replay: the chain as of this ISO 8601 time.")] = None,
) -> None:
    when = _as_of(as_of)
    with _ledger(reading=True) as ledger:
        if graph:
            text = ledger.graph(goal, as_of=when)
            emit({"goal_id": goal, "mermaid": text}, wants_json(), lambda: _print(text))
            return
        chain = ledger.show(goal, as_of=when)

    def human() -> None:
        d = chain["decision"]
        _print(f"{goal}: {d['state']} ({d['mode']}), at {d['stage']} by {d['owner_role']}; next {d['next_stage'] or '-'} by {d['next_role'] or '-'}")
        if d["blocker"]:
            _print(f"  blocker: {d['blocker']}")
        for r in chain["records"]:
            links = f" <- {', '.join('…' + i[-8:] for i in r['input_record_ids'])}" if r["input_record_ids"] else ""
            _print(f"  {r['stored_at']}  {r['id']}  {r['kind']:<21} {r['owner_role']:<10} {r['status']:<11} {r['summary'][:60]}{links}")

    emit(chain, wants_json(), human)


@_command("continue", "Route the goal: log the decision and hand off to the next role, or stop with the blocker.")
def continue_(
    goal: Annotated[str, typer.Argument(help="The goal id.")],
    token: Annotated[int | None, typer.Option("--token", help="Fencing token of your claim on the goal.")] = None,
) -> None:
    with _ledger() as ledger:
        r = ledger.continue_(goal, token=token)

    def human() -> None:
        if r.blocker:
            _print(f"{goal}: stopped ({r.state}): {r.blocker}")
        elif r.next_role:
            _print(f"{goal}: next {r.next_stage} by {r.next_role}" + (f" (wrote {len(r.written)} records)" if r.written else ""))
        else:
            _print(f"{goal}: {r.state}")

    emit({"goal_id": r.goal_id, "next_stage": r.next_stage, "next_role": r.next_role, "state": r.state,
          "blocker": r.blocker, "written": r.written}, wants_json(), human)  # fmt: skip


@_command("handoff", "Hand the goal to a role, copying success criteria, deadline and escalation trigger.")
def handoff(
    goal: Annotated[str, typer.Argument(help="The goal id.")],
    to: Annotated[str, typer.Option("--to", help=f"The receiving role ({_ROLES}).")],
    reason: Annotated[str, typer.Option("--reason", help="Why the goal moves.")],
    from_role: Annotated[str | None, typer.Option("--from", help="The transferring role (default: the latest record's owner).")] = None,
    success_criteria: Annotated[str | None, typer.Option("--success-criteria", help="Override the copied success criteria.")] = None,
    deadline: Annotated[str | None, typer.Option("--deadline", help="Override the copied deadline (ISO 8601).")] = None,
    escalation_trigger: Annotated[str | None, typer.Option("--escalation-trigger", help="Override the copied trigger.")] = None,
    token: Annotated[int | None, typer.Option("--token", help="Fencing token of your claim on the goal.")] = None,
) -> None:
    with _ledger() as ledger:
        w = ledger.handoff(goal, to, reason, from_role=from_role, token=token, success_criteria=success_criteria,
                           deadline=deadline, escalation_trigger=escalation_trigger)  # fmt: skip
    emit({"id": w.id, "record": w.record}, wants_json(), lambda: _print(f"{goal}: handed from {w.record['from_role']} to {w.record['to_role']} ({w.id})"))


@_command("escalate", "Escalate: the goal stops until the question is answered.")
def escalate(
    goal: Annotated[str, typer.Argument(help="The goal id.")],
    reason: Annotated[str, typer.Option("--reason", help="Why the goal cannot proceed.")],
    question: Annotated[str, typer.Option("--question", help="The decision or authority requested.")],
    recommended_default: Annotated[str, typer.Option("--recommended-default", help="The suggested resolution.")],
    risk_of_waiting: Annotated[str, typer.Option("--risk-of-waiting", help="What delay costs.")],
    consulted: Annotated[list[str] | None, typer.Option("--consulted", help="A role already asked (repeatable).")] = None,
    promote_to_full: Annotated[bool, typer.Option("--promote-to-full", help="Promote a lite goal to full mode.")] = False,
    level: Annotated[int, typer.Option("--level", min=1, max=4, help="1 owner->dispatcher ... 4 project owner.")] = 1,
    token: Annotated[int | None, typer.Option("--token", help="Fencing token of your claim on the goal.")] = None,
) -> None:
    with _ledger() as ledger:
        w = ledger.escalate(goal, reason=reason, question=question, recommended_default=recommended_default,
                            risk_of_waiting=risk_of_waiting, consulted_roles=consulted or [],
                            promote_to_full=promote_to_full, level=level, token=token)  # fmt: skip
    emit({"id": w.id, "record": w.record}, wants_json(), lambda: _print(f"{goal}: escalated (level {level}), {w.id}"))


@_command("approve", "Authorise the step a goal is waiting on (pending_authorisation); the builder resumes.")
def approve(
    goal: Annotated[str, typer.Argument(help="The goal id.")],
    by: Annotated[str, typer.Option("--by", help="Who authorises it.")],
    token: Annotated[int | None, typer.Option("--token", help="Fencing token of your claim on the goal.")] = None,
) -> None:
    with _ledger() as ledger:
        w = ledger.approve(goal, approved_by=by, token=token)
    emit({"id": w.id, "record": w.record}, wants_json(), lambda: _print(f"{goal}: approved by {by} ({w.id})"))


@_command("charter", "Ratify the project charter: hash, placeholder scan, active-roles check, proceed or not.")
def charter(
    path: Annotated[Path | None, typer.Argument(help="The charter (default .claude/agentic-team-charter.md, else ~/.claude/...).")] = None,
    non_interactive: Annotated[bool, typer.Option("--non-interactive", help="Ask nothing (also ATP_NON_INTERACTIVE=1 or CI=1).")] = False,
    rater: Annotated[str | None, typer.Option("--rater", help="Who ratifies (default: the user id).")] = None,
    defer: Annotated[list[str] | None, typer.Option("--defer", help="ITEM=REASON: an item deferred (repeatable).")] = None,
) -> None:
    from ..atp._charter import find_charter, review_charter

    quiet = non_interactive or os.environ.get("ATP_NON_INTERACTIVE") == "1" or os.environ.get("CI") == "1" or not sys.stdin.isatty()
    deferrals = []
    for item in defer or []:
        key, sep, why = item.partition("=")
        if not sep or not key.strip() or not why.strip():
            raise ValidationError(f"{item!r} is not ITEM=REASON", field="defer", rule="syntax")
        deferrals.append((key.strip(), why.strip()))
    review = review_charter(find_charter(_project().resolve(), path), _project().resolve())
    if not quiet and not wants_json():
        _print(f"charter {review.path} version {review.version}")
        for b in review.blockers:
            _print(f"  blocker: {b}")
            why = typer.prompt("  defer it? reason (empty: no)", default="", show_default=False)
            if why.strip():
                deferrals.append((b, why.strip()))
        for w in review.warnings:
            _print(f"  warning: {w}")
        if not typer.confirm("write the ratification record?", default=True):
            raise typer.Exit(1)
    with _ledger() as ledger:
        w = ledger.ratify_charter(review, rater=rater or ledger.identity.user_id, deferrals=deferrals)
    rec = w.record
    emit({"id": w.id, "record": rec}, wants_json(),
         lambda: _print(f"charter {rec['charter_path']} {rec['version']}: {rec['status']} ({rec['reason']}); record {w.id}"))  # fmt: skip


@_command("metrics", "Per-goal and per-role metrics: rework, reopenings, human interventions, durations.")
def metrics(goal: Annotated[str | None, typer.Argument(help="One goal (default: all).")] = None) -> None:
    with _ledger(reading=True) as ledger:
        rows = ledger.metrics(goal)

    def human() -> None:
        for m in rows:
            _print(f"{m['goal_id']}: {m['state']}, {m['turns']} turns, rework {m['rework']}, reopenings {m['reopenings']}, "
                   f"human {m['human_interventions']}, {m['duration_seconds']} s, final verdict {m['final_verdict'] or '-'}")  # fmt: skip
            for role, x in m["per_role"].items():
                _print(f"    {role:<11} {x['records']} records, {x['seconds_in_stage']} s in stage")

    emit({"goals": rows}, wants_json(), human)


@_command("doctor", "Report records read with repairs or that cannot be placed (by record id).")
def doctor() -> None:
    with _ledger(reading=True) as ledger:
        found = ledger.doctor()
    lines = [f"{f.record_id}  {f.goal_id}  {'repaired' if f.repaired else 'PROBLEM'}: {f.problem}" for f in found]
    emit({"findings": [f.to_dict() for f in found], "count": len(found)}, wants_json(), lambda: _print("\n".join(lines) or "no findings"))


@_command("claim", "Claim a goal for a role: a lease with a fencing token; refused while another is live.")
def claim(
    goal: Annotated[str, typer.Argument(help="The goal id.")],
    role: Annotated[str, typer.Option("--role", help=f"The claiming role ({_ROLES}).")],
    ttl: Annotated[str, typer.Option("--ttl", help="Lease length: 90s, 30m, 2h, 1d.")] = "30m",
) -> None:
    with _ledger() as ledger:
        lease = ledger.claim(goal, role, ttl_ms=_ttl_ms(ttl))
    emit({"goal_id": goal, **lease.to_dict()}, wants_json(), lambda: _print(f"{goal}: claimed by {lease.holder}, token {lease.token}"))


@_command("release", "Release your claim on a goal.")
def release(
    goal: Annotated[str, typer.Argument(help="The goal id.")],
    token: Annotated[int, typer.Option("--token", help="The fencing token the claim returned.")],
) -> None:
    with _ledger() as ledger:
        lease = ledger.release(goal, token)
    emit({"goal_id": goal, **lease.to_dict()}, wants_json(), lambda: _print(f"{goal}: released token {lease.token}"))


@_command("ready", "Goals a role may pick up: continueable, next role is ROLE, unclaimed.")
def ready(role: Annotated[str | None, typer.Option("--role", help=f"Only this next role ({_ROLES}).")] = None) -> None:
    with _ledger(reading=True) as ledger:
        rows = ledger.ready(role)
    emit({"goals": [_status_json(d) for d in rows]}, wants_json(), lambda: _status_rows(rows))


@_command("recall", "Memory first: recall for a query; scores >= 0.45 are relevant, else keyword fallback.")
def recall(
    query: Annotated[str, typer.Argument(help="What the record is about.")],
    limit: Annotated[int, typer.Option("--limit", min=1, max=100, help="How many memories.")] = 5,
) -> None:
    with _ledger() as ledger:
        r = ledger.recall(query, limit=limit)
    lines = [f"{h['score']:.3f}  {h['id']}  {h['content'].splitlines()[0][:90]}" for h in r.hits]
    emit({"query": r.query, "method": r.method, "relevant": r.relevant, "results": r.hits}, wants_json(),
         lambda: _print("\n".join(lines) or "(nothing relevant)"))  # fmt: skip
