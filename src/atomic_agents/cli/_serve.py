"""`atomic-agents serve`: the MCP server (stdio, or loopback streamable HTTP with a bearer token).

Parse, one library call (:func:`atomic_agents.mcp._entry.run_server`). This typer
command is the definition of the options and their help; a plain ``serve``
command line is parsed before the typer app is built, by the lean parser in
``mcp/_entry.py`` (same options, pinned by ``tests/mcp/test_entry.py``), so a
spawned server answers ``initialize`` without importing typer or the CLI.
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
                         help="debug, info, warning, error or critical (logs go to stderr).")] = "warning",
) -> None:  # fmt: skip
    from ..mcp._entry import run_server

    run_server(http=http, allow_remote=allow_remote, log_level=log_level, db=db_path(),
               agents_root=agents_root() if option("agents_root") or os.environ.get("ATOMIC_AGENTS_ROOT") else None,
               embedder=option("embedder"), project=option("project") or Path("."))  # fmt: skip


def register(app: typer.Typer) -> None:
    """Attach the ``serve`` command to the root app."""
    app.command("serve", help=_HELP)(serve)
