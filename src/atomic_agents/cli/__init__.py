"""The ``atomic-agents`` command line: a thin layer over the library.

Each command group lives in its own module; :func:`main` turns every
:class:`~atomic_agents.AtomicAgentsError` into a one-line message and exit code 1,
and usage mistakes into exit code 2, never a traceback.
"""

from __future__ import annotations

import json
import sys

import typer

from ..exceptions import AtomicAgentsError, ValidationError
from ._memory import app as memory_app
from ._migrate import register as register_migrate
from ._team import app as team_app
from ._vault import app as vault_app

__all__ = ["app", "main"]

app = typer.Typer(
    name="atomic-agents",
    help="Local-first memory and coordination substrate for AI agents.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.add_typer(vault_app, name="vault")
app.add_typer(memory_app, name="memory")
app.add_typer(team_app, name="team")
register_migrate(app)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``atomic-agents`` script.

    Click's standalone mode handles usage errors (exit 2) and help; anything
    derived from :class:`AtomicAgentsError` becomes one line on stderr, exit 1.
    """
    wants_json = "--json" in (argv if argv is not None else sys.argv[1:])
    try:
        app(args=argv, prog_name="atomic-agents", standalone_mode=True)
    except AtomicAgentsError as exc:
        if wants_json:
            payload: dict[str, object] = {"error": type(exc).__name__, "message": str(exc)}
            if isinstance(exc, ValidationError):
                payload.update({k: v for k, v in exc.to_dict().items() if v is not None})
            sys.stdout.write(json.dumps(payload) + "\n")
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)
