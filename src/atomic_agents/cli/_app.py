"""The typer app of the ``atomic-agents`` command: every command group, attached to the root.

Built on first use (``atomic_agents.cli.app``, or :func:`atomic_agents.cli.main`
for any command but a plain ``serve``), so that a spawned MCP server never
imports typer (see ``mcp/_entry.py``).
"""

from __future__ import annotations

import copy
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


def build(only: str | None = None, args: list[str] | None = None) -> typer.Typer:
    """The app; ``only`` (a group name) builds the root with that group alone (see :func:`group_of`).

    With ``args`` (the command line) as well, the group holds only the command it
    names (see :func:`only_named`).
    """
    root = typer.Typer(
        name="atomic-agents",
        help="Local-first memory and coordination substrate for AI agents.",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        callback=_root,
    )
    if only in (None, "vault"):
        from ._vault import app as vault_app

        root.add_typer(_narrow(vault_app, "vault", args), name="vault")
    if only in (None, "memory"):
        from ._memory import app as memory_app

        root.add_typer(_narrow(memory_app, "memory", args), name="memory")
    if only in (None, "team"):
        from ._team import app as team_app

        root.add_typer(_narrow(team_app, "team", args), name="team")
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


def _narrow(group: typer.Typer, name: str, args: list[str] | None) -> typer.Typer:
    if args is None:
        return group
    i = _skip_options(args, {"--agents-root": True})  # the root's option that takes a value (--version exits)
    return only_named(group, args[i + 1:]) if i < len(args) and args[i] == name else group


def _skip_options(args: list[str], flags: dict[str, bool]) -> int:
    """Index of the first argument past leading options in ``flags`` (flag -> takes a value: ``--f V`` or ``--f=V``)."""
    i = 0
    while i < len(args):
        head, eq, _ = args[i].partition("=")
        if head not in flags or (eq and not flags[head]):
            break
        i += 2 if flags[head] and not eq else 1
    return i


def _group_flags(group: typer.Typer) -> dict[str, bool]:
    """The long options a group's callback takes before its subcommand, as click will parse them."""
    callback = group.info.callback
    if not callable(callback):
        return {}
    params, _, _ = typer.main.get_params_convertors_ctx_param_name_from_function(callback)
    return {opt: not param.is_flag for param in params if isinstance(param, typer.core.TyperOption)
            for opt in (*param.opts, *param.secondary_opts) if opt.startswith("--")}


def only_named(group: typer.Typer, args: list[str]) -> typer.Typer:
    """A copy of ``group`` holding only the command (or subgroup, narrowed alike) that ``args`` name.

    Building a click command costs typer ~0.2 ms per command (signatures, type
    hints, parameters): ``vault list`` need not build the other 40. Only a command
    line that names one exactly, past the group's own options, is narrowed;
    anything else (``--help``, an option the group does not take, a typo, no
    command) gets the whole group and its messages. Narrowed or not, a command
    line answers the same (tests/cli/test_lazy_imports.py).
    """
    i = _skip_options(args, _group_flags(group))
    if i >= len(args) or args[i].startswith("-"):
        return group
    token = args[i]
    narrow = copy.copy(group)
    for info in group.registered_commands:
        if info.callback is not None and (info.name or typer.main.get_command_name(info.callback.__name__)) == token:
            narrow.registered_commands, narrow.registered_groups = [info], []
            return narrow
    for sub in group.registered_groups:
        if sub.name == token and isinstance(sub.typer_instance, typer.Typer):
            sub_narrow = copy.copy(sub)
            sub_narrow.typer_instance = only_named(sub.typer_instance, args[i + 1:])
            narrow.registered_commands, narrow.registered_groups = [], [sub_narrow]
            return narrow
    return group


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
