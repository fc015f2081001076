"""The :class:`MemoryStore` seam and how to open the default store.

A backend stores memories (content, JSON metadata, a four-part scope, TTL,
soft delete, timestamps, one embedding) and searches them. It does *not* own:
what the content means (ATP records are just memories to it), secret policy
wording (shared :func:`check_no_secrets`), or the embedding model (it is
handed an :class:`~atomic_agents.memory.Embedder` and records its id).

Every backend passes ``tests/memory/test_conformance.py``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ._embed import Embedder, default_embedder
from ._leases import Fence, Lease
from ._models import Health, Hit, Memory, PruneReport, Scope, ScopeFilter

if TYPE_CHECKING:
    import numpy as np

__all__ = ["UNSET", "MemoryStore", "Progress", "default_db_path", "open_store"]

#: ``progress(advance, total)``: ``advance`` items just finished out of ``total``.
Progress = Callable[[int, int], None]


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


#: "Leave as it is" for :meth:`MemoryStore.edit`'s ``ttl_ms`` (``None`` means "never expires").
UNSET: Any = _Unset()


@runtime_checkable
class MemoryStore(Protocol):
    """The operations ATP and the CLI use; eden-memory's tool set, typed.

    Reads never cross scopes: ``recall``/``search*``/``list_memories`` take a full
    :class:`Scope`. Expired and forgotten memories are invisible to reads.
    """

    embedder: Embedder
    #: Survives a restart / is shared by processes (False for the in-memory fake).
    persistent: bool

    def remember(
        self,
        content: str,
        metadata: Mapping[str, Any] | None,
        scope: Scope,
        *,
        ttl_ms: int | None = None,
        memory_id: str | None = None,
        fence: Fence | None = None,
    ) -> str: ...

    def remember_many(
        self,
        items: Sequence[tuple[str, Mapping[str, Any] | None]],
        scope: Scope,
        *,
        ttl_ms: int | None = None,
        progress: Progress | None = None,
    ) -> list[str]: ...

    def get(self, memory_id: str) -> Memory: ...

    def edit(
        self,
        memory_id: str,
        *,
        content: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        ttl_ms: int | None = UNSET,
    ) -> Memory: ...

    def forget(self, memory_id: str) -> Memory: ...

    def forget_expired(self, scope: ScopeFilter | None = None) -> int: ...

    def prune(
        self,
        scope: ScopeFilter | None = None,
        *,
        keywords: str | None = None,
        expired_only: bool = False,
        dry_run: bool = True,
        hard: bool = False,
    ) -> PruneReport: ...

    # Scores: one calibrated scale in [0, 1] for all four (``_scoring``); 0.45 means "relevant".
    # ``filters``: exact equality on top-level metadata keys, as in ``list_memories``.
    def recall(
        self, query: str, scope: Scope, limit: int = 5, filters: Mapping[str, Any] | None = None
    ) -> list[Hit]: ...

    def search(
        self, query: str, scope: Scope, limit: int = 10, filters: Mapping[str, Any] | None = None
    ) -> list[Hit]: ...

    def search_semantic(
        self, query: str, scope: Scope, filters: Mapping[str, Any] | None = None, limit: int = 5
    ) -> list[Hit]: ...

    # ``rerank``: the opt-in late-interaction stage over the top candidates (``_rerank``).
    def search_hybrid(
        self, query: str, scope: Scope, filters: Mapping[str, Any] | None = None, limit: int = 5,
        *, rerank: bool = False,
    ) -> list[Hit]: ...

    def list_memories(
        self, scope: Scope, filters: Mapping[str, Any] | None = None, limit: int = 1000
    ) -> list[Memory]: ...

    def scan(self, scope: ScopeFilter, filters: Mapping[str, Any] | None = None) -> list[Memory]:
        """Live memories of a partial scope (e.g. a whole org/workspace), oldest first, unbounded."""
        ...

    # Leases with fencing tokens (see ``_leases``): the coordination primitive ATP claims use.
    def acquire_lease(self, key: str, holder: str, ttl_ms: int) -> Lease: ...

    def release_lease(self, key: str, token: int) -> Lease: ...

    def get_lease(self, key: str) -> Lease | None: ...

    def leases(self, prefix: str = "") -> list[Lease]: ...

    def health(self) -> Health: ...

    def vacuum(self) -> dict[str, Any]: ...

    def reindex(self, *, progress: Progress | None = None) -> int: ...

    def dump(self, scope: ScopeFilter | None = None) -> Iterator[Memory]: ...

    def stored_vectors(self, ids: Sequence[str], *, hashes: Mapping[str, str] | None = None) -> dict[str, np.ndarray]:
        """The current embedder's vectors of these memories (those whose vector matches their content).

        ``hashes`` (``id -> content hash``): only a vector computed from that content, so a caller
        that read the contents earlier never gets the vector of an edit made since."""
        ...

    def load(
        self,
        memories: Iterable[Memory],
        *,
        progress: Progress | None = None,
        vectors: Mapping[str, np.ndarray] | None = None,
    ) -> tuple[int, int]:
        """Insert exported memories keeping ids and times; ``vectors[id]`` (this store's model) skips embedding."""
        ...

    def close(self) -> None: ...


def default_db_path(agents_root: str | os.PathLike[str] | None = None) -> Path:
    """``$ATOMIC_AGENTS_DB``, else ``<agents_root>/_memory/memory.db`` (root: ``$ATOMIC_AGENTS_ROOT`` or ``./agents``)."""
    env = os.environ.get("ATOMIC_AGENTS_DB")
    if env:
        return Path(env)
    root = Path(agents_root) if agents_root is not None else Path(os.environ.get("ATOMIC_AGENTS_ROOT") or "agents")
    return root / "_memory" / "memory.db"


def open_store(
    path: str | os.PathLike[str] | None = None,
    *,
    agents_root: str | os.PathLike[str] | None = None,
    embedder: Embedder | None = None,
    durable: bool = True,
    ann_build: str | None = None,
) -> MemoryStore:
    """Open (creating if needed) the store ``path`` names, with the default embedder.

    A ``postgresql://`` DSN (argument or ``$ATOMIC_AGENTS_DB``) opens the shared
    PostgreSQL store (the ``postgres`` extra); anything else is a SQLite file.
    ``durable=True`` (the default): a write that returned survives a power cut
    (SQLite ``synchronous=FULL``; PostgreSQL ``synchronous_commit`` as the server
    sets it). ``durable=False``: faster writes that survive a crashed process but
    may lose the last commits on power loss (SQLite ``NORMAL``; PostgreSQL
    ``synchronous_commit=off`` for this store's sessions).
    ``ann_build`` (SQLite): ``"background"`` (default) builds a missing or stale ANN
    graph in a thread while searches scan exactly; ``"off"`` never builds one in this
    process (short-lived ones: the CLI), see ``SQLiteMemoryStore``.

    >>> store = open_store("/tmp/m.db")  # doctest: +SKIP
    >>> store = open_store("postgresql://agents@db.internal/memory")  # doctest: +SKIP
    >>> store.remember("Deploy went green", {"goal_id": "g1"}, Scope("builder", "alice"))  # doctest: +SKIP
    '3f0c...'
    """
    emb: Embedder = embedder if embedder is not None else default_embedder()
    target = os.fspath(path) if path is not None else os.environ.get("ATOMIC_AGENTS_DB")
    if isinstance(target, str) and _is_dsn(target):
        from ._postgres import PostgresMemoryStore

        return PostgresMemoryStore(target, embedder=emb, durable=durable)
    from ._sqlite import SQLiteMemoryStore

    db = _checked_db_path(path, agents_root)
    return SQLiteMemoryStore(db, embedder=emb, durable=durable, ann_build=ann_build)


def _is_dsn(target: str) -> bool:
    scheme, sep, _ = target.partition("://")
    return bool(sep) and scheme.lower() in ("postgresql", "postgres")


def _checked_db_path(path: str | os.PathLike[str] | None, agents_root: str | os.PathLike[str] | None) -> Path:
    """Where the store lives; folders are never made as a side effect, except ``<root>/_memory/``.

    A file named by the caller (``path``, ``--db``, ``$ATOMIC_AGENTS_DB``) must be in an existing
    folder: a typo must not grow a tree of folders. The default location needs an existing vault
    root: opening a store must not create ``./agents``.
    """
    from ..exceptions import NotFoundError, ValidationError

    explicit = Path(path) if path is not None else (Path(os.environ["ATOMIC_AGENTS_DB"]) if os.environ.get("ATOMIC_AGENTS_DB") else None)
    if explicit is not None:
        if not explicit.parent.is_dir():
            raise ValidationError(f"folder {explicit.parent} does not exist (the store file's folder must exist)",
                                  path=explicit, field="db", rule="parent-exists")
        return explicit
    db = default_db_path(agents_root)
    root = db.parent.parent
    if not root.is_dir():
        raise NotFoundError(f"vault root {root} does not exist: create it (atomic-agents vault init AGENT), "
                            "or name one with --agents-root / ATOMIC_AGENTS_ROOT, or a store file with --db", path=root)
    # Inside the vault the store follows the vault's rule: nothing is written outside the root,
    # whether _memory/ or the database file (or its -wal/-shm companions) is a symlink that leads out.
    from .._io import make_dirs, resolve_inside

    make_dirs(db.parent, root=root)
    for f in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
        if f.is_symlink():
            resolve_inside(root, f, what="the memory store file")
    return db


