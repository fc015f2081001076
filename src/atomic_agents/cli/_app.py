"""The typer app of the ``atomic-agents`` command: every command group, attached to the root.

Built on first use (``atomic_agents.cli.app``, or :func:`atomic_agents.cli.main`
for any command but a plain ``serve``), so that a spawned MCP server never
imports typer (see ``mcp/_entry.py``).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from .. import __version__
from ._common import RootOption, remember_group_options

__all__ = ["app", "build", "group_of"]

#: The command groups, each in its own module, imported only by an app that has them.
GROUPS = ("vault", "memory", "team")


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


def build(only: str | None = None) -> typer.Typer:
    """The app; ``only`` (a group name) builds the root with that group alone (see :func:`group_of`)."""
    root = typer.Typer(
        name="atomic-agents",
        help="Local-first memory and coordination substrate for AI agents.",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        callback=_root,
    )
    if only in (None, "vault"):
        from ._vault import app as vault_app

        root.add_typer(vault_app, name="vault")
    if only in (None, "memory"):
        from ._memory import app as memory_app

        root.add_typer(memory_app, name="memory")
    if only in (None, "team"):
        from ._team import app as team_app

        root.add_typer(team_app, name="team")
    if only is None:
        from ._context import register as register_context
        from ._daemon import register as register_daemon
        from ._migrate import register as register_migrate
        from ._serve import register as register_serve

        register_migrate(root)
        register_serve(root)
        register_context(root)
        register_daemon(root)
    return root


def group_of(args: list[str]) -> str | None:
    """The group a command line runs (``vault``, ``memory``, ``team``), past the root's own options; else ``None``.

    A command in a group needs only that group's module: ``vault list`` never imports
    the memory or team commands, nor builds their click commands (~30 ms). Anything
    else (root help, a top-level command, a typo) gets the full app and its messages.
    """
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--agents-root":
            i += 2
            continue
        if a.startswith("--agents-root="):
            i += 1
            continue
        return a if a in GROUPS else None
    return None


_app: typer.Typer | None = None
if TYPE_CHECKING:
    app: typer.Typer  # the full app, built on first use by __getattr__ below


def __getattr__(name: str) -> typer.Typer:
    global _app
    if name == "app":  # the full app, built on first use
        if _app is None:
            _app = build()
        return _app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
