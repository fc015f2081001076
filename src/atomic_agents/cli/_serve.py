"""`atomic-agents serve`: the MCP server (stdio, or loopback streamable HTTP with a bearer token).

Parse, one library call (:func:`atomic_agents.mcp.serve_stdio` / ``serve_http``).
The SDK is imported only when the server starts, so ``--help`` stays fast.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Optional

import typer

from ._common import agents_root, db_path, option, shared

_HELP = ("Serve MCP on stdio (register it as eden-memory): eden_* memory tools, atp_* ledger tools, vault_* tools. "
         "--http HOST:PORT serves streamable HTTP on a loopback address instead, behind a bearer token.")  # fmt: skip


@shared("agents_root", "db", "embedder", "project")
def serve(
    http: Annotated[Optional[str], typer.Option("--http", metavar="HOST:PORT", show_default=False,
                    help="Streamable HTTP at http://HOST:PORT/mcp (loopback only unless --allow-remote); "
                         "token from ATOMIC_AGENTS_TOKEN, else generated and printed on stderr.")] = None,
    allow_remote: Annotated[bool, typer.Option("--allow-remote", help="Allow --http on a non-loopback address.")] = False,
    log_level: Annotated[str, typer.Option("--log-level", metavar="LEVEL", envvar="ATOMIC_AGENTS_LOG_LEVEL",
                         help="debug, info, warning or error (logs go to stderr).")] = "warning",
) -> None:  # fmt: skip
    from ..mcp import ServerConfig, serve_http, serve_stdio
    from ..mcp._server import configure_logging

    configure_logging(log_level)
    config = ServerConfig.from_env(db=db_path(), agents_root=agents_root() if option("agents_root") or os.environ.get("ATOMIC_AGENTS_ROOT") else None,
                                   embedder=option("embedder"), project=option("project") or Path("."))  # fmt: skip
    if http is None:
        serve_stdio(config)
    else:
        serve_http(config, http, allow_remote=allow_remote, log_level=log_level.lower())


def register(app: typer.Typer) -> None:
    """Attach the ``serve`` command to the root app."""
    app.command("serve", help=_HELP)(serve)
