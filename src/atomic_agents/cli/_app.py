"""The typer app of the ``atomic-agents`` command: every command group, attached to the root.

Built on first use (``atomic_agents.cli.app``, or :func:`atomic_agents.cli.main`
for any command but a plain ``serve``), so that a spawned MCP server never
imports typer (see ``mcp/_entry.py``).
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from .. import __version__
from ._common import RootOption, remember_group_options
from ._context import register as register_context
from ._daemon import register as register_daemon
from ._memory import app as memory_app
from ._migrate import register as register_migrate
from ._serve import register as register_serve
from ._team import app as team_app
from ._vault import app as vault_app

__all__ = ["app"]


def _show_version(wanted: bool) -> None:
    if wanted:
        sys.stdout.write(f"atomic-agents {__version__}\n")
        raise typer.Exit()


def _root(
    ctx: typer.Context,
    version: Annotated[
        bool, typer.Option("--version", help="Print the version and exit.", is_eager=True, callback=_show_version)
    ] = False,
    agents_root: RootOption = None,
) -> None:
    """Local-first memory and coordination substrate for AI agents."""
    remember_group_options(ctx, agents_root=agents_root)


app = typer.Typer(
    name="atomic-agents",
    help="Local-first memory and coordination substrate for AI agents.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    callback=_root,
)
app.add_typer(vault_app, name="vault")
app.add_typer(memory_app, name="memory")
app.add_typer(team_app, name="team")
register_migrate(app)
register_serve(app)
register_context(app)
register_daemon(app)

