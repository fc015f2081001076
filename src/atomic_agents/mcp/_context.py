"""What the tools share for the life of the server: the store (opened once, on first use), the vault, the identity.

The store and the model are the expensive parts, and the reason a long-lived
server is the fast path. Neither loads before ``initialize`` is answered. The
store opens on the first tool call that needs it. The model starts loading on a
thread of its own at the client's first request after ``initialize``
(:meth:`Services.warm_in_background`), while the agent is still thinking about
its first call: its first recall then finds the sessions built (the quick one
and the folded one, see ``memory/_embed.py``) instead of building them.
``ATOMIC_AGENTS_MCP_WARM=0`` keeps the model lazy (a server used only for vault
tools then never loads it). All tool calls run on one worker thread (see
``_server``), so the SQLite connection is only ever used from the thread that
opened it.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..atp import Ledger
    from ..memory import BaseEmbedder, MemoryStore
    from ..vault import Vault
    from ._tools import Args

__all__ = ["WARM_ENV", "ServerConfig", "Services"]

#: ``0`` (or ``false``, ``no``, ``off``): the server does not load the model before a tool needs it.
WARM_ENV = "ATOMIC_AGENTS_MCP_WARM"

log = logging.getLogger("atomic_agents.mcp")


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
        self._embedder: BaseEmbedder | None = None
        self._embedder_lock = threading.Lock()
        self._warming: threading.Thread | None = None
        #: read once: every call and resource read asks for the warm-up
        self._warm_on = os.environ.get(WARM_ENV, "").strip().lower() not in ("0", "false", "no", "off")

    def embedder(self) -> BaseEmbedder:
        """The store's embedder, made once (from any thread; the object reads no model file yet)."""
        with self._embedder_lock:
            if self._embedder is None:
                from ..memory import default_embedder, embedder_from_name

                self._embedder = embedder_from_name(self.config.embedder) if self.config.embedder else default_embedder()
            return self._embedder

    def store(self) -> MemoryStore:
        if self._store is None:
            from ..memory import open_store

            self._store = open_store(self.config.db, agents_root=self.config.agents_root, embedder=self.embedder())
        return self._store

    def warm_in_background(self) -> threading.Thread | None:
        """Start loading the model on a daemon thread, once per server (``None`` if ``ATOMIC_AGENTS_MCP_WARM=0``).

        The embedder is thread-safe (the quick session is built once, under its lock; the folded one
        once, outside it), so a tool call that embeds meanwhile waits for the quick session at most,
        and runs on it until the folded one is adopted.
        A model that cannot load is not reported here: the tool that needs it gets the typed error.
        """
        if not self._warm_on or self._warming is not None:
            return self._warming
        with self._embedder_lock:
            if self._warming is None:
                self._warming = threading.Thread(target=self._warm, name="atomic-agents-mcp-warm", daemon=True)
                self._warming.start()
            return self._warming

    def wait_warm(self, timeout: float = 60.0) -> None:
        """Wait for the warm-up thread, if one runs: the interpreter must not exit while it is inside
        onnxruntime building a session (ORT's static destructors would run beside it and abort the
        process). Building takes about a second; the server calls this as it shuts down."""
        thread = self._warming
        if thread is not None:
            thread.join(timeout)

    def _warm(self) -> None:
        try:
            self.embedder().warm()
        except Exception as exc:  # noqa: BLE001 - the first tool call that embeds reports it, typed
            log.info("the embedding model did not warm up: %s", type(exc).__name__)

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
