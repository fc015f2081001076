"""Durable memories with keyword, semantic and hybrid recall (eden-memory compatible).

Knows nothing of the vault or ATP: it stores text + JSON metadata under a
four-part scope and finds it again.

>>> from atomic_agents.memory import InMemoryMemoryStore, HashingEmbedder, Scope
>>> store = InMemoryMemoryStore(embedder=HashingEmbedder())
>>> scope = Scope("builder", "alice", org_id="acme", workspace_id="acme/web")
>>> mid = store.remember("Billing deploy went green", {"goal_id": "g1"}, scope)
>>> [h.id == mid for h in store.search("billing deploy", scope)]
[True]

The default store is SQLite with the local MiniLM model: :func:`open_store`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._models import MAX_CONTENT_CHARS, MAX_LIMIT, MAX_METADATA_BYTES, Health, Hit, Memory, PruneReport, Scope, ScopeFilter
from ._store import UNSET, MemoryStore, default_db_path, open_store

if TYPE_CHECKING:
    from ._embed import BaseEmbedder, Embedder, HashingEmbedder, MiniLMEmbedder, content_hash, default_embedder, embedder_from_name
    from ._fake import InMemoryMemoryStore
    from ._leases import MAX_LEASE_MS, Fence, Lease, LeaseHeldError, StaleFenceError
    from ._secrets import check_no_secrets, find_secret
    from ._sqlite import SQLiteMemoryStore
    from ._sqlite_schema import SCHEMA_VERSION
    from ._transfer import export_jsonl, import_jsonl

# Loaded on first use (PEP 562): `import atomic_agents.memory` costs the models and the seam only;
# the backends, the embedders (numpy, onnxruntime) and the secret scanner load when a name is read.
_LAZY = {
    "._embed": ("BaseEmbedder", "Embedder", "HashingEmbedder", "MiniLMEmbedder", "content_hash", "default_embedder",
                "embedder_from_name"),
    "._fake": ("InMemoryMemoryStore",),
    "._leases": ("MAX_LEASE_MS", "Fence", "Lease", "LeaseHeldError", "StaleFenceError"),
    "._secrets": ("check_no_secrets", "find_secret"),
    "._sqlite": ("SQLiteMemoryStore",),
    "._sqlite_schema": ("SCHEMA_VERSION",),
    "._transfer": ("export_jsonl", "import_jsonl"),
}
_WHERE = {name: module for module, names in _LAZY.items() for name in names}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))


#: ATP's relevance floor (spec: "a memory counts as relevant at score >= 0.45").
RELEVANCE_FLOOR = 0.45

__all__ = [
    "MAX_CONTENT_CHARS",
    "MAX_LEASE_MS",
    "MAX_LIMIT",
    "MAX_METADATA_BYTES",
    "RELEVANCE_FLOOR",
    "SCHEMA_VERSION",
    "UNSET",
    "BaseEmbedder",
    "Embedder",
    "Fence",
    "HashingEmbedder",
    "Health",
    "Hit",
    "InMemoryMemoryStore",
    "Lease",
    "LeaseHeldError",
    "Memory",
    "MemoryStore",
    "MiniLMEmbedder",
    "PruneReport",
    "SQLiteMemoryStore",
    "Scope",
    "ScopeFilter",
    "StaleFenceError",
    "check_no_secrets",
    "content_hash",
    "default_db_path",
    "default_embedder",
    "embedder_from_name",
    "export_jsonl",
    "find_secret",
    "import_jsonl",
    "open_store",
]
