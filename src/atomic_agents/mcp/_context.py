"""What the tools share for the life of the server: the store (opened once, on first use), the vault, the identity.

The store and the model are the expensive parts, and the reason a long-lived
server is the fast path: they load on the first tool call that needs them, not
at start, so ``initialize`` is answered at once. All tool calls run on one
worker thread (see ``_server``), so the SQLite connection is only ever used from
the thread that opened it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..atp import Ledger
    from ..memory import MemoryStore
    from ..vault import Vault
    from ._tools import Args

__all__ = ["ServerConfig", "Services"]


@dataclass(frozen=True)
class ServerConfig:
    """Where the server's data lives, resolved once at start.

    ``db``: ``--db``, else ``$ATOMIC_AGENTS_DB``, else ``$EDEN_DB``, else the store's
    default (``<agents_root>/_memory/memory.db``). ``embedder``: a name for
    :func:`~atomic_agents.memory.embedder_from_name` (``None``: the default model,
    or ``$ATOMIC_AGENTS_EMBEDDER``).
    """

    db: Path | str | None = None  # a file, or a postgresql:// DSN
    agents_root: Path = Path("agents")
    embedder: str | None = None
    project: Path = Path(".")

    @classmethod
    def from_env(
        cls, *, db: Path | str | None = None, agents_root: Path | None = None, embedder: str | None = None,
        project: Path | None = None,
    ) -> ServerConfig:  # fmt: skip
        env_db = os.environ.get("ATOMIC_AGENTS_DB") or os.environ.get("EDEN_DB")
        root = agents_root or Path(os.environ.get("ATOMIC_AGENTS_ROOT") or "agents")
        return cls(
            # a DSN stays a string (Path would fold its "//")
            db=db if db is not None else ((env_db if "://" in env_db else Path(env_db)) if env_db else None),
            agents_root=root,
            embedder=embedder or os.environ.get("ATOMIC_AGENTS_EMBEDDER") or None,
            project=project or Path("."),
        )


class Services:
    """The store, ledgers and vault the tools call; each made on first use."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self._store: MemoryStore | None = None

    def store(self) -> MemoryStore:
        if self._store is None:
            from ..memory import default_embedder, embedder_from_name, open_store

            # The embedder object is lazy: the model file is read on the first embed, not here.
            emb = embedder_from_name(self.config.embedder) if self.config.embedder else default_embedder()
            self._store = open_store(self.config.db, agents_root=self.config.agents_root, embedder=emb)
        return self._store

    def ledger(self, args: Args) -> Ledger:
        """A ledger as the identity the call names (tool arguments, else the team config, env, .env)."""
        from ..atp import Ledger, resolve_identity

        ident = resolve_identity(
            self.config.project,
            org_id=args.text("org_id"), workspace_id=args.text("workspace_id"),
            agent_id=args.text("agent_id"), user_id=args.text("user_id"),
        )  # fmt: skip
        return Ledger(self.store(), ident)

    def vault(self) -> Vault:
        """The vault, each write mirrored into the server's store (issue: every vault write keeps
        the mirror current); a failing store marks the mirror stale and never fails the write."""
        from ..vault import Vault

        def mirror(agent: Any, unit_type: str, paths: list[Any]) -> None:
            from ..bridge import MirrorHook

            MirrorHook(self.store())(agent, unit_type, paths)

        return Vault(self.config.agents_root, write_hooks=[mirror])

    def close(self) -> None:
        if self._store is not None:
            store, self._store = self._store, None
            store.close()

    def describe(self) -> dict[str, Any]:
        return {"db": str(self.config.db) if self.config.db else None, "agents_root": str(self.config.agents_root)}
