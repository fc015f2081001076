"""The lean way into ``atomic-agents serve``: no typer, no CLI, only what the server needs.

A client that spawns the server waits for its answer to ``initialize``; every
module imported before it is paid for on each spawn. So ``atomic-agents serve``
(and ``python -m atomic_agents.mcp``) is parsed here with ``argparse`` before
the typer app is built. The typer command in ``cli/_serve.py`` stays the one
definition of the options' help: ``--help``, ``--version``, any option this
parser does not know, and any malformed command line fall back to it, so help
and usage errors (exit 2) are exactly the CLI's. ``tests/mcp/test_entry.py``
pins both parsers to the same options.

Both paths end in :func:`run_server`.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, NoReturn

__all__ = ["LOG_LEVELS", "OPTIONS", "lean_serve", "main", "run_server"]

LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
LOG_LEVEL_ENV = "ATOMIC_AGENTS_LOG_LEVEL"

#: The options of ``serve`` (value-taking unless listed in ``_FLAGS``); = the typer command's.
OPTIONS = ("--http", "--allow-remote", "--log-level", "--agents-root", "--db", "--embedder", "--project")
_FLAGS = ("--allow-remote",)
ROOT_OPTIONS = ("--agents-root",)  # the root group's options that may come before ``serve``


def run_server(
    *, http: str | None = None, allow_remote: bool = False, log_level: str = "warning", db: Path | str | None = None,
    agents_root: Path | None = None, embedder: str | None = None, project: Path | None = None,
) -> None:  # fmt: skip
    """Configure logging, resolve the config (options, then environment) and serve until the client goes."""
    from ..exceptions import ValidationError
    from ._context import ServerConfig

    level = log_level.lower()
    if level not in LOG_LEVELS:
        raise ValidationError(f"--log-level must be one of {', '.join(LOG_LEVELS)}", field="log_level", rule="choice")
    from ._sdk import import_server_modules

    import_server_modules()  # the SDK's server modules, without its client and MCPServer (see _sdk.py)
    from ._server import configure_logging

    configure_logging(level)
    config = ServerConfig.from_env(db=db, agents_root=agents_root, embedder=embedder, project=project or Path("."))
    if http is None:
        from ._server import serve_stdio

        serve_stdio(config)
    else:
        from ._http import serve_http

        serve_http(config, http, allow_remote=allow_remote, log_level=level)


class _Fallback(Exception):
    """This command line is not for the lean path (help, an unknown option, a malformed value)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _Fallback(message)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(add_help=False, allow_abbrev=False, exit_on_error=False)
    for opt in OPTIONS:
        dest = opt[2:].replace("-", "_")
        if opt in _FLAGS:
            p.add_argument(opt, dest=dest, action="store_true")
        else:
            p.add_argument(opt, dest=dest, default=None)
    return p


def _split_root(args: list[str]) -> tuple[dict[str, str], list[str]] | None:
    """``(root options, the arguments after serve)`` if the command line is ``[--agents-root X] serve ...``."""
    root: dict[str, str] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        name, eq, val = arg.partition("=")
        if name not in ROOT_OPTIONS:
            break
        if not eq:
            if i + 1 >= len(args) or args[i + 1].startswith("-"):
                return None
            i, val = i + 1, args[i + 1]
        root[name] = val
        i += 1
    if i >= len(args) or args[i] != "serve":
        return None
    return root, args[i + 1 :]


def parse(args: list[str]) -> dict[str, Any] | None:
    """The keyword arguments of :func:`run_server` for ``args``, or ``None``: let the typer CLI handle it."""
    split = _split_root(args)
    if split is None:
        return None
    root, rest = split
    if any(a in ("--help", "-h") or a == "--" for a in rest):
        return None
    try:
        ns = _parser().parse_args(rest)
    except (_Fallback, argparse.ArgumentError):
        return None
    for a in args:  # not UTF-8 on the command line: the CLI's usage error
        try:
            a.encode("utf-8")
        except UnicodeEncodeError:
            return None
    if ns.log_level is None:
        ns.log_level = os.environ.get(LOG_LEVEL_ENV) or "warning"
    given_root = ns.agents_root if ns.agents_root is not None else root.get("--agents-root")
    return {
        "http": ns.http,
        "allow_remote": ns.allow_remote,
        "log_level": ns.log_level,
        # as cli/_common.py: a DSN stays a string, a file is a Path; the environment is read by ServerConfig
        "db": None if ns.db is None else (ns.db if "://" in ns.db else Path(ns.db)),
        "agents_root": None if given_root is None else Path(given_root),
        "embedder": ns.embedder,
        "project": None if ns.project is None else Path(ns.project),
    }


def lean_serve(args: list[str]) -> bool:
    """Serve if ``args`` is a plain ``serve`` command line (then exit through the CLI's error rules); else ``False``."""
    kwargs = parse(args)
    if kwargs is None:
        return False
    from ..exceptions import AtomicAgentsError

    try:
        run_server(**kwargs)
    except AtomicAgentsError as exc:
        _fail(str(exc))
    except OSError as exc:
        from ..cli._common import _os_message

        _fail(_os_message(exc))
    except RecursionError:
        _fail("input nested too deeply")
    except KeyboardInterrupt:
        sys.exit(130)
    return True


def _fail(message: str) -> NoReturn:
    """As the CLI's boundary (``cli/_common.py``): one line on stderr, exit 1; stdout is the protocol's."""
    print(f"error: {message}", file=sys.stderr)
    sys.exit(1)


def main(argv: list[str] | None = None) -> None:
    """``python -m atomic_agents.mcp [OPTIONS]``: the same as ``atomic-agents serve [OPTIONS]``."""
    args = ["serve", *(sys.argv[1:] if argv is None else argv)]
    if not lean_serve(args):
        from ..cli import main as cli_main

        cli_main(args)
