"""The ``atomic-agents`` command line: a thin layer over the library.

Each command group lives in its own module; :func:`main` turns every
:class:`~atomic_agents.AtomicAgentsError` into a one-line message and exit code 1,
and usage mistakes into exit code 2, never a traceback. When the command's
output is JSON (``--json``, and every memory command) the error is also a JSON
object on stdout.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from .. import __version__
from ._common import RootOption, remember_group_options, run
from ._context import register as register_context
from ._memory import app as memory_app
from ._migrate import register as register_migrate
from ._serve import register as register_serve
from ._team import app as team_app
from ._vault import app as vault_app

__all__ = ["app", "main"]


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


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``atomic-agents`` script (the error boundary is :func:`._common.run`).

    Click's standalone mode handles usage errors (exit 2) and help; anything
    derived from :class:`AtomicAgentsError`, and ``OSError``, becomes one line on stderr, exit 1.
    """
    run(app, argv, prog_name="atomic-agents")
