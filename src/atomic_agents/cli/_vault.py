"""`atomic-agents vault ...`: parse, one library call, render."""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
import yaml

from ..exceptions import ValidationError
from ..vault._units import UnitType
from ..vault import (
    Agent,
    NoteDraft,
    Vault,
    WikiDraft,
    append_journal,
    append_log,
    journal_path,
    promote_journal_item,
    query_logs,
)
from ._common import AgentsRoot, JsonFlag, console, emit

app = typer.Typer(help="Atomic Agent vaults: notes, wiki, INDEX, journal, logs, lint.", no_args_is_help=True)
index_app = typer.Typer(help="Show or rebuild an agent's INDEX.md.", no_args_is_help=True)
journal_app = typer.Typer(help="The agent's daily journal: add items, show, promote an item to a note.", no_args_is_help=True)
log_app = typer.Typer(help="JSONL run logs: append a run, query runs with totals.", no_args_is_help=True)
app.add_typer(index_app, name="index")
app.add_typer(journal_app, name="journal")
app.add_typer(log_app, name="log")

AgentArg = Annotated[str, typer.Argument(help="Agent name (lowercase snake_case).")]
WikiFlag = Annotated[bool, typer.Option("--wiki", help="Act on wiki pages instead of memory notes.")]


def _date(value: str | None, field: str) -> dt.date | None:
    if value is None:
        return None
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        raise ValidationError(f"{value!r} is not a date in YYYY-MM-DD form", field=field, rule="date") from None


def _agent(root: Path, name: str) -> Agent:
    agent = Vault(root).agent(name)
    agent.require()
    return agent


def _write(text: str) -> None:
    sys.stdout.write(text)


def _body(body: str | None, body_file: Path | None) -> str:
    if body_file is not None:
        if str(body_file) == "-":
            return sys.stdin.read()
        try:
            return body_file.read_text(encoding="utf-8")
        except OSError as exc:
            raise ValidationError(f"cannot read {body_file}: {exc.strerror}", field="--body-file", rule="readable") from None
    text = body or ""
    return text if not text or text.endswith("\n") else text + "\n"


@app.command()
def init(
    agent: AgentArg,
    title: Annotated[Optional[str], typer.Option(help="Display name used in the skeletons.")] = None,
    agents_root: AgentsRoot = Path("agents"),
    json_out: JsonFlag = False,
) -> None:
    """Scaffold an agent: persona skeletons, tools.md, model.md, memory/INDEX.md and the folders."""
    ag, created = Vault(agents_root).init_agent(agent, title=title)
    emit({"agent": agent, "path": str(ag.path), "created": created}, json_out,
         lambda: console.print(f"Agent {agent} at {ag.path}: created {len(created)} files" +
                               "".join(f"\n  {c}" for c in created)))


@app.command()
def new(
    agent: AgentArg,
    type: Annotated[str, typer.Option("--type", help="user|feedback|project|decision|reference, or wiki for a wiki page.")],
    topic: Annotated[str, typer.Option(help="Topic in snake_case, 2-5 words.")],
    name: Annotated[str, typer.Option(help="Human-readable title (~80 chars).")],
    description: Annotated[str, typer.Option(help="One-line hook: when this memory matters (~150 chars).")],
    source: Annotated[list[str], typer.Option("--source", help="Where it came from (repeatable).")],
    confidence: Annotated[str, typer.Option(help="high|medium|low.")] = "medium",
    period: Annotated[Optional[str], typer.Option(help="YYYY or YYYY-qN for time-bounded notes.")] = None,
    year: Annotated[Optional[int], typer.Option(help="Version year of a wiki page.")] = None,
    body: Annotated[Optional[str], typer.Option(help="Markdown body.")] = None,
    body_file: Annotated[Optional[Path], typer.Option(help="Read the body from a file ('-' for stdin).")] = None,
    pinned: Annotated[bool, typer.Option(help="Always load into the system prompt.")] = False,
    expires_at: Annotated[Optional[str], typer.Option(help="YYYY-MM-DD after which it is an archive candidate.")] = None,
    supersedes: Annotated[Optional[str], typer.Option(help="Filename of the note this one replaces.")] = None,
    tag: Annotated[Optional[list[str]], typer.Option("--tag", help="Free-form tag (repeatable).")] = None,
    related: Annotated[Optional[list[str]], typer.Option("--related", help="Wiki: related page or note (repeatable).")] = None,
    agents_root: AgentsRoot = Path("agents"),
    json_out: JsonFlag = False,
) -> None:
    """Create a note (or a wiki page with --type wiki), validated, with its INDEX entry."""
    ag = _agent(agents_root, agent)
    text = _body(body, body_file)
    if type in ("wiki", "wiki_page"):
        note = ag.new_wiki_page(WikiDraft(topic=topic, name=name, description=description, sources=source,
                                          confidence=confidence, body=text, year=year, related=related or [],
                                          pinned=pinned, expires_at=expires_at, tags=tag or []))
    else:
        note = ag.new_note(NoteDraft(type=type, topic=topic, name=name, description=description, sources=source,
                                     confidence=confidence, body=text, period=period, pinned=pinned,
                                     expires_at=expires_at, supersedes=supersedes, tags=tag or []))
    emit(note.to_dict(), json_out, lambda: console.print(f"Wrote {note.path}"))


def _parse_set(pairs: list[str]) -> dict[str, Any]:
    changes: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key.strip():
            raise ValidationError(f"{pair!r} is not KEY=VALUE", field="--set", rule="key=value")
        value = yaml.safe_load(raw) if raw.strip() else None
        changes[key.strip()] = value
    return changes


@app.command()
def update(
    agent: AgentArg,
    file: Annotated[str, typer.Argument(help="Note (or wiki page) filename.")],
    set_: Annotated[Optional[list[str]], typer.Option("--set", help="KEY=VALUE (YAML value; empty removes).")] = None,
    body: Annotated[Optional[str], typer.Option(help="Replace the body.")] = None,
    body_file: Annotated[Optional[Path], typer.Option(help="Replace the body from a file ('-' for stdin).")] = None,
    touch: Annotated[bool, typer.Option(help="Set last_seen to today (re-confirmed).")] = False,
    wiki: WikiFlag = False,
    agents_root: AgentsRoot = Path("agents"),
    json_out: JsonFlag = False,
) -> None:
    """Change frontmatter keys and/or the body; untouched lines stay byte-for-byte."""
    ag = _agent(agents_root, agent)
    changes = _parse_set(set_ or [])
    if touch:
        changes["last_seen"] = dt.date.today()
    new_body = _body(body, body_file) if (body is not None or body_file is not None) else None
    note = ag.update(file, changes, body=new_body, unit_type="wiki" if wiki else "memory")
    emit(note.to_dict(), json_out, lambda: console.print(f"Updated {note.path}"))


@app.command()
def show(
    agent: AgentArg,
    file: Annotated[str, typer.Argument(help="Note (or wiki page) filename.")],
    wiki: WikiFlag = False,
    agents_root: AgentsRoot = Path("agents"),
    json_out: JsonFlag = False,
) -> None:
    """Print one note or wiki page."""
    note = _agent(agents_root, agent).load(file if file.endswith(".md") else file + ".md", "wiki" if wiki else "memory")
    emit(note.to_dict(), json_out, lambda: _write(note.path.read_text(encoding="utf-8")))


@app.command("list")
def list_(
    agent: Annotated[Optional[str], typer.Argument(help="Agent name; omit to list agents.")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Include superseded notes.")] = False,
    type: Annotated[Optional[str], typer.Option("--type", help="Only this note type.")] = None,
    pinned: Annotated[bool, typer.Option("--pinned", help="Only pinned notes.")] = False,
    wiki: WikiFlag = False,
    agents_root: AgentsRoot = Path("agents"),
    json_out: JsonFlag = False,
) -> None:
    """List agents, or an agent's notes (superseded ones skipped unless --all)."""
    vault = Vault(agents_root)
    if agent is None:
        names = vault.agents()
        emit({"agents": names}, json_out, lambda: console.print("\n".join(names) or "(no agents)"))
        return
    ag = _agent(agents_root, agent)
    unit_type: UnitType = "wiki" if wiki else "memory"
    notes = ag.list_notes(include_superseded=all_, type=type, pinned=True if pinned else None, unit_type=unit_type)
    _, unreadable = ag.scan(unit_type)
    rows = [{"file": n.filename, "type": n.type, "name": n.name, "description": n.description,
             "pinned": n.pinned, "superseded_by": n.superseded_by} for n in notes]

    def human() -> None:
        for r in rows:
            flag = "*" if r["pinned"] else " "
            console.print(f"{flag} {r['file']:<48} {r['name']}" + (f"  (superseded by {r['superseded_by']})" if r["superseded_by"] else ""))
        for e in unreadable:
            console.print(f"! {e}", style="red")

    emit({"agent": agent, "notes": rows, "unreadable": [str(e) for e in unreadable]}, json_out, human)


def _issues_human(issues: list[Any]) -> None:
    for i in issues:
        style = {"error": "red", "warning": "yellow"}.get(i.severity, "cyan")
        console.print(f"[{style}]{i.severity:<7}[/{style}] {i}")


@app.command()
def validate(
    agent: Annotated[Optional[str], typer.Argument(help="Agent name; omit for every agent.")] = None,
    agents_root: AgentsRoot = Path("agents"),
    json_out: JsonFlag = False,
) -> None:
    """Run the spec's checks over every note and wiki page; exit 1 on any error."""
    issues = Vault(agents_root).validate(agent)
    def human() -> None:
        _issues_human(issues)
        console.print("valid" if not issues else f"{len(issues)} errors")

    emit({"ok": not issues, "errors": [i.__dict__ for i in issues]}, json_out, human)
    if issues:
        raise typer.Exit(1)


@app.command()
def lint(
    agent: Annotated[Optional[str], typer.Argument(help="Agent name; omit for every agent.")] = None,
    stale_days: Annotated[int, typer.Option(help="Warn when last_seen is older than this.")] = 90,
    agents_root: AgentsRoot = Path("agents"),
    json_out: JsonFlag = False,
) -> None:
    """Report invalid, stale, expired, unindexed and broken-link notes; exit 1 on errors."""
    reports = Vault(agents_root).lint(agent, stale_days=stale_days)

    def human() -> None:
        for r in reports:
            d = r.to_dict()
            console.print(f"[bold]{r.agent}[/bold]: {r.notes} notes, {r.wiki_pages} wiki pages, "
                          f"{len(r.pinned)} pinned; {d['counts']['error']} errors, {d['counts']['warning']} warnings, "
                          f"{d['counts']['hint']} hints")
            _issues_human(r.issues)

    emit({"reports": [r.to_dict() for r in reports]}, json_out, human)
    if any(r.errors for r in reports):
        raise typer.Exit(1)


@app.command()
def supersede(
    agent: AgentArg,
    old: Annotated[str, typer.Argument(help="Filename of the outdated note.")],
    new: Annotated[str, typer.Argument(help="Filename of the note that replaces it.")],
    agents_root: AgentsRoot = Path("agents"),
    json_out: JsonFlag = False,
) -> None:
    """Link NEW as the replacement of OLD (both kept; OLD moves to the INDEX archive)."""
    o, n = _agent(agents_root, agent).supersede(old, new)
    emit({"old": o.to_dict(), "new": n.to_dict()}, json_out,
         lambda: console.print(f"{o.filename} is superseded by {n.filename}"))


@index_app.command("show")
def index_show(agent: AgentArg, wiki: WikiFlag = False, agents_root: AgentsRoot = Path("agents"),
               json_out: JsonFlag = False) -> None:
    """Print INDEX.md (and the sub-indexes it points to)."""
    ag = _agent(agents_root, agent)
    idx = ag.index("wiki" if wiki else "memory")
    files = idx.render()
    emit({"files": files, "entries": [{"section": s, "title": e.title, "hook": e.hook, "file": e.filename}
                                      for s, e in idx.entries()]}, json_out,
         lambda: _write("".join(files[k] for k in sorted(files, key=lambda k: k != "INDEX.md"))))


@index_app.command("rebuild")
def index_rebuild(agent: AgentArg, wiki: WikiFlag = False, agents_root: AgentsRoot = Path("agents"),
                  json_out: JsonFlag = False) -> None:
    """Regenerate the INDEX from the files, keeping hand-edited hooks of existing entries."""
    result = _agent(agents_root, agent).rebuild_index("wiki" if wiki else "memory")
    def summary() -> None:
        print(f"{result['entries']} entries for {result['units']} files; wrote {', '.join(result['files_written']) or 'nothing (up to date)'}")
        for key, what in (("added", "added"), ("moved", "moved"), ("dropped", "dropped"), ("kept_unmatched", "kept (may be an unreadable file's)")):
            for item in result.get(key, []):
                print(f"  {what}: {item}")
        for err in result["unreadable"]:
            print(f"  unreadable, its INDEX line kept: {err}", file=sys.stderr)

    emit(result, json_out, summary)


@journal_app.command("add")
def journal_add(
    agent: AgentArg,
    happened: Annotated[Optional[list[str]], typer.Option("--happened", help="What happened (repeatable).")] = None,
    decision: Annotated[Optional[list[str]], typer.Option("--decision", help="Decision made (repeatable).")] = None,
    question: Annotated[Optional[list[str]], typer.Option("--question", help="Open question (repeatable).")] = None,
    date: Annotated[Optional[str], typer.Option(help="YYYY-MM-DD (default today).")] = None,
    agents_root: AgentsRoot = Path("agents"),
    json_out: JsonFlag = False,
) -> None:
    """Append items to the day's journal."""
    if not (happened or decision or question):
        raise ValidationError("give at least one --happened, --decision or --question", field="item", rule="required")
    path = append_journal(_agent(agents_root, agent), day=_date(date, "--date"), happened=happened,
                          decisions=decision, questions=question)
    emit({"path": str(path)}, json_out, lambda: console.print(f"Journal: {path}"))


@journal_app.command("show")
def journal_show(agent: AgentArg, date: Annotated[Optional[str], typer.Option(help="YYYY-MM-DD (default today).")] = None,
                 agents_root: AgentsRoot = Path("agents"), json_out: JsonFlag = False) -> None:
    """Print a day's journal with its numbered items."""
    from ..vault import journal_items

    ag = _agent(agents_root, agent)
    day = _date(date, "--date") or dt.date.today()
    items = journal_items(ag, day)
    path = journal_path(ag, day)
    def human() -> None:
        _write(path.read_text(encoding="utf-8"))
        console.print("\nItems: " + "; ".join(f"{i.number}. {i.text}" for i in items))

    emit({"path": str(path), "items": [i.__dict__ for i in items]}, json_out, human)


@journal_app.command("promote")
def journal_promote(
    agent: AgentArg,
    item: Annotated[str, typer.Option(help="Item number (see journal show) or a unique piece of its text.")],
    type: Annotated[str, typer.Option("--type", help="Note type.")],
    topic: Annotated[str, typer.Option(help="Note topic in snake_case.")],
    date: Annotated[Optional[str], typer.Option(help="Journal day YYYY-MM-DD (default today).")] = None,
    name: Annotated[Optional[str], typer.Option(help="Title (default: the item text).")] = None,
    description: Annotated[Optional[str], typer.Option(help="Hook (default: the item text).")] = None,
    confidence: Annotated[str, typer.Option(help="high|medium|low.")] = "medium",
    period: Annotated[Optional[str], typer.Option(help="YYYY or YYYY-qN.")] = None,
    agents_root: AgentsRoot = Path("agents"),
    json_out: JsonFlag = False,
) -> None:
    """Turn a journal item into a note whose sources point at the journal file."""
    ag = _agent(agents_root, agent)
    note = promote_journal_item(ag, _date(date, "--date") or dt.date.today(), item, type=type, topic=topic,
                                name=name, description=description, confidence=confidence, period=period)
    emit(note.to_dict(), json_out, lambda: console.print(f"Promoted to {note.path}"))


@log_app.command("add")
def log_add(
    agent: AgentArg,
    entry: Annotated[Optional[str], typer.Option("--entry", help="The whole run as one JSON object.")] = None,
    trigger: Annotated[Optional[str], typer.Option(help="cron|skill|api|manual.")] = None,
    model: Annotated[Optional[str], typer.Option(help="Model id used.")] = None,
    input_tokens: Annotated[Optional[int], typer.Option(help="Input tokens.")] = None,
    output_tokens: Annotated[Optional[int], typer.Option(help="Output tokens.")] = None,
    status: Annotated[Optional[str], typer.Option(help="ok|error|skipped.")] = None,
    summary: Annotated[Optional[str], typer.Option(help="One-line summary.")] = None,
    cost_usd: Annotated[Optional[float], typer.Option(help="Cost in USD.")] = None,
    error: Annotated[Optional[str], typer.Option(help="Error message, for status error.")] = None,
    ts: Annotated[Optional[str], typer.Option(help="ISO 8601 with timezone (default now, UTC).")] = None,
    agents_root: AgentsRoot = Path("agents"),
    json_out: JsonFlag = False,
) -> None:
    """Append one run to the day's JSONL log (validated)."""
    if entry is not None:
        try:
            data = json.loads(entry)
        except ValueError as exc:
            raise ValidationError(f"--entry is not JSON: {exc}", field="--entry", rule="json") from None
    else:
        data = {"ts": ts or dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "trigger": trigger,
                "model": model, "input_tokens": input_tokens, "output_tokens": output_tokens, "status": status,
                "summary": summary}
        data = {k: v for k, v in data.items() if v is not None}
        data.update({k: v for k, v in (("cost_usd", cost_usd), ("error", error)) if v is not None})
    path = append_log(_agent(agents_root, agent), data)
    emit({"path": str(path), "entry": data}, json_out, lambda: console.print(f"Logged to {path}"))


@log_app.command("query")
def log_query(
    agent: AgentArg,
    since: Annotated[Optional[str], typer.Option(help="From YYYY-MM-DD (inclusive).")] = None,
    until: Annotated[Optional[str], typer.Option(help="To YYYY-MM-DD (inclusive).")] = None,
    status: Annotated[Optional[str], typer.Option(help="ok|error|skipped.")] = None,
    trigger: Annotated[Optional[str], typer.Option(help="cron|skill|api|manual.")] = None,
    model: Annotated[Optional[str], typer.Option(help="Model id.")] = None,
    agents_root: AgentsRoot = Path("agents"),
    json_out: JsonFlag = False,
) -> None:
    """Runs in a date range, filtered, with totals of tokens and cost."""
    result = query_logs(_agent(agents_root, agent), since=_date(since, "--since"), until=_date(until, "--until"),
                        status=status, trigger=trigger, model=model)
    data = result.to_dict()

    def human() -> None:
        for e in result.entries:
            console.print(f"{e['ts']}  {e['status']:<7} {e['trigger']:<6} {e['model']:<24} "
                          f"in={e['input_tokens']:<7} out={e['output_tokens']:<7} {e['summary']}")
        t = data["totals"]
        console.print(f"{t['runs']} runs: {t['input_tokens']} input tokens, {t['output_tokens']} output tokens, "
                      f"${t['cost_usd']:.4f}; by status {t['by_status']}")
        for bad in result.invalid:
            console.print(f"! {bad}", style="red")

    emit(data, json_out, human)
