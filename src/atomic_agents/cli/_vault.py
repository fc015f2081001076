"""`atomic-agents vault ...`: parse, one library call, render.

The vault library (pydantic models, YAML) is imported inside each command, so
``--help`` never loads it.
"""

from __future__ import annotations

import datetime as dt
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from .._text import parse_json, read_text
from ..exceptions import ValidationError
from ._common import (
    Confidence,
    NoteKind,
    NoteType,
    RunStatus,
    RunTrigger,
    agents_root,
    db_path,
    embedder_name,
    emit,
    group_options,
    shared,
    value,
    wants_json,
    write_lines,
)

if TYPE_CHECKING:
    from ..vault import Agent

app = typer.Typer(help="Atomic Agent vaults: notes, wiki, INDEX, journal, logs, lint.", no_args_is_help=True,
                  callback=group_options("agents_root"))
index_app = typer.Typer(help="Show or rebuild an agent's INDEX.md.", no_args_is_help=True)
journal_app = typer.Typer(help="The agent's daily journal: add items, show, promote an item to a note.", no_args_is_help=True)
log_app = typer.Typer(help="JSONL run logs: append a run, query runs with totals.", no_args_is_help=True)
app.add_typer(index_app, name="index")
app.add_typer(journal_app, name="journal")
app.add_typer(log_app, name="log")

AgentArg = Annotated[str, typer.Argument(metavar="AGENT", help="Agent name (lowercase snake_case).", show_default=False)]
OptAgentArg = Annotated[Optional[str], typer.Argument(metavar="AGENT", help="Agent name; omit for every agent.", show_default=False)]
FileArg = Annotated[str, typer.Argument(metavar="FILE", help="Note (or wiki page) filename.", show_default=False)]
WikiFlag = Annotated[bool, typer.Option("--wiki", help="Act on wiki pages instead of memory notes.")]
DateOpt = Annotated[Optional[str], typer.Option(metavar="DATE", help="YYYY-MM-DD (default today).", show_default=False)]
ConfidenceOpt = Annotated[Confidence, typer.Option("--confidence", help="How sure the source is.")]
PeriodOpt = Annotated[Optional[str], typer.Option(metavar="PERIOD", help="YYYY or YYYY-qN for time-bounded notes.", show_default=False)]

_VAULT = ("agents_root", "json")
_WRITE = ("agents_root", "db", "json")  # a write keeps the memory mirror current when a store is configured
_STORE = ("agents_root", "db", "json", "embedder")


def _date(raw: str | None, field: str) -> dt.date | None:
    if raw is None:
        return None
    try:
        return dt.date.fromisoformat(raw) if len(raw) == 10 and raw.isascii() else _bad_date(raw, field)
    except ValueError:
        return _bad_date(raw, field)


def _bad_date(raw: str, field: str) -> dt.date:
    shown = raw if len(raw) <= 40 else raw[:40] + "..."
    raise ValidationError(f"{shown!r} is not a date in YYYY-MM-DD form", field=field, rule="date") from None


def _agent(name: str, *, mirror: bool = False) -> Agent:
    from ..vault import Vault

    agent = Vault(agents_root()).agent(name)
    agent.require()
    if mirror and _store_configured():
        from ..bridge import LazyMirrorHook

        agent.write_hooks.append(LazyMirrorHook(_open_store))
    return agent


def _store_configured() -> bool:
    """A store is configured: --db or $ATOMIC_AGENTS_DB names one, or the vault's default store exists."""
    import os

    return db_path() is not None or bool(os.environ.get("ATOMIC_AGENTS_DB")) or (
        agents_root() / "_memory" / "memory.db").is_file()


def _open_store() -> Any:
    from ..memory import embedder_from_name, open_store

    return open_store(db_path(), agents_root=agents_root(), embedder=embedder_from_name(embedder_name()), ann_build="off")


def _out(text: str) -> None:
    sys.stdout.write(text)


def _body(body: str | None, body_file: Path | None) -> str:
    if body_file is not None:
        if str(body_file) == "-":
            return sys.stdin.read()
        try:
            return read_text(body_file, universal_newlines=True)
        except OSError as exc:
            raise ValidationError(f"cannot read {body_file}: {exc.strerror}", field="--body-file", rule="readable") from None
    text = body or ""
    return text if not text or text.endswith("\n") else text + "\n"


@app.command()
@shared(*_VAULT)
def init(agent: AgentArg, title: Annotated[Optional[str], typer.Option(metavar="TEXT", help="Display name used in the skeletons.", show_default=False)] = None) -> None:
    """Scaffold an agent: persona skeletons, tools.md, model.md, memory/INDEX.md and the folders."""
    from ..vault import Vault

    ag, created = Vault(agents_root()).init_agent(agent, title=title)
    emit({"agent": agent, "path": str(ag.path), "created": created}, wants_json(),
         lambda: write_lines([f"Agent {agent} at {ag.path}: created {len(created)} files", *(f"  {c}" for c in created)]))


@app.command()
@shared(*_WRITE)
def new(
    agent: AgentArg,
    kind: Annotated[NoteKind, typer.Option("--type", help="Note type, or wiki for a wiki page.", show_default=False)],
    topic: Annotated[str, typer.Option(metavar="TOPIC", help="Topic in snake_case, 2-5 words.", show_default=False)],
    name: Annotated[str, typer.Option(metavar="TEXT", help="Human-readable title (~80 chars).", show_default=False)],
    description: Annotated[str, typer.Option(metavar="TEXT", help="One-line hook: when this memory matters (~150 chars).",
                                             show_default=False)],
    source: Annotated[list[str], typer.Option("--source", metavar="SOURCE", help="Where it came from (repeatable).",
                                              show_default=False)],
    confidence: ConfidenceOpt = Confidence.medium,
    period: PeriodOpt = None,
    year: Annotated[Optional[int], typer.Option(metavar="YYYY", help="Version year of a wiki page.", show_default=False)] = None,
    body: Annotated[Optional[str], typer.Option(metavar="TEXT", help="Markdown body.", show_default=False)] = None,
    body_file: Annotated[Optional[Path], typer.Option(metavar="FILE", help="Read the body from a file ('-' for stdin).",
                                                      show_default=False)] = None,
    pinned: Annotated[bool, typer.Option(help="Always load into the system prompt.")] = False,
    expires_at: Annotated[Optional[str], typer.Option(metavar="DATE", help="YYYY-MM-DD after which it is an archive candidate.",
                                                      show_default=False)] = None,
    supersedes: Annotated[Optional[str], typer.Option(metavar="FILE", help="Filename of the note this one replaces.",
                                                      show_default=False)] = None,
    tag: Annotated[Optional[list[str]], typer.Option("--tag", metavar="TAG", help="Free-form tag (repeatable).",
                                                     show_default=False)] = None,
    related: Annotated[Optional[list[str]], typer.Option("--related", metavar="FILE", help="Wiki: related page or note (repeatable).",
                                                         show_default=False)] = None,
) -> None:
    """Create a note (or a wiki page with --type wiki), validated, with its INDEX entry."""
    from ..vault import NoteDraft, WikiDraft

    ag = _agent(agent, mirror=True)
    text = _body(body, body_file)
    if kind in (NoteKind.wiki, NoteKind.wiki_page):
        note = ag.new_wiki_page(WikiDraft(topic=topic, name=name, description=description, sources=source,
                                          confidence=confidence.value, body=text, year=year, related=related or [],
                                          pinned=pinned, expires_at=expires_at, tags=tag or []))
    else:
        note = ag.new_note(NoteDraft(type=kind.value, topic=topic, name=name, description=description, sources=source,
                                     confidence=confidence.value, body=text, period=period, pinned=pinned,
                                     expires_at=expires_at, supersedes=supersedes, tags=tag or []))
    emit(note.to_dict(), wants_json(), lambda: write_lines([f"Wrote {note.path}"]))


def _parse_set(pairs: list[str]) -> dict[str, Any]:
    from ..exceptions import FrontmatterParseError
    from .._format._frontmatter import load_yaml

    changes: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key.strip():
            raise ValidationError(f"{pair!r} is not KEY=VALUE", field="--set", rule="key=value")
        # The frontmatter's own YAML chokepoint: no aliases, plain tags only, a typed error naming --set.
        try:
            value = load_yaml(raw) if raw.strip() else None
        except FrontmatterParseError as exc:
            message = exc.message.replace("frontmatter value", "value").replace("frontmatter", "value")
            raise ValidationError(f"{key.strip()}: {message}", field="--set", rule="yaml") from None
        changes[key.strip()] = value
    return changes


@app.command()
@shared(*_WRITE)
def update(
    agent: AgentArg,
    file: FileArg,
    set_: Annotated[Optional[list[str]], typer.Option("--set", metavar="KEY=VALUE", help="Set a key (YAML value; empty removes; repeatable).",
                                                      show_default=False)] = None,
    body: Annotated[Optional[str], typer.Option(metavar="TEXT", help="Replace the body.", show_default=False)] = None,
    body_file: Annotated[Optional[Path], typer.Option(metavar="FILE", help="Replace the body from a file ('-' for stdin).",
                                                      show_default=False)] = None,
    touch: Annotated[bool, typer.Option(help="Set last_seen to today (re-confirmed).")] = False,
    wiki: WikiFlag = False,
) -> None:
    """Change frontmatter keys and/or the body; untouched lines stay byte-for-byte."""
    ag = _agent(agent, mirror=True)
    changes = _parse_set(set_ or [])
    if touch:
        changes["last_seen"] = dt.date.today()
    new_body = _body(body, body_file) if (body is not None or body_file is not None) else None
    note = ag.update(file, changes, body=new_body, unit_type="wiki" if wiki else "memory")
    emit(note.to_dict(), wants_json(), lambda: write_lines([f"Updated {note.path}"]))


@app.command()
@shared(*_VAULT)
def show(agent: AgentArg, file: FileArg, wiki: WikiFlag = False) -> None:
    """Print one note or wiki page."""
    note = _agent(agent).load(file if file.endswith(".md") else file + ".md", "wiki" if wiki else "memory")
    emit(note.to_dict(), wants_json(), lambda: _out(read_text(note.path, universal_newlines=True)))


@app.command("list")
@shared(*_VAULT)
def list_(
    agent: Annotated[Optional[str], typer.Argument(metavar="AGENT", help="Agent name; omit to list agents.", show_default=False)] = None,
    all_: Annotated[bool, typer.Option("--all", help="Include superseded notes.")] = False,
    type_: Annotated[Optional[NoteType], typer.Option("--type", help="Only this note type.", show_default=False)] = None,
    pinned: Annotated[bool, typer.Option("--pinned", help="Only pinned notes.")] = False,
    wiki: WikiFlag = False,
) -> None:
    """List agents, or an agent's notes (superseded ones skipped unless --all)."""
    from ..vault import Vault

    if agent is None:
        names = Vault(agents_root()).agents()
        emit({"agents": names}, wants_json(), lambda: write_lines(names or ["(no agents yet: atomic-agents vault init NAME)"]))
        return
    notes, unreadable = _agent(agent).list_units(include_superseded=all_, type=value(type_), pinned=True if pinned else None,
                                                 unit_type="wiki" if wiki else "memory")
    rows = [{"file": n.filename, "type": n.type, "name": n.name, "description": n.description,
             "pinned": n.pinned, "superseded_by": n.superseded_by} for n in notes]

    def human() -> None:
        write_lines([f"{'*' if r['pinned'] else ' '} {r['file']:<48} {r['name']}"
                     + (f"  (superseded by {r['superseded_by']})" if r["superseded_by"] else "") for r in rows]
                    + [f"! {e}" for e in unreadable])

    emit({"agent": agent, "notes": rows, "unreadable": [str(e) for e in unreadable]}, wants_json(), human)


def _issue_lines(issues: list[Any]) -> list[str]:
    return [f"{i.severity:<7} {i}" for i in issues]


@app.command()
@shared(*_VAULT)
def validate(agent: OptAgentArg = None) -> None:
    """Run the spec's checks over every note and wiki page; exit 1 on any error."""
    from ..vault import Vault

    issues = Vault(agents_root()).validate(agent)
    emit({"ok": not issues, "errors": [i.__dict__ for i in issues]}, wants_json(),
         lambda: write_lines([*_issue_lines(issues), "valid" if not issues else f"{len(issues)} errors"]))
    if issues:
        raise typer.Exit(1)


@app.command()
@shared(*_WRITE)  # --db: the mirror to check; nothing is embedded, so no --embedder
def lint(
    agent: OptAgentArg = None,
    stale_days: Annotated[int, typer.Option(metavar="DAYS", help="Warn when last_seen is older than this.")] = 90,
) -> None:
    """Report invalid, stale, expired, unindexed and broken-link notes, and a memory mirror that lags; exit 1 on errors."""
    from ..vault import Vault

    # With a store configured, each mirror entry that lags the files (hand edits) is reported too.
    store = _open_store() if _store_configured() else None
    try:
        reports = Vault(agents_root()).lint(agent, stale_days=stale_days, store=store)
    finally:
        if store is not None:
            store.close()

    def human() -> None:
        lines: list[str] = []
        for r in reports:
            c = r.to_dict()["counts"]
            lines.append(f"{r.agent}: {r.notes} notes, {r.wiki_pages} wiki pages, {len(r.pinned)} pinned; "
                         f"{c['error']} errors, {c['warning']} warnings, {c['hint']} hints")
            lines.extend(_issue_lines(r.issues))
        write_lines(lines)

    emit({"reports": [r.to_dict() for r in reports]}, wants_json(), human)
    if any(r.errors for r in reports):
        raise typer.Exit(1)


@app.command()
@shared(*_WRITE)
def supersede(
    agent: AgentArg,
    old: Annotated[str, typer.Argument(metavar="OLD", help="Filename of the outdated note.", show_default=False)],
    new: Annotated[str, typer.Argument(metavar="NEW", help="Filename of the note that replaces it.", show_default=False)],
) -> None:
    """Link NEW as the replacement of OLD (both kept; OLD moves to the INDEX archive)."""
    o, n = _agent(agent, mirror=True).supersede(old, new)
    emit({"old": o.to_dict(), "new": n.to_dict()}, wants_json(),
         lambda: write_lines([f"{o.filename} is superseded by {n.filename}"]))


@app.command()
@shared(*_STORE)
def sync(
    agent: OptAgentArg = None,
    rebuild: Annotated[bool, typer.Option("--rebuild", help="Drop the agent's mirror and build it again from the files.")] = False,
) -> None:
    """Mirror every note and wiki page into the memory store (only changed files are parsed and embedded)."""
    from ..bridge import sync as sync_agent
    from ..vault import Vault

    vault = Vault(agents_root())
    names = [agent] if agent is not None else vault.agents()
    agents = [_agent(n) for n in names]
    store = _open_store()
    try:
        reports = [sync_agent(a, store, rebuild=rebuild) for a in agents]
    finally:
        store.close()

    def human() -> None:
        lines = []
        for r in reports:
            lines.append(f"{r.agent}: {len(r.added)} added, {len(r.updated)} updated, {len(r.marked)} marked, "
                         f"{len(r.removed)} removed, {r.unchanged} unchanged, {len(r.skipped)} skipped")
            lines += [f"  skipped {s['path']}: {s['rule']}" for s in r.skipped]
        write_lines(lines or ["(no agents)"])

    emit({"reports": [r.to_dict() for r in reports]}, wants_json(), human)


@app.command()
@shared(*_STORE)
def search(
    agent: AgentArg,
    query: Annotated[str, typer.Argument(metavar="QUERY", help="What to look for.", show_default=False)],
    type_: Annotated[Optional[str], typer.Option("--type", metavar="TYPE", help="Only this type (a note type, or wiki_page).",
                                                 show_default=False)] = None,
    include_superseded: Annotated[bool, typer.Option("--include-superseded", help="Include superseded and expired notes.")] = False,
    limit: Annotated[int, typer.Option("--limit", metavar="N", help="How many results (1-1000).")] = 10,
    sync_first: Annotated[bool, typer.Option("--sync", help="Sync the mirror first (after hand edits).")] = False,
) -> None:
    """Hybrid search over the agent's notes in the memory store: path, name, hook and score."""
    from ..bridge import search as search_notes
    from ..bridge import sync as sync_agent

    if not 1 <= limit <= 1000:
        raise ValidationError("must be between 1 and 1000", field="--limit", rule="range")
    if type_ is not None and type_ not in {t.value for t in NoteType} | {"wiki_page"}:
        raise ValidationError(f"{type_!r} is not a note type or wiki_page", field="--type", rule="taxonomy")
    from ._daemon import command_store  # inside `atomic-agents daemon`: its warm store, when it is this one

    ag = _agent(agent)
    with command_store(_open_store) as store:
        if sync_first:
            sync_agent(ag, store)
        hits = search_notes(ag, store, query, type=type_, include_superseded=include_superseded, limit=limit)
    emit({"agent": agent, "query": query, "hits": [h.to_dict() for h in hits]}, wants_json(),
         lambda: write_lines([f"{h.score:.3f}  {h.path:<48} {h.name} — {h.hook}"
                              + ("" if h.status == "live" else f"  ({h.status})") for h in hits] or ["(no matching notes)"]))


@index_app.command("show")
@shared(*_VAULT)
def index_show(agent: AgentArg, wiki: WikiFlag = False) -> None:
    """Print INDEX.md (and the sub-indexes it points to)."""
    idx = _agent(agent).index("wiki" if wiki else "memory")
    files = idx.render()
    emit({"files": files, "entries": [{"section": s, "title": e.title, "hook": e.hook, "file": e.filename}
                                      for s, e in idx.entries()]}, wants_json(),
         lambda: _out("".join(files[k] for k in sorted(files, key=lambda k: k != "INDEX.md"))))


@index_app.command("rebuild")
@shared(*_VAULT)
def index_rebuild(agent: AgentArg, wiki: WikiFlag = False) -> None:
    """Regenerate the INDEX from the files, keeping hand-edited hooks of existing entries."""
    result = _agent(agent).rebuild_index("wiki" if wiki else "memory")

    def summary() -> None:
        written = ", ".join(result["files_written"]) or "nothing (up to date)"
        lines = [f"{result['entries']} entries for {result['units']} files; wrote {written}"]
        for key, what in (("added", "added"), ("moved", "moved"), ("dropped", "dropped"), ("kept_unmatched", "kept (may be an unreadable file's)")):
            lines += [f"  {what}: {item}" for item in result.get(key, [])]
        write_lines(lines)
        for err in result["unreadable"]:
            print(f"  unreadable, its INDEX line kept: {err}", file=sys.stderr)

    emit(result, wants_json(), summary)


@journal_app.command("add")
@shared(*_VAULT)
def journal_add(
    agent: AgentArg,
    happened: Annotated[Optional[list[str]], typer.Option("--happened", metavar="TEXT", help="What happened (repeatable).",
                                                          show_default=False)] = None,
    decision: Annotated[Optional[list[str]], typer.Option("--decision", metavar="TEXT", help="Decision made (repeatable).",
                                                          show_default=False)] = None,
    question: Annotated[Optional[list[str]], typer.Option("--question", metavar="TEXT", help="Open question (repeatable).",
                                                          show_default=False)] = None,
    date: DateOpt = None,
) -> None:
    """Append items to the day's journal."""
    from ..vault import append_journal

    if not (happened or decision or question):
        raise ValidationError("give at least one --happened, --decision or --question", field="item", rule="required")
    day = _date(date, "--date")
    path = append_journal(_agent(agent), day=day, happened=happened, decisions=decision, questions=question)
    emit({"path": str(path)}, wants_json(), lambda: write_lines([f"Journal: {path}"]))


@journal_app.command("show")
@shared(*_VAULT)
def journal_show(agent: AgentArg, date: DateOpt = None) -> None:
    """Print a day's journal with its numbered items."""
    from ..vault import journal_items, journal_path

    day = _date(date, "--date") or dt.date.today()
    ag = _agent(agent)
    items = journal_items(ag, day)
    path = journal_path(ag, day)

    def human() -> None:
        _out(read_text(path, universal_newlines=True))
        write_lines(["", "Items: " + "; ".join(f"{i.number}. {i.text}" for i in items)])

    emit({"path": str(path), "items": [i.__dict__ for i in items]}, wants_json(), human)


@journal_app.command("promote")
@shared(*_WRITE)
def journal_promote(
    agent: AgentArg,
    item: Annotated[str, typer.Option(metavar="ITEM", help="Item number (see journal show) or a unique piece of its text.",
                                      show_default=False)],
    type_: Annotated[NoteType, typer.Option("--type", help="Note type.", show_default=False)],
    topic: Annotated[str, typer.Option(metavar="TOPIC", help="Note topic in snake_case.", show_default=False)],
    date: Annotated[Optional[str], typer.Option(metavar="DATE", help="Journal day YYYY-MM-DD (default today).",
                                                show_default=False)] = None,
    name: Annotated[Optional[str], typer.Option(metavar="TEXT", help="Title (default: the item text).", show_default=False)] = None,
    description: Annotated[Optional[str], typer.Option(metavar="TEXT", help="Hook (default: the item text).", show_default=False)] = None,
    confidence: ConfidenceOpt = Confidence.medium,
    period: PeriodOpt = None,
) -> None:
    """Turn a journal item into a note whose sources point at the journal file."""
    from ..vault import promote_journal_item

    day = _date(date, "--date") or dt.date.today()
    note = promote_journal_item(_agent(agent, mirror=True), day, item, type=type_.value, topic=topic, name=name,
                                description=description, confidence=confidence.value, period=period)
    emit(note.to_dict(), wants_json(), lambda: write_lines([f"Promoted to {note.path}"]))


@log_app.command("add")
@shared(*_VAULT)
def log_add(
    agent: AgentArg,
    entry: Annotated[Optional[str], typer.Option("--entry", metavar="JSON", help="The whole run as one JSON object.",
                                                 show_default=False)] = None,
    trigger: Annotated[Optional[RunTrigger], typer.Option(help="What started the run.", show_default=False)] = None,
    model: Annotated[Optional[str], typer.Option(metavar="MODEL", help="Model id used.", show_default=False)] = None,
    input_tokens: Annotated[Optional[int], typer.Option(metavar="N", help="Input tokens.", show_default=False)] = None,
    output_tokens: Annotated[Optional[int], typer.Option(metavar="N", help="Output tokens.", show_default=False)] = None,
    status: Annotated[Optional[RunStatus], typer.Option(help="How the run ended.", show_default=False)] = None,
    summary: Annotated[Optional[str], typer.Option(metavar="TEXT", help="One-line summary.", show_default=False)] = None,
    cost_usd: Annotated[Optional[float], typer.Option(metavar="USD", help="Cost in USD.", show_default=False)] = None,
    error: Annotated[Optional[str], typer.Option(metavar="TEXT", help="Error message, for status error.", show_default=False)] = None,
    ts: Annotated[Optional[str], typer.Option(metavar="TIMESTAMP", help="ISO 8601 with timezone (default now, UTC).",
                                              show_default=False)] = None,
) -> None:
    """Append one run to the day's JSONL log (validated)."""
    from ..vault import append_log

    if entry is not None:
        data = parse_json(entry, field="--entry")
    else:
        data = {"ts": ts or dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "trigger": value(trigger),
                "model": model, "input_tokens": input_tokens, "output_tokens": output_tokens, "status": value(status),
                "summary": summary}
        data = {k: v for k, v in data.items() if v is not None}
        data.update({k: v for k, v in (("cost_usd", cost_usd), ("error", error)) if v is not None})
    path = append_log(_agent(agent), data)
    emit({"path": str(path), "entry": data}, wants_json(), lambda: write_lines([f"Logged to {path}"]))


@log_app.command("query")
@shared(*_VAULT)
def log_query(
    agent: AgentArg,
    since: Annotated[Optional[str], typer.Option(metavar="DATE", help="From YYYY-MM-DD (inclusive).", show_default=False)] = None,
    until: Annotated[Optional[str], typer.Option(metavar="DATE", help="To YYYY-MM-DD (inclusive).", show_default=False)] = None,
    status: Annotated[Optional[RunStatus], typer.Option(help="Only runs that ended so.", show_default=False)] = None,
    trigger: Annotated[Optional[RunTrigger], typer.Option(help="Only runs started so.", show_default=False)] = None,
    model: Annotated[Optional[str], typer.Option(metavar="MODEL", help="Only this model id.", show_default=False)] = None,
) -> None:
    """Runs in a date range, filtered, with totals of tokens and cost."""
    from ..vault import query_logs

    first, last = _date(since, "--since"), _date(until, "--until")
    result = query_logs(_agent(agent), since=first, until=last, status=value(status), trigger=value(trigger), model=model)
    data = result.to_dict()

    def human() -> None:
        t = data["totals"]
        by_status = ", ".join(f"{k} {v}" for k, v in sorted(t["by_status"].items())) or "none"
        write_lines([f"{e['ts']}  {e['status']:<7} {e['trigger']:<6} {e['model']:<24} "
                     f"in={e['input_tokens']:<7} out={e['output_tokens']:<7} {e['summary']}" for e in result.entries]
                    + [f"{t['runs']} runs: {t['input_tokens']} input tokens, {t['output_tokens']} output tokens, "
                       f"${t['cost_usd']:.4f}; by status: {by_status}"]
                    + [f"! {bad}" for bad in result.invalid])

    emit(data, wants_json(), human)
