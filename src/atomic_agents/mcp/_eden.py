"""The eden-memory tools: eden's names, input fields and answer shapes (spec: eden-memory-interface.md).

Each answer is the JSON the ``atomic-agents memory ...`` command prints for the
same call, so the CLI and the server agree byte for byte.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ._tools import EDEN_ALIASES, Args, ToolSpec, boolean, integer, obj, schema, string

if TYPE_CHECKING:
    from ..memory import Scope, ScopeFilter
    from ._context import Services

__all__ = ["EDEN_TOOLS"]

_SCOPE = {
    "agent_id": string("Agent scope."),
    "user_id": string("User scope."),
    "org_id": string("Default EDEN_ORG_ID."),
    "workspace_id": string("Default EDEN_WORKSPACE_ID; may contain '/'."),
}
_OPT_SCOPE = {k: string() for k in _SCOPE}
_SCOPED = ("agent_id", "user_id")


def _scope(a: Args) -> Scope:
    from ..memory import Scope

    return Scope.resolve(a.text("agent_id", required=True), a.text("user_id", required=True),
                         a.text("org_id"), a.text("workspace_id"))  # fmt: skip


def _scope_filter(a: Args) -> ScopeFilter:
    from ..memory import ScopeFilter

    return ScopeFilter(a.text("agent_id"), a.text("user_id"), a.text("org_id"), a.text("workspace_id"))


def _results(hits: list[Any]) -> dict[str, Any]:
    return {"results": [h.to_dict() for h in hits]}


def _ttl(a: Args) -> int | None:
    return a.integer("ttl_ms")


def remember(s: Services, a: Args) -> Any:
    scope = _scope(a)
    mid = s.store().remember(a.text("content", required=True), a.mapping("metadata"), scope, ttl_ms=_ttl(a))
    return {"id": mid, "status": "remembered"}


def recall(s: Services, a: Args) -> Any:
    scope = _scope(a)
    return _results(s.store().recall(a.text("query", required=True), scope, a.integer("limit", default=5)))


def search(s: Services, a: Args) -> Any:
    scope = _scope(a)
    return _results(s.store().search(a.text("query", required=True), scope, a.integer("limit", default=10)))


def search_semantic(s: Services, a: Args) -> Any:
    scope = _scope(a)
    hits = s.store().search_semantic(a.text("query", required=True), scope, a.mapping("filters"), a.integer("limit", default=5))
    return _results(hits)


def edit(s: Services, a: Args) -> Any:
    from ..memory import UNSET

    # ttl_ms absent: keep the expiry; null: never expire; a number: expire that many ms from now.
    ttl: Any = _ttl(a) if a.given("ttl_ms") else UNSET
    mem = s.store().edit(a.text("id", required=True), content=a.text("content"), metadata=a.mapping("metadata"), ttl_ms=ttl)
    return mem.to_dict()


def forget(s: Services, a: Args) -> Any:
    mem = s.store().forget(a.text("id", required=True))
    return {"id": mem.id, "status": "forgotten"}


def forget_expired(s: Services, a: Args) -> Any:
    return {"status": "ok", "removed": s.store().forget_expired(_scope_filter(a))}


def health(s: Services, a: Args) -> Any:
    from .. import __version__

    data = s.store().health()
    return {**json.loads(json.dumps(data.__dict__)), "version": __version__}


def vacuum(s: Services, a: Args) -> Any:
    return s.store().vacuum()


def prune(s: Services, a: Args) -> Any:
    # Bulk removal only with both switches thrown (spec: "dry run by default").
    really = a.flag("confirm") and not a.flag("dry_run", default=True)
    return s.store().prune(_scope_filter(a), keywords=a.text("keywords"), expired_only=a.flag("expired_only"),
                           dry_run=not really, hard=a.flag("hard"))  # fmt: skip


_QUERY = {"query": string(), "limit": integer(minimum=1)}

EDEN_TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec("eden_remember", "Store a memory (content + JSON metadata) in a scope. Returns its id.",
             schema({**_SCOPE, "content": string(), "metadata": obj(), "ttl_ms": integer("Expire after ms; null = never.", minimum=1)},
                    (*_SCOPED, "content")),
             remember, aliases=EDEN_ALIASES),
    ToolSpec("eden_recall", "Semantic recall: memories closest in meaning to query. Score >= 0.45 = relevant.",
             schema({**_SCOPE, **_QUERY}, (*_SCOPED, "query")), recall, read_only=True, aliases=EDEN_ALIASES),
    ToolSpec("eden_search", "Keyword search over content; a memory matches if any word does.",
             schema({**_SCOPE, **_QUERY}, (*_SCOPED, "query")), search, read_only=True,
             aliases={**EDEN_ALIASES, "keywords": "query"}),  # eden's CLI spells it --keywords
    ToolSpec("eden_search_semantic", "Semantic search limited to memories whose metadata equals filters.",
             schema({**_SCOPE, **_QUERY, "filters": obj("Metadata key -> value.")}, (*_SCOPED, "query")),
             search_semantic, read_only=True, aliases=EDEN_ALIASES),
    ToolSpec("eden_edit", "Change a memory's content, metadata (replaced) or ttl_ms. Returns the memory.",
             schema({"id": string(), "content": string(), "metadata": obj(), "ttl_ms": integer(minimum=1)}, ("id",)),
             edit, idempotent=True, aliases=EDEN_ALIASES),
    ToolSpec("eden_forget", "Soft-delete one memory by id (hidden from every read).",
             schema({"id": string()}, ("id",)), forget, destructive=True, idempotent=True),
    ToolSpec("eden_forget_expired", "Forget memories whose TTL passed (optionally in one scope). Returns the count.",
             schema(_OPT_SCOPE), forget_expired, destructive=True, idempotent=True, aliases=EDEN_ALIASES),
    ToolSpec("eden_health", "Store status, row counts, size, embedder, version.",
             schema({}), health, read_only=True),
    ToolSpec("eden_vacuum", "Compact the store (WAL checkpoint, VACUUM).",
             schema({}), vacuum, idempotent=True),
    ToolSpec("eden_prune", "Bulk clean-up by scope/keywords/expiry. Dry run (count + sample ids) unless "
             "confirm=true and dry_run=false.",
             schema({**_OPT_SCOPE, "keywords": string(), "expired_only": boolean(), "dry_run": boolean(),
                     "confirm": boolean(), "hard": boolean("Erase rows, not soft-delete.")}),
             prune, destructive=True, aliases=EDEN_ALIASES),
)
