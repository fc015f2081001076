"""`atomic-agents memory ...`: the memory store on the command line, eden-memory compatible.

Output is JSON on stdout (eden-memory's shapes, so ATP's scripts parse it unchanged);
progress and messages go to stderr. Legacy flag aliases are accepted:
``--observer-id``/``--observed-id`` for agent/user, ``--fact`` for content,
``--topic`` for query, ``--top-k`` for limit, ``--keywords`` for a keyword query.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from .._text import json_reason, parse_json
from ..exceptions import ValidationError
from ._common import agents_root, db_path, durable, embedder_name, emit, err_console, group_options, shared

if TYPE_CHECKING:
    from ..memory import MemoryStore

app = typer.Typer(help="Durable memories with keyword, semantic and hybrid recall.", no_args_is_help=True,
                  callback=group_options("agents_root", "db"))

AgentId = Annotated[str, typer.Option("--agent-id", "--observer-id", metavar="ID", help="Agent scope (required).", show_default=False)]
UserId = Annotated[str, typer.Option("--user-id", "--observed-id", metavar="ID", help="User scope (required).", show_default=False)]
OrgId = Annotated[str | None, typer.Option("--org-id", metavar="ID", envvar="EDEN_ORG_ID", help="Org scope (env EDEN_ORG_ID; default 'default').", show_default=False)]
WorkspaceId = Annotated[
    str | None,
    typer.Option("--workspace-id", metavar="ID", envvar="EDEN_WORKSPACE_ID", help="Workspace scope, may contain '/' (env EDEN_WORKSPACE_ID).", show_default=False),
]
OptAgentId = Annotated[str | None, typer.Option("--agent-id", "--observer-id", metavar="ID", help="Only this agent.", show_default=False)]
OptUserId = Annotated[str | None, typer.Option("--user-id", "--observed-id", metavar="ID", help="Only this user.", show_default=False)]
OptOrgId = Annotated[str | None, typer.Option("--org-id", metavar="ID", help="Only this org.", show_default=False)]
OptWorkspaceId = Annotated[str | None, typer.Option("--workspace-id", metavar="ID", help="Only this workspace.", show_default=False)]
QueryArg = Annotated[str | None, typer.Argument(metavar="QUERY", help="The query (or use --query).", show_default=False)]
QueryOpt = Annotated[str | None, typer.Option("--query", "--topic", metavar="TEXT", help="The query.", show_default=False)]
Limit = Annotated[int, typer.Option("--limit", "--top-k", metavar="N", help="How many results (1-1000).")]
Filters = Annotated[
    list[str] | None,
    typer.Option(
        "--filter",
        metavar="KEY=VALUE|JSON",
        help='Metadata equality filter: KEY=VALUE (VALUE parsed as JSON if it can be) or a JSON object, '
        'e.g. --filter goal_id=g1 or --filter \'{"goal_id": "g1"}\' (repeatable).',
        show_default=False,
    ),
]
Jsonl = Annotated[
    str | None,
    typer.Option("--jsonl", metavar="FILE|-", show_default=False,
                 help="Many at once: one JSON object per line from FILE or '-' (stdin); the answers are JSON lines "
                      "in input order. All lines are checked first: one bad line stores (or answers) nothing."),
]
BatchAgentId = Annotated[str | None, typer.Option("--agent-id", "--observer-id", metavar="ID", show_default=False,
                                                 help="Agent scope (required; with --jsonl, the default of each line).")]
BatchUserId = Annotated[str | None, typer.Option("--user-id", "--observed-id", metavar="ID", show_default=False,
                                                help="User scope (required; with --jsonl, the default of each line).")]


def _required(value: str | None, flag: str) -> str:
    """A scope option that only ``--jsonl`` may leave out: missing is a usage error (exit 2), as before."""
    if value is None:
        raise typer.BadParameter("required (unless --jsonl lines give it).", param_hint=f"'{flag}'")
    return value


# The old spelling, kept so existing scripts run; not shown in --help.
LegacyFilters = Annotated[
    str | None,
    typer.Option("--filters", metavar="JSON", hidden=True, help="Old spelling of --filter JSON.", show_default=False),
]


#: What a model id looks like (``all-MiniLM-L6-v2-onnx-int8``, ``org/model:rev``): named back, anything else counted.
_MODEL_ID = re.compile(r"[\w.+/:@-]{1,128}", re.ASCII)


@contextlib.contextmanager
def _store(embeds: bool = False) -> Iterator[MemoryStore]:
    """The store the group-wide options name; commands that never embed get the default embedder (lazy: no model load)."""
    from ._daemon import served_store

    served = served_store(embeds)  # inside `atomic-agents daemon`: its warm store, when this command targets it
    if served is not None:
        yield served
        return
    from ..memory import default_embedder, embedder_from_name, open_store

    embedder = embedder_from_name(embedder_name()) if embeds else default_embedder()
    store = open_store(db_path(), agents_root=agents_root(), embedder=embedder, durable=durable(), ann_build="off")
    try:
        yield store
    finally:
        store.close()


def _json_object(text: str | None, field: str) -> dict[str, Any] | None:
    if text is None:
        return None
    value = parse_json(text, field=field)
    if not isinstance(value, dict):
        raise ValidationError("must be a JSON object", field=field, rule="json")
    if field != "metadata":
        return value
    from ..memory._models import check_metadata

    return check_metadata(value)  # the store's own rules (depth, 64-bit integers), before any file is opened


def _filters(pairs: list[str] | None, legacy: str | None = None) -> dict[str, Any] | None:
    out = _json_object(legacy, "filter") or {}
    for n, pair in enumerate(pairs or [], 1):
        if pair.lstrip().startswith("{"):
            out.update(_json_object(pair, "filter") or {})
            continue
        key, sep, raw = pair.partition("=")
        if not sep or not key:  # the text is not echoed: it may be a mistyped secret
            raise ValidationError(f"--filter #{n} is not KEY=VALUE or a JSON object", field="filter", rule="syntax")
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw  # not JSON: the text itself
        except (ValueError, RecursionError) as exc:  # JSON, but past what can be compared (depth, digits)
            raise ValidationError(f"--filter #{n}: {json_reason(exc)}", field="filter", rule="json") from None  # (the key: maybe pasted text)
    from ..memory._models import check_filters

    return check_filters(out) or None  # the store's own rules, before any file is opened


def _text(positional: str | None, option: str | None, field: str) -> str:
    value = option if option is not None else positional
    if value is None:
        raise ValidationError(f"give the {field} as an argument or with --{field}", field=field, rule="required")
    return sys.stdin.read() if value == "-" else value


@contextlib.contextmanager
def _bar(label: str) -> Iterator[Any]:
    """A rich progress bar on stderr; yields ``progress(advance, total)``."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(), console=err_console(),
                  transient=False) as bar:
        task = bar.add_task(label, total=None)

        def advance(n: int, total: int) -> None:
            if total:
                bar.update(task, total=total)
            bar.advance(task, n)

        yield advance


def _results(hits: list[Any]) -> dict[str, Any]:
    return {"results": [h.to_dict() for h in hits]}


@app.command()
@shared("agents_root", "db", "json", "embedder", "durability", always_json=True)
def remember(
    agent_id: BatchAgentId = None,
    user_id: BatchUserId = None,
    content_arg: Annotated[str | None, typer.Argument(metavar="CONTENT", help="The memory text ('-' reads stdin).", show_default=False)] = None,
    content: Annotated[str | None, typer.Option("--content", "--fact", metavar="TEXT", help="The memory text.", show_default=False)] = None,
    metadata: Annotated[str | None, typer.Option("--metadata", metavar="JSON", help="Metadata as a JSON object.", show_default=False)] = None,
    ttl_ms: Annotated[int | None, typer.Option("--ttl-ms", metavar="MS", help="Expire after this many milliseconds (default: never).", show_default=False)] = None,
    org_id: OrgId = None,
    workspace_id: WorkspaceId = None,
    jsonl: Jsonl = None,
) -> None:
    """Store a memory; prints {"id": ..., "status": "remembered"}.

    With --jsonl, one memory per line: {"content": ..., "metadata": {...}, "ttl_ms": ..., "agent_id": ...,
    "user_id": ..., "org_id": ..., "workspace_id": ...} (options give the defaults); stored in one transaction.
    """
    from ..memory import Scope

    if jsonl is not None:
        from ._batch import remember_records, write_jsonl

        if content_arg is not None or content is not None or metadata is not None:
            raise ValidationError("--jsonl takes the content and metadata from its lines", field="jsonl", rule="exclusive")
        defaults = {"agent_id": agent_id, "user_id": user_id, "org_id": org_id, "workspace_id": workspace_id,
                    "ttl_ms": ttl_ms}
        mems = remember_records(jsonl, defaults)  # every line checked before the store opens
        with _store(embeds=True) as store:
            store.load(mems)  # one transaction, one embedding pass; a scope and TTL per memory
        write_jsonl([{"id": m.id, "status": "remembered"} for m in mems])
        return
    scope = Scope.resolve(_required(agent_id, "--agent-id"), _required(user_id, "--user-id"), org_id, workspace_id)
    text, meta = _text(content_arg, content, "content"), _json_object(metadata, "metadata")
    with _store(embeds=True) as store:
        mid = store.remember(text, meta, scope, ttl_ms=ttl_ms)
    emit({"id": mid, "status": "remembered"}, True)


@app.command()
@shared("agents_root", "db", "json", "embedder", always_json=True)
def recall(
    agent_id: BatchAgentId = None,
    user_id: BatchUserId = None,
    query_arg: QueryArg = None,
    query: QueryOpt = None,
    limit: Limit = 5,
    org_id: OrgId = None,
    workspace_id: WorkspaceId = None,
    filters: Filters = None,
    jsonl: Jsonl = None,
) -> None:
    """Semantic recall: the closest memories by meaning, calibrated scores in [0, 1] (0.45 = relevant).

    With --jsonl, one query per line: {"query": ..., "limit": ..., "filters": {...}} (and optionally the scope
    fields; options, --filter included, give the defaults); one {"results": [...]} line per query, in input order.
    """
    from ..memory import Scope

    if jsonl is not None:
        from ._batch import recall_requests, write_jsonl

        if query_arg is not None or query is not None:
            raise ValidationError("--jsonl takes the queries from its lines", field="jsonl", rule="exclusive")
        defaults = {"agent_id": agent_id, "user_id": user_id, "org_id": org_id, "workspace_id": workspace_id,
                    "limit": limit, "filters": _filters(filters)}
        requests = recall_requests(jsonl, defaults)  # every line checked before the store opens
        with _store(embeds=True) as store:
            answers = [_results(store.recall(q, sc, lim, flt)) for q, sc, lim, flt in requests]
        write_jsonl(answers)
        return
    scope = Scope.resolve(_required(agent_id, "--agent-id"), _required(user_id, "--user-id"), org_id, workspace_id)
    text, where = _text(query_arg, query, "query"), _filters(filters)  # checked before the store opens
    with _store(embeds=True) as store:
        hits = store.recall(text, scope, limit, where)
    emit(_results(hits), True)


@app.command()
@shared("agents_root", "db", "json", always_json=True)
def search(
    agent_id: AgentId,
    user_id: UserId,
    query_arg: QueryArg = None,
    keywords: Annotated[str | None, typer.Option("--keywords", "--query", "--topic", metavar="WORDS", help="Words; a memory matches if any word does.", show_default=False)] = None,
    limit: Limit = 10,
    org_id: OrgId = None,
    workspace_id: WorkspaceId = None,
    filters: Filters = None,
) -> None:
    """Keyword search (any word matches, bm25-ranked); calibrated scores in [0, 1] (0.45 = relevant)."""
    from ..memory import Scope

    scope = Scope.resolve(agent_id, user_id, org_id, workspace_id)
    text, where = _text(query_arg, keywords, "keywords"), _filters(filters)  # checked before the store opens
    with _store(embeds=False) as store:
        hits = store.search(text, scope, limit, where)
    emit(_results(hits), True)


@app.command("search-semantic")
@shared("agents_root", "db", "json", "embedder", always_json=True)
def search_semantic(
    agent_id: AgentId,
    user_id: UserId,
    query_arg: QueryArg = None,
    query: QueryOpt = None,
    filters: Filters = None,
    legacy_filters: LegacyFilters = None,
    limit: Limit = 5,
    org_id: OrgId = None,
    workspace_id: WorkspaceId = None,
) -> None:
    """Semantic search restricted by metadata equality filters (indexed top-level keys)."""
    from ..memory import Scope

    scope = Scope.resolve(agent_id, user_id, org_id, workspace_id)
    text, where = _text(query_arg, query, "query"), _filters(filters, legacy_filters)  # checked before the store opens
    with _store(embeds=True) as store:
        hits = store.search_semantic(text, scope, where, limit)
    emit(_results(hits), True)


@app.command("search-hybrid")
@shared("agents_root", "db", "json", "embedder", always_json=True)
def search_hybrid(
    agent_id: AgentId,
    user_id: UserId,
    query_arg: QueryArg = None,
    query: QueryOpt = None,
    filters: Filters = None,
    legacy_filters: LegacyFilters = None,
    limit: Limit = 5,
    org_id: OrgId = None,
    workspace_id: WorkspaceId = None,
    rerank: Annotated[bool, typer.Option("--rerank", help="Re-read the top 20 candidates with the model's token states: better order and scores, for one more model pass over them.")] = False,
) -> None:
    """Semantic and keyword search fused; calibrated scores in [0, 1] (0.45 = relevant)."""
    from ..memory import Scope

    scope = Scope.resolve(agent_id, user_id, org_id, workspace_id)
    text, where = _text(query_arg, query, "query"), _filters(filters, legacy_filters)  # checked before the store opens
    with _store(embeds=True) as store:
        hits = store.search_hybrid(text, scope, where, limit, rerank=rerank)
    emit(_results(hits), True)


@app.command("list")
@shared("agents_root", "db", "json", always_json=True)
def list_(
    agent_id: AgentId,
    user_id: UserId,
    filters: Filters = None,
    legacy_filters: LegacyFilters = None,
    limit: Annotated[int, typer.Option("--limit", metavar="N", help="At most this many (1-1000).")] = 1000,
    org_id: OrgId = None,
    workspace_id: WorkspaceId = None,
) -> None:
    """Live memories matching metadata filters, oldest first (e.g. --filter goal_id=g1)."""
    from ..memory import Scope

    scope = Scope.resolve(agent_id, user_id, org_id, workspace_id)
    where = _filters(filters, legacy_filters)  # checked before the store opens
    with _store(embeds=False) as store:
        mems = store.list_memories(scope, where, limit)
    emit({"memories": [m.to_dict() for m in mems]}, True)


@app.command()
@shared("agents_root", "db", "json", always_json=True)
def get(
    memory_id: Annotated[str, typer.Argument(metavar="ID", help="Memory id.")],
) -> None:
    """Print one memory (forgotten or expired ones are not found)."""
    with _store(embeds=False) as store:
        emit(store.get(memory_id).to_dict(), True)


@app.command()
@shared("agents_root", "db", "json", "embedder", "durability", always_json=True)
def edit(
    memory_id: Annotated[str, typer.Argument(metavar="ID", help="Memory id.")],
    content: Annotated[str | None, typer.Option("--content", "--fact", metavar="TEXT", help="New text (re-embedded).", show_default=False)] = None,
    metadata: Annotated[str | None, typer.Option("--metadata", metavar="JSON", help="New metadata object (replaces the old one).", show_default=False)] = None,
    ttl_ms: Annotated[int | None, typer.Option("--ttl-ms", metavar="MS", help="Expire this many ms from now.", show_default=False)] = None,
    no_expiry: Annotated[bool, typer.Option("--no-expiry", help="Never expire.")] = False,
) -> None:
    """Change a memory's content, metadata or TTL; prints the updated memory."""
    from ..memory import UNSET

    ttl: Any = None if no_expiry else (ttl_ms if ttl_ms is not None else UNSET)
    meta = _json_object(metadata, "metadata")  # checked before the store opens
    with _store(embeds=True) as store:
        mem = store.edit(memory_id, content=content, metadata=meta, ttl_ms=ttl)
    emit(mem.to_dict(), True)


@app.command()
@shared("agents_root", "db", "json", "durability", always_json=True)
def forget(
    memory_id: Annotated[str, typer.Argument(metavar="ID", help="Memory id.")],
) -> None:
    """Soft-delete a memory (hidden from every read; erased only by prune --hard)."""
    with _store(embeds=False) as store:
        mem = store.forget(memory_id)
    emit({"id": mem.id, "status": "forgotten"}, True)


@app.command("forget-expired")
@shared("agents_root", "db", "json", "durability", always_json=True)
def forget_expired(
    agent_id: OptAgentId = None,
    user_id: OptUserId = None,
    org_id: OptOrgId = None,
    workspace_id: OptWorkspaceId = None,
) -> None:
    """Forget every expired memory (in the given scope, or everywhere)."""
    from ..memory import ScopeFilter

    with _store(embeds=False) as store:
        n = store.forget_expired(ScopeFilter(agent_id, user_id, org_id, workspace_id))
    emit({"status": "ok", "removed": n}, True)


@app.command()
@shared("agents_root", "db", "json", "durability", always_json=True)
def prune(
    agent_id: OptAgentId = None,
    user_id: OptUserId = None,
    org_id: OptOrgId = None,
    workspace_id: OptWorkspaceId = None,
    keywords: Annotated[str | None, typer.Option("--keywords", metavar="WORDS", help="Only memories matching any of these words.", show_default=False)] = None,
    expired_only: Annotated[bool, typer.Option("--expired-only", help="Only expired memories.")] = False,
    confirm: Annotated[bool, typer.Option("--confirm", help="Really remove (default is a dry run).")] = False,
    hard: Annotated[bool, typer.Option("--hard", help="Erase rows (also already-forgotten ones) instead of soft-deleting.")] = False,
) -> None:
    """Bulk clean-up; a dry run (count + sample ids) unless --confirm."""
    from ..memory import ScopeFilter

    with _store(embeds=False) as store:
        report = store.prune(
            ScopeFilter(agent_id, user_id, org_id, workspace_id),
            keywords=keywords,
            expired_only=expired_only,
            dry_run=not confirm,
            hard=hard,
        )
    emit(report, True)


@app.command()
@shared("agents_root", "db", "json", "embedder", always_json=True)
def health(
) -> None:
    """Status, counts, file size, schema version, embedder (and whether a reindex is due)."""
    from .. import __version__

    with _store(embeds=True) as store:
        data = store.health()
    out = json.loads(json.dumps(data.__dict__))
    if data.backend == "sqlite" and data.path:  # the file itself, as a daemon for it names it (symlinks resolved)
        out["path"] = os.path.realpath(data.path)
    emit({**out, "version": __version__}, True)


@app.command()
@shared("agents_root", "db", "json", "durability", always_json=True)
def vacuum(
) -> None:
    """Compact the store (FTS optimise, VACUUM, WAL checkpoint)."""
    with _store(embeds=False) as store:
        emit(store.vacuum(), True)


@app.command()
@shared("agents_root", "db", "json", "embedder", always_json=True)
def export(
    output: Annotated[Path | None, typer.Option("--output", "-o", metavar="FILE", help="JSONL file to write (default: stdout).", show_default=False)] = None,
    agent_id: OptAgentId = None,
    user_id: OptUserId = None,
    org_id: OptOrgId = None,
    workspace_id: OptWorkspaceId = None,
    with_vectors: Annotated[bool, typer.Option("--with-vectors", help="Also write each memory's vector (with the model id and dimension), so an import into a store with the same model embeds nothing.")] = False,
) -> None:
    """Write every memory (forgotten and expired included) as JSONL, for backup or another backend."""
    from ..memory import ScopeFilter, export_jsonl

    scope = ScopeFilter(agent_id, user_id, org_id, workspace_id)
    # With vectors, the store's model id labels them: the embedder the options name (never loaded here).
    details: dict[str, Any] = {}
    with _store(embeds=with_vectors) as store:
        if output is None:
            n = export_jsonl(store, sys.stdout, scope, with_vectors=with_vectors, details=details)
            err_console().print(f"exported {n} memories" + (f", {details['vectors']} with vectors" if with_vectors else ""))
            return
        n = export_jsonl(store, output, scope, with_vectors=with_vectors, details=details)
    emit({"status": "ok", "exported": n, "path": str(output), **({"vectors": details["vectors"]} if with_vectors else {})}, True)


@app.command("import")
@shared("agents_root", "db", "json", "embedder", "durability", always_json=True)
def import_(
    source: Annotated[Path, typer.Argument(metavar="FILE", help="A JSONL export ('-' reads stdin).")],
) -> None:
    """Load a JSONL export; ids already present are skipped. Shows progress on stderr."""
    from ..memory import import_jsonl

    details: dict[str, Any] = {}
    if str(source) == "-":
        stream: Any = getattr(sys.stdin, "buffer", sys.stdin)  # bytes: decoded as UTF-8 line by line, whatever the locale
    else:
        from .._text import open_input

        stream = open_input(source)  # before the store: a missing file creates no database
    with stream, _store(embeds=True) as store, _bar("importing") as progress:
        imported, skipped = import_jsonl(store, stream, progress=progress, details=details,
                                         name="<stdin>" if str(source) == "-" else str(source))
        model = store.embedder.model_id
    out: dict[str, Any] = {"status": "ok", "imported": imported, "skipped": skipped}
    if details.get("with_vectors"):  # the file carried vectors: say whether they were used
        out.update(vectors_reused=details["vectors_reused"], reembedded=details["reembedded"])
        if details["other_models"]:  # the file's text: never read as markup, named only if it looks like a model id
            from ..memory._secrets import find_secret

            named = [m for m in details["other_models"] if _MODEL_ID.fullmatch(m) and find_secret(m) is None]
            n = len(details["other_models"])
            others = ", ".join(named) if len(named) == n else f"{n} other model{'s' if n > 1 else ''}"
            err_console().print(f"the export's vectors are from {others}, not this store's {model}: "
                                f"re-embedded {details['reembedded']} memories", markup=False)  # fmt: skip
    emit(out, True)


@app.command()
@shared("agents_root", "db", "json", "embedder", "durability", always_json=True)
def reindex(
) -> None:
    """Re-embed memories with the current embedder (after a model change), then rebuild the ANN graph. Progress on stderr."""
    with _store(embeds=True) as store:
        with _bar("reindexing") as progress:
            n = store.reindex(progress=progress)
        model = store.embedder.model_id
        graph = _build_graph(store) if n else None  # new vectors: the old graph is stale
    emit({"status": "ok", "reindexed": n, "embedder": model, **({"ann": graph} if graph else {})}, True)


ann_app = typer.Typer(help="The approximate (ANN) search graph of a SQLite store.", no_args_is_help=True)
app.add_typer(ann_app, name="ann")


def _build_graph(store: MemoryStore) -> dict[str, Any] | None:
    """Build (or bring up to date) the store's ANN graph in the foreground, with a progress bar; None if it has none."""
    build = getattr(store, "build_ann", None)
    if build is None:
        return None
    import time

    t0 = time.perf_counter()
    with _bar("building the search graph") as progress:
        out: dict[str, Any] = build(progress=progress)
    return {**out, "seconds": round(time.perf_counter() - t0, 3)}


@ann_app.command("build")
@shared("agents_root", "db", "json", always_json=True)
def ann_build(
) -> None:
    """Build the ANN graph now (missing, stale, or rows written past it) and save it beside the database.

    Until it exists, searches scan every vector (same answers, slower); long-lived
    processes (the daemon, the MCP server) build it in the background themselves.
    """
    with _store(embeds=False) as store:  # the stored vectors, whatever model made them: nothing is embedded
        out = _build_graph(store)
    if out is None:
        raise ValidationError("only a SQLite store has an ANN graph (PostgreSQL searches exactly)", field="db", rule="backend")
    emit({"status": "ok", **{("ann" if k == "status" else k): v for k, v in out.items()}}, True)
