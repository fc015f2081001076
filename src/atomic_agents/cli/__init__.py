"""The ``atomic-agents`` command line: a thin layer over the library.

Each command group lives in its own module; :func:`main` turns every
:class:`~atomic_agents.AtomicAgentsError` into a one-line message and exit code 1,
and usage mistakes into exit code 2, never a traceback. When the command's
output is JSON (``--json``, and every memory command) the error is also a JSON
object on stdout.
"""

from __future__ import annotations

import sys
TYPE_CHECKING = False  # typing stays unimported: a command answered by the daemon never loads it
if TYPE_CHECKING:
    from typing import Any

__all__ = ["app", "main"]


def __getattr__(name: str) -> Any:
    if name == "app":  # the typer app (cli/_app.py), built on first use
        from ._app import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``atomic-agents`` script (the error boundary is :func:`._common.run`).

    Click's standalone mode handles usage errors (exit 2) and help; anything
    derived from :class:`AtomicAgentsError`, and ``OSError``, becomes one line on stderr, exit 1.
    A plain ``serve`` command line skips the typer app (``mcp/_entry.py``): a
    spawned MCP server answers ``initialize`` sooner.
    """
    args = sys.argv[1:] if argv is None else list(argv)
    if "serve" in args:
        from ..mcp._entry import lean_serve

        if lean_serve(args):
            return
    if "memory" in args[:3] or "context" in args[:3] or "search" in args[:6]:  # a warm daemon for this
        # database answers memory commands, `context` and `vault search` without typer (_daemon_client.py)
        from .._daemon_client import try_daemon

        code = try_daemon(args)
        if code is not None:
            if code:
                sys.exit(code)
            return
    from ._app import build, group_of
    from ._common import run

    run(build(group_of(args), args), args, prog_name="atomic-agents")
