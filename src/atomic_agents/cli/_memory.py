"""`atomic-agents memory ...`: the memory store on the command line, eden-memory compatible.

Output is JSON on stdout (eden-memory's shapes, so ATP's scripts parse it unchanged);
progress and messages go to stderr. Legacy flag aliases are accepted:
``--observer-id``/``--observed-id`` for agent/user, ``--fact`` for content,
``--topic`` for query, ``--top-k`` for limit, ``--keywords`` for a keyword query.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from ..exceptions import ValidationError
from ..memory import (
    UNSET,
    MemoryStore,
    Scope,
    ScopeFilter,
    embedder_from_name,
    export_jsonl,
    import_jsonl,
    open_store,
)
from ._common import AgentsRoot, JsonFlag, emit, err_console

app = typer.Typer(help="Durable memories with keyword, semantic and hybrid recall.", no_args_is_help=True)

Db = Annotated[
    Path | None,
    typer.Option("--db", envvar="ATOMIC_AGENTS_DB", help="SQLite file (env ATOMIC_AGENTS_DB; default <agents-root>/_memory/memory.db).", show_default=False),
]
EmbedderOpt = Annotated[
    str,
    typer.Option("--embedder", envvar="ATOMIC_AGENTS_EMBEDDER", help="minilm (the local model, default) or hashing (a test fake)."),
]
AgentId = Annotated[str, typer.Option("--agent-id", "--observer-id", help="Agent scope (required).")]
UserId = Annotated[str, typer.Option("--user-id", "--observed-id", help="User scope (required).")]
OrgId = Annotated[str | None, typer.Option("--org-id", envvar="EDEN_ORG_ID", help="Org scope (env EDEN_ORG_ID; default 'default').", show_default=False)]
WorkspaceId = Annotated[
    str | None,
    typer.Option("--workspace-id", envvar="EDEN_WORKSPACE_ID", help="Workspace scope, may contain '/' (env EDEN_WORKSPACE_ID).", show_default=False),
]
OptAgentId = Annotated[str | None, typer.Option("--agent-id", "--observer-id", help="Only this agent.")]
OptUserId = Annotated[str | None, typer.Option("--user-id", "--observed-id", help="Only this user.")]
OptOrgId = Annotated[str | None, typer.Option("--org-id", help="Only this org.")]
OptWorkspaceId = Annotated[str | None, typer.Option("--workspace-id", help="Only this workspace.")]
QueryArg = Annotated[str | None, typer.Argument(help="The query (or use --query).", show_default=False)]
QueryOpt = Annotated[str | None, typer.Option("--query", "--topic", help="The query.", show_default=False)]
Limit = Annotated[int, typer.Option("--limit", "--top-k", help="How many results (1-1000).")]
Filters = Annotated[
    str | None,
    typer.Option("--filters", help='Metadata equality filters as a JSON object, e.g. \'{"goal_id": "g1"}\'.', show_default=False),
]
FilterPairs = Annotated[list[str] | None, typer.Option("--filter", help="One filter KEY=VALUE (repeatable; VALUE parsed as JSON if it can be).")]


def _open(db: Path | None, agents_root: Path, embedder: str) -> MemoryStore:
    return open_store(db, agents_root=agents_root, embedder=embedder_from_name(embedder))


@contextlib.contextmanager
def _store(db: Path | None, agents_root: Path, embedder: str) -> Iterator[MemoryStore]:
    store = _open(db, agents_root, embedder)
    try:
        yield store
    finally:
        store.close()


def _json_object(text: str | None, field: str) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValidationError(f"not valid JSON: {exc.msg}", field=field, rule="json") from exc
    if not isinstance(value, dict):
        raise ValidationError("must be a JSON object", field=field, rule="json")
    return value


def _filters(filters: str | None, pairs: list[str] | None) -> dict[str, Any] | None:
    out = _json_object(filters, "filters") or {}
    for pair in pairs or []:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise ValidationError(f"{pair!r} is not KEY=VALUE", field="filter", rule="syntax")
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw
    return out or None


def _text(positional: str | None, option: str | None, field: str) -> str:
    value = option if option is not None else positional
    if value is None:
        raise ValidationError(f"give the {field} as an argument or with --{field}", field=field, rule="required")
    return sys.stdin.read() if value == "-" else value


@contextlib.contextmanager
def _bar(label: str) -> Iterator[Any]:
    """A rich progress bar on stderr; yields ``progress(advance, total)``."""
    with Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(), console=err_console, transient=False) as bar:
        task = bar.add_task(label, total=None)

        def advance(n: int, total: int) -> None:
            if total:
                bar.update(task, total=total)
            bar.advance(task, n)

        yield advance


def _results(hits: list[Any]) -> dict[str, Any]:
    return {"results": [h.to_dict() for h in hits]}


@app.command()
def remember(
    agent_id: AgentId,
    user_id: UserId,
    content_arg: Annotated[str | None, typer.Argument(metavar="[CONTENT]", help="The memory text ('-' reads stdin).", show_default=False)] = None,
    content: Annotated[str | None, typer.Option("--content", "--fact", help="The memory text.", show_default=False)] = None,
    metadata: Annotated[str | None, typer.Option("--metadata", help="Metadata as a JSON object.", show_default=False)] = None,
    ttl_ms: Annotated[int | None, typer.Option("--ttl-ms", help="Expire after this many milliseconds (default: never).")] = None,
    org_id: OrgId = None,
    workspace_id: WorkspaceId = None,
    db: Db = None,
    embedder: EmbedderOpt = "minilm",
    agents_root: AgentsRoot = Path("agents"),
    as_json: JsonFlag = True,
) -> None:
    """Store a memory; prints {"id": ..., "status": "remembered"}."""
    scope = Scope.resolve(agent_id, user_id, org_id, workspace_id)
    text, meta = _text(content_arg, content, "content"), _json_object(metadata, "metadata")
    with _store(db, agents_root, embedder) as store:
        mid = store.remember(text, meta, scope, ttl_ms=ttl_ms)
    emit({"id": mid, "status": "remembered"}, True)


@app.command()
def recall(
    agent_id: AgentId,
    user_id: UserId,
    query_arg: QueryArg = None,
    query: QueryOpt = None,
    limit: Limit = 5,
    org_id: OrgId = None,
    workspace_id: WorkspaceId = None,
    db: Db = None,
    embedder: EmbedderOpt = "minilm",
    agents_root: AgentsRoot = Path("agents"),
    as_json: JsonFlag = True,
) -> None:
    """Semantic recall: the closest memories by meaning, scores in [0, 1] (0.45 = relevant)."""
    scope = Scope.resolve(agent_id, user_id, org_id, workspace_id)
    with _store(db, agents_root, embedder) as store:
        hits = store.recall(_text(query_arg, query, "query"), scope, limit)
    emit(_results(hits), True)


@app.command()
def search(
    agent_id: AgentId,
    user_id: UserId,
    query_arg: QueryArg = None,
    keywords: Annotated[str | None, typer.Option("--keywords", "--query", "--topic", help="Words; a memory matches if any word does.", show_default=False)] = None,
    limit: Limit = 10,
    org_id: OrgId = None,
    workspace_id: WorkspaceId = None,
    db: Db = None,
    embedder: EmbedderOpt = "minilm",
    agents_root: AgentsRoot = Path("agents"),
    as_json: JsonFlag = True,
) -> None:
    """Keyword search (any word matches, bm25-ranked); keyword hits score 0.5-1."""
    scope = Scope.resolve(agent_id, user_id, org_id, workspace_id)
    with _store(db, agents_root, embedder) as store:
        hits = store.search(_text(query_arg, keywords, "keywords"), scope, limit)
    emit(_results(hits), True)


@app.command("search-semantic")
def search_semantic(
    agent_id: AgentId,
    user_id: UserId,
    query_arg: QueryArg = None,
    query: QueryOpt = None,
    filters: Filters = None,
    filter_pairs: FilterPairs = None,
    limit: Limit = 5,
    org_id: OrgId = None,
    workspace_id: WorkspaceId = None,
    db: Db = None,
    embedder: EmbedderOpt = "minilm",
    agents_root: AgentsRoot = Path("agents"),
    as_json: JsonFlag = True,
) -> None:
    """Semantic search restricted by metadata equality filters (indexed top-level keys)."""
    scope = Scope.resolve(agent_id, user_id, org_id, workspace_id)
    with _store(db, agents_root, embedder) as store:
        hits = store.search_semantic(_text(query_arg, query, "query"), scope, _filters(filters, filter_pairs), limit)
    emit(_results(hits), True)


@app.command("search-hybrid")
def search_hybrid(
    agent_id: AgentId,
    user_id: UserId,
    query_arg: QueryArg = None,
    query: QueryOpt = None,
    filters: Filters = None,
    filter_pairs: FilterPairs = None,
    limit: Limit = 5,
    org_id: OrgId = None,
    workspace_id: WorkspaceId = None,
    db: Db = None,
    embedder: EmbedderOpt = "minilm",
    agents_root: AgentsRoot = Path("agents"),
    as_json: JsonFlag = True,
) -> None:
    """Semantic and keyword search fused; a keyword hit never scores under 0.5."""
    scope = Scope.resolve(agent_id, user_id, org_id, workspace_id)
    with _store(db, agents_root, embedder) as store:
        hits = store.search_hybrid(_text(query_arg, query, "query"), scope, _filters(filters, filter_pairs), limit)
    emit(_results(hits), True)


@app.command("list")
def list_(
    agent_id: AgentId,
    user_id: UserId,
    filters: Filters = None,
    filter_pairs: FilterPairs = None,
    limit: Annotated[int, typer.Option("--limit", help="At most this many (1-1000).")] = 1000,
    org_id: OrgId = None,
    workspace_id: WorkspaceId = None,
    db: Db = None,
    embedder: EmbedderOpt = "minilm",
    agents_root: AgentsRoot = Path("agents"),
    as_json: JsonFlag = True,
) -> None:
    """Live memories matching metadata filters, oldest first (e.g. --filter goal_id=g1)."""
    scope = Scope.resolve(agent_id, user_id, org_id, workspace_id)
    with _store(db, agents_root, embedder) as store:
        mems = store.list_memories(scope, _filters(filters, filter_pairs), limit)
    emit({"memories": [m.to_dict() for m in mems]}, True)


@app.command()
def get(
    memory_id: Annotated[str, typer.Argument(metavar="ID", help="Memory id.")],
    db: Db = None,
    embedder: EmbedderOpt = "minilm",
    agents_root: AgentsRoot = Path("agents"),
    as_json: JsonFlag = True,
) -> None:
    """Print one memory (forgotten or expired ones are not found)."""
    with _store(db, agents_root, embedder) as store:
        emit(store.get(memory_id).to_dict(), True)


@app.command()
def edit(
    memory_id: Annotated[str, typer.Argument(metavar="ID", help="Memory id.")],
    content: Annotated[str | None, typer.Option("--content", "--fact", help="New text (re-embedded).", show_default=False)] = None,
    metadata: Annotated[str | None, typer.Option("--metadata", help="New metadata object (replaces the old one).", show_default=False)] = None,
    ttl_ms: Annotated[int | None, typer.Option("--ttl-ms", help="Expire this many ms from now.")] = None,
    no_expiry: Annotated[bool, typer.Option("--no-expiry", help="Never expire.")] = False,
    db: Db = None,
    embedder: EmbedderOpt = "minilm",
    agents_root: AgentsRoot = Path("agents"),
    as_json: JsonFlag = True,
) -> None:
    """Change a memory's content, metadata or TTL; prints the updated memory."""
    ttl: Any = None if no_expiry else (ttl_ms if ttl_ms is not None else UNSET)
    with _store(db, agents_root, embedder) as store:
        mem = store.edit(memory_id, content=content, metadata=_json_object(metadata, "metadata"), ttl_ms=ttl)
    emit(mem.to_dict(), True)


@app.command()
def forget(
    memory_id: Annotated[str, typer.Argument(metavar="ID", help="Memory id.")],
    db: Db = None,
    embedder: EmbedderOpt = "minilm",
    agents_root: AgentsRoot = Path("agents"),
    as_json: JsonFlag = True,
) -> None:
    """Soft-delete a memory (hidden from every read; erased only by prune --hard)."""
    with _store(db, agents_root, embedder) as store:
        mem = store.forget(memory_id)
    emit({"id": mem.id, "status": "forgotten"}, True)


@app.command("forget-expired")
def forget_expired(
    agent_id: OptAgentId = None,
    user_id: OptUserId = None,
    org_id: OptOrgId = None,
    workspace_id: OptWorkspaceId = None,
    db: Db = None,
    embedder: EmbedderOpt = "minilm",
    agents_root: AgentsRoot = Path("agents"),
    as_json: JsonFlag = True,
) -> None:
    """Forget every expired memory (in the given scope, or everywhere)."""
    with _store(db, agents_root, embedder) as store:
        n = store.forget_expired(ScopeFilter(agent_id, user_id, org_id, workspace_id))
    emit({"status": "ok", "removed": n}, True)


@app.command()
def prune(
    agent_id: OptAgentId = None,
    user_id: OptUserId = None,
    org_id: OptOrgId = None,
    workspace_id: OptWorkspaceId = None,
    keywords: Annotated[str | None, typer.Option("--keywords", help="Only memories matching any of these words.")] = None,
    expired_only: Annotated[bool, typer.Option("--expired-only", help="Only expired memories.")] = False,
    confirm: Annotated[bool, typer.Option("--confirm", help="Really remove (default is a dry run).")] = False,
    hard: Annotated[bool, typer.Option("--hard", help="Erase rows (also already-forgotten ones) instead of soft-deleting.")] = False,
    db: Db = None,
    embedder: EmbedderOpt = "minilm",
    agents_root: AgentsRoot = Path("agents"),
    as_json: JsonFlag = True,
) -> None:
    """Bulk clean-up; a dry run (count + sample ids) unless --confirm."""
    with _store(db, agents_root, embedder) as store:
        report = store.prune(
            ScopeFilter(agent_id, user_id, org_id, workspace_id),
            keywords=keywords,
            expired_only=expired_only,
            dry_run=not confirm,
            hard=hard,
        )
    emit(report, True)


@app.command()
def health(
    db: Db = None,
    embedder: EmbedderOpt = "minilm",
    agents_root: AgentsRoot = Path("agents"),
    as_json: JsonFlag = True,
) -> None:
    """Status, counts, file size, schema version, embedder (and whether a reindex is due)."""
    from .. import __version__

    with _store(db, agents_root, embedder) as store:
        data = store.health()
    emit({**json.loads(json.dumps(data.__dict__)), "version": __version__}, True)


@app.command()
def vacuum(
    db: Db = None,
    embedder: EmbedderOpt = "minilm",
    agents_root: AgentsRoot = Path("agents"),
    as_json: JsonFlag = True,
) -> None:
    """Compact the store (FTS optimise, VACUUM, WAL checkpoint)."""
    with _store(db, agents_root, embedder) as store:
        emit(store.vacuum(), True)


@app.command()
def export(
    output: Annotated[Path | None, typer.Option("--output", "-o", help="JSONL file to write (default: stdout).")] = None,
    agent_id: OptAgentId = None,
    user_id: OptUserId = None,
    org_id: OptOrgId = None,
    workspace_id: OptWorkspaceId = None,
    db: Db = None,
    embedder: EmbedderOpt = "minilm",
    agents_root: AgentsRoot = Path("agents"),
    as_json: JsonFlag = True,
) -> None:
    """Write every memory (forgotten and expired included) as JSONL, for backup or another backend."""
    scope = ScopeFilter(agent_id, user_id, org_id, workspace_id)
    with _store(db, agents_root, embedder) as store:
        if output is None:
            n = export_jsonl(store, sys.stdout, scope)
            err_console.print(f"exported {n} memories")
            return
        n = export_jsonl(store, output, scope)
    emit({"status": "ok", "exported": n, "path": str(output)}, True)


@app.command("import")
def import_(
    source: Annotated[Path, typer.Argument(metavar="FILE", help="A JSONL export ('-' reads stdin).")],
    db: Db = None,
    embedder: EmbedderOpt = "minilm",
    agents_root: AgentsRoot = Path("agents"),
    as_json: JsonFlag = True,
) -> None:
    """Load a JSONL export; ids already present are skipped. Shows progress on stderr."""
    with _store(db, agents_root, embedder) as store, _bar("importing") as progress:
        imported, skipped = import_jsonl(store, sys.stdin if str(source) == "-" else source, progress=progress)
    emit({"status": "ok", "imported": imported, "skipped": skipped}, True)


@app.command()
def reindex(
    db: Db = None,
    embedder: EmbedderOpt = "minilm",
    agents_root: AgentsRoot = Path("agents"),
    as_json: JsonFlag = True,
) -> None:
    """Re-embed memories with the current embedder (after a model change). Shows progress on stderr."""
    with _store(db, agents_root, embedder) as store, _bar("reindexing") as progress:
        n = store.reindex(progress=progress)
        model = store.embedder.model_id
    emit({"status": "ok", "reindexed": n, "embedder": model}, True)
