"""The MCP server: eden-memory compatible memory tools, ATP ledger tools and vault tools.

``atomic-agents serve`` runs it over stdio (or ``--http 127.0.0.1:PORT`` with a
bearer token). Registered under the name ``eden-memory``, its ``eden_*`` tools
answer ATP's agent prompts (``mcp__eden-memory__eden_remember`` ...) unchanged.

>>> from atomic_agents.mcp import ServerConfig, serve_stdio
>>> serve_stdio(ServerConfig.from_env(agents_root=Path("agents")))   # doctest: +SKIP

Importing this package loads the MCP SDK only when a server is built
(:func:`serve_stdio`, :func:`serve_http`); the store opens on the first tool call
that needs it, and the model loads on a thread of its own from the client's first
request (``ATOMIC_AGENTS_MCP_WARM=0``: on the first call that embeds).
"""

from __future__ import annotations

from typing import Any

from ._context import ServerConfig, Services
from ._tools import Args, ToolSpec

__all__ = ["Args", "ServerConfig", "Services", "ToolSpec", "all_tools", "serve_http", "serve_stdio"]


def all_tools() -> tuple[ToolSpec, ...]:
    """Every tool the server lists, in order (eden, ATP, vault)."""
    from ._atp import ATP_TOOLS
    from ._eden import EDEN_TOOLS
    from ._vault import VAULT_TOOLS

    return (*EDEN_TOOLS, *ATP_TOOLS, *VAULT_TOOLS)


def serve_stdio(config: ServerConfig) -> None:
    """Serve over stdin/stdout (see :mod:`._server`)."""
    from ._server import serve_stdio as run

    run(config)


def serve_http(config: ServerConfig, address: str, *, allow_remote: bool = False, **kwargs: Any) -> None:
    """Serve streamable HTTP at ``http://ADDRESS/mcp`` behind a bearer token (see :mod:`._http`)."""
    from ._http import serve_http as run

    run(config, address, allow_remote=allow_remote, **kwargs)
