"""Shared plumbing for the CLI: group-wide options, choices, output rendering.

The CLI holds no logic: each command parses, makes one library call, renders.

Group-wide options (``--agents-root``, ``--db``, ``--json``, ``--embedder``) are
declared once, in :data:`SHARED`. A command asks for them with :func:`shared`,
which adds them to its signature; the groups declare the location options
too, so both ``atomic-agents vault --agents-root X list`` and the older
``atomic-agents vault list --agents-root X`` work (the command's own flag wins,
then the group's, then the environment, then the default). Commands read the
values with :func:`agents_root`, :func:`db_path`, :func:`wants_json` and
:func:`embedder_name`.

This module imports nothing heavy: ``--help`` and ``--version`` must stay fast.
"""

from __future__ import annotations

import contextvars
import enum
import errno
import functools
import inspect
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Optional, TypeAlias

import typer

try:  # typer >= 0.2x vendors click: its exceptions, not the real click's
    from typer._click.exceptions import ClickException
    from typer._click.utils import _escape_control_characters
    from typer.exceptions import Abort
except ImportError:  # pragma: no cover - older typer on the real click
    from click.exceptions import Abort, ClickException  # type: ignore[assignment]
    from click.utils import _escape_control_characters  # type: ignore[no-redef]

from .._json import to_jsonable

__all__ = [
    "Confidence",
    "DEFAULT_AGENTS_ROOT",
    "Durability",
    "JsonFlag",
    "NoteKind",
    "NoteType",
    "RootOption",
    "RunStatus",
    "RunTrigger",
    "agents_root",
    "db_path",
    "durable",
    "embedder_name",
    "emit",
    "group_options",
    "option",
    "output_is_json",
    "remember_group_options",
    "run",
    "shared",
    "to_jsonable",
    "wants_json",
    "write_lines",
]

DEFAULT_AGENTS_ROOT = Path("agents")
ENV_ROOT = "ATOMIC_AGENTS_ROOT"


# ----------------------------------------------------------------- choices
# Help lists them and a wrong value is a usage error (exit 2). The values are the
# spec's (atomic_agents._format._models, ._log); kept as literals here so that
# `--help` does not import the pydantic models. tests/cli pins them equal.
class NoteType(str, enum.Enum):
    user = "user"
    feedback = "feedback"
    project = "project"
    decision = "decision"
    reference = "reference"


class NoteKind(str, enum.Enum):
    """``vault new --type``: a note type, or ``wiki`` for a wiki page."""

    user = "user"
    feedback = "feedback"
    project = "project"
    decision = "decision"
    reference = "reference"
    wiki = "wiki"
    wiki_page = "wiki_page"


class Confidence(str, enum.Enum):
    high = "high"
    medium = "medium"
    low = "low"


class RunStatus(str, enum.Enum):
    ok = "ok"
    error = "error"
    skipped = "skipped"


class Durability(str, enum.Enum):
    """``--durability``: ``full`` fsyncs every commit (survives a power cut); ``normal`` survives a crashed process."""

    full = "full"
    normal = "normal"


class RunTrigger(str, enum.Enum):
    cron = "cron"
    skill = "skill"
    api = "api"
    manual = "manual"


def value(choice: enum.Enum | None) -> Any:
    """The plain value of a choice (or ``None``)."""
    return None if choice is None else choice.value


# ------------------------------------------------------- group-wide options
JsonFlag = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout.")]

_ROOT_OPT = Annotated[
    Optional[Path],
    typer.Option(
        "--agents-root",
        metavar="DIR",
        help="Root folder of the vault (env ATOMIC_AGENTS_ROOT; default ./agents).",
        show_default=False,
    ),
]
RootOption: TypeAlias = _ROOT_OPT
_DB_OPT = Annotated[
    Optional[str],
    typer.Option(
        "--db",
        metavar="FILE|DSN",
        help="SQLite file of the memory store (its folder must exist), or a postgresql:// DSN of a shared store "
        "(env ATOMIC_AGENTS_DB; default <agents-root>/_memory/memory.db).",
        show_default=False,
    ),
]
_EMBEDDER_OPT = Annotated[
    Optional[str],
    typer.Option(
        "--embedder",
        metavar="NAME",
        help="minilm (the local model, default) or hashing (a test fake) (env ATOMIC_AGENTS_EMBEDDER).",
        show_default=False,
    ),
]

_DURABILITY_OPT = Annotated[
    Optional[Durability],
    typer.Option(
        "--durability",
        help="full (default: every write is on disk before the command returns, even across a power cut) or "
        "normal (faster; a crashed process loses nothing, a power cut may lose the last writes) "
        "(env ATOMIC_AGENTS_DURABILITY).",
        show_default=False,
        case_sensitive=False,
    ),
]


def _id_opt(flag: str, help: str) -> Any:
    return Annotated[Optional[str], typer.Option(flag, metavar="ID", help=help, show_default=False)]


#: name -> (annotation, default). The one declaration of each group-wide option.
SHARED: dict[str, tuple[Any, Any]] = {
    "agents_root": (_ROOT_OPT, None),
    "db": (_DB_OPT, None),
    "json": (JsonFlag, False),
    "embedder": (_EMBEDDER_OPT, None),
    "durability": (_DURABILITY_OPT, None),
    # The ATP identity (team commands); unset ones resolve from the team config, env, .env.
    "project": (Annotated[Optional[Path], typer.Option("--project", metavar="DIR", show_default=False,
                help="Project folder holding .claude/ and .env (default: the current folder).")], None),
    "org_id": (_id_opt("--org-id", "Org (else the team config, EDEN_ORG_ID, .env)."), None),
    "workspace_id": (_id_opt("--workspace-id", "Workspace, may contain '/' (else the team config, EDEN_WORKSPACE_ID, .env)."), None),
    "agent_id": (_id_opt("--agent-id", "Writer's agent id (else EDEN_AGENT_ID, else claude-code-cli)."), None),
    "user_id": (_id_opt("--user-id", "User id (default: the OS user)."), None),
}
_LOCATION = ("agents_root", "db")
_META_KEY = "atomic_agents.shared"

_current: contextvars.ContextVar[dict[str, Any]] = contextvars.ContextVar("atomic_agents_cli_shared")
_last_json = [False]  # did the command that ran (or failed) print JSON? read by main()


def shared(*names: str, always_json: bool = False) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Give a command the group-wide options ``names`` (see :data:`SHARED`).

    ``always_json``: the command prints JSON whatever ``--json`` says (the memory
    group), so its errors go to stdout as JSON objects too.
    """

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        return _SharedCommand(fn, names, always_json)

    return decorate


class _SharedCommand:
    """A command with the group-wide options added to its signature (see :func:`shared`).

    The signature is worked out when typer first asks for it, which it does only
    for the commands it builds: a command line that runs ``vault list`` does not
    evaluate the annotations of the group's 40 other commands (~2 ms).
    """

    def __init__(self, fn: Callable[..., Any], names: tuple[str, ...], always_json: bool) -> None:
        # everything functools.wraps copies but __annotations__, which is worked out below
        functools.update_wrapper(self, fn, assigned=("__module__", "__name__", "__qualname__", "__doc__"))
        self._fn = fn
        self._names = names
        self._always_json = always_json
        self._signature: inspect.Signature | None = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        ctx: typer.Context = kwargs.pop("aa_ctx")
        given = {n: kwargs.pop(f"aa_{n}") for n in self._names}
        values = dict(_group_values(ctx))
        values.update({n: v for n, v in given.items() if v is not None})
        values["json"] = self._always_json or bool(values.get("json"))
        _last_json[0] = values["json"]
        token = _current.set(values)
        try:
            return self._fn(*args, **kwargs)
        finally:
            _current.reset(token)

    @property
    def __signature__(self) -> inspect.Signature:
        if self._signature is None:
            sig = inspect.signature(self._fn, eval_str=True)
            extra = [
                inspect.Parameter(f"aa_{n}", inspect.Parameter.KEYWORD_ONLY, annotation=SHARED[n][0], default=SHARED[n][1])
                for n in self._names
            ]
            ctx_param = inspect.Parameter("aa_ctx", inspect.Parameter.KEYWORD_ONLY, annotation=typer.Context)
            params = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) if p.kind is inspect.Parameter.VAR_KEYWORD else p
                      for p in sig.parameters.values()]
            self._signature = sig.replace(parameters=[*params, *extra, ctx_param])
        return self._signature

    @property
    def __annotations__(self) -> dict[str, Any]:  # type: ignore[override]
        return {p.name: p.annotation for p in self.__signature__.parameters.values()}


def _group_values(ctx: Any) -> dict[str, Any]:
    return dict(ctx.meta.get(_META_KEY, {}))


def group_options(*names: str) -> Callable[..., None]:
    """A group callback accepting the location options ``names`` before the subcommand."""
    for n in names:
        if n not in _LOCATION:
            raise ValueError(n)

    def callback(aa_ctx: typer.Context, **kwargs: Any) -> None:
        remember_group_options(aa_ctx, **kwargs)

    params = [inspect.Parameter("aa_ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context)]
    params += [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, annotation=SHARED[n][0], default=SHARED[n][1])
               for n in names]
    callback.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    callback.__annotations__ = {p.name: p.annotation for p in params}
    return callback


def remember_group_options(ctx: Any, **given: Any) -> None:
    """Keep location options given before a subcommand, for the command to read (a later group's value wins)."""
    ctx.meta.setdefault(_META_KEY, {}).update({n: v for n, v in given.items() if v is not None})


def _values() -> dict[str, Any]:
    return _current.get({})


def agents_root() -> Path:
    """``--agents-root`` (command, then group), else ``$ATOMIC_AGENTS_ROOT``, else ``./agents``."""
    given = _values().get("agents_root")
    if given is not None:
        return Path(given)
    env = os.environ.get(ENV_ROOT)
    return Path(env) if env else DEFAULT_AGENTS_ROOT


def db_path() -> Path | str | None:
    """``--db`` if given (a DSN stays a string; else the library resolves ``$ATOMIC_AGENTS_DB`` or the default)."""
    given = _values().get("db")
    if given is None:
        return None
    return given if "://" in str(given) else Path(given)


def option(name: str) -> Any:
    """The value of group-wide option ``name`` for the running command (``None`` if not given)."""
    return _values().get(name)


def embedder_name() -> str:
    return _values().get("embedder") or os.environ.get("ATOMIC_AGENTS_EMBEDDER") or "minilm"


def durable() -> bool:
    """``--durability`` (else ``$ATOMIC_AGENTS_DURABILITY``, else full): whether every commit is fsynced."""
    given = _values().get("durability")
    name = value(given) if given is not None else (os.environ.get("ATOMIC_AGENTS_DURABILITY") or "full").strip().lower()
    if name not in ("full", "normal"):
        from ..exceptions import ValidationError

        raise ValidationError("ATOMIC_AGENTS_DURABILITY must be full or normal", field="durability", rule="choice")
    return name == "full"


def wants_json() -> bool:
    return bool(_values().get("json"))


def output_is_json(argv: list[str] | None = None) -> bool:
    """Whether the command that just ran (or failed) prints JSON, so its error object goes to stdout."""
    return _last_json[0] or "--json" in (argv if argv is not None else sys.argv[1:])


def reset_output_state() -> None:
    _last_json[0] = False


# ------------------------------------------------------------------ output


def dumps(data: Any) -> str:
    """JSON indented for a person at a terminal, one compact line when piped (jq, scripts)."""
    indent = 2 if sys.stdout.isatty() else None
    return json.dumps(to_jsonable(data), ensure_ascii=False, indent=indent)


def emit(data: Any, as_json: bool, human: Callable[[], None] | None = None) -> None:
    """Print ``data`` as JSON when asked, else call the human renderer."""
    if as_json or human is None:
        sys.stdout.write(dumps(data) + "\n")
        sys.stdout.flush()
    else:
        human()


def write_lines(lines: Any) -> None:
    """Plain text rows on stdout, one write (no rich: 10,000 rows must not cost seconds)."""
    text = "\n".join(lines)
    if text:
        sys.stdout.write(text + "\n")
    sys.stdout.flush()


def err_console() -> Any:
    """A rich console on stderr, for progress bars (imported only when one is shown)."""
    from rich.console import Console

    return Console(stderr=True, highlight=False, soft_wrap=True)


# ---------------------------------------------------------- error boundary
def _undecodable(args: list[str]) -> int | None:
    """1-based position of the first argument that was not UTF-8 on the command line (surrogate-escaped)."""
    for i, a in enumerate(args, 1):
        try:
            a.encode("utf-8")
        except UnicodeEncodeError:
            return i
    return None


def _os_message(exc: OSError) -> str:
    what = exc.strerror or str(exc)
    name = exc.filename
    if name is None:
        return what
    shown = os.fsdecode(name) if isinstance(name, bytes) else str(name)
    if len(shown) > 120:
        shown = shown[:60] + "..." + shown[-40:]
    hint = {
        errno.ENAMETOOLONG: " (a name is longer than the file system allows; choose a shorter topic or name)",
        errno.EROFS: " (the vault is on a read-only file system)",
        errno.EACCES: " (no permission)",
        errno.ENOTDIR: " (a path the command needs is a file, not a folder; check --agents-root/--db)",
    }.get(exc.errno or 0, "")
    return f"{shown}: {what}{hint}"


def _fail(exc: BaseException, message: str, args: list[str]) -> None:
    from ..exceptions import ValidationError

    if output_is_json(args):
        payload: dict[str, object] = {"error": type(exc).__name__, "message": message}
        if isinstance(exc, ValidationError):
            payload.update({k: v for k, v in exc.to_dict().items() if v is not None})
        sys.stdout.write(json.dumps(payload) + "\n")
        sys.stdout.flush()
    print(f"error: {message}", file=sys.stderr)
    sys.exit(1)


def _usage_error(exc: ClickException, args: list[str]) -> None:
    """Show a usage error as click's standalone mode does (exit 2), with every argument that looks
    like a secret hidden from its message: a refused value is never printed back."""
    from ..memory._secrets import find_secret  # only now: a command that runs never pays for it

    values = {a for a in args if find_secret(a) is not None}
    values |= {a.split("=", 1)[1] for a in args if a.startswith("-") and "=" in a and find_secret(a.split("=", 1)[1])}
    values |= {a[2:] for a in args if a.startswith("-") and not a.startswith("--") and len(a) > 2 and find_secret(a[2:])}
    for n in (2, 3):  # a secret split over words ("Authorization: Bearer <token>" unquoted): each of them
        for i in range(len(args) - n + 1):
            if find_secret(" ".join(args[i : i + n])) is not None:
                values.update(args[i : i + n])
    for value in sorted(values, key=len, reverse=True):  # as given, as repr() shows it, as click escapes it
        for shown in sorted({value, repr(value)[1:-1], _escape_control_characters(value)}, key=len, reverse=True):
            exc.message = exc.message.replace(shown, "<hidden: looks like a secret>")
    try:
        from typer import rich_utils

        rich_utils.rich_format_error(exc)
    except ImportError:  # pragma: no cover - typer without rich
        exc.show()
    sys.exit(exc.exit_code)


def _show_abort() -> None:
    try:
        from typer import rich_utils

        rich_utils.rich_abort_error()
    except ImportError:  # pragma: no cover - typer without rich
        print("Aborted!", file=sys.stderr)
    sys.exit(1)


def run(command: Callable[..., Any], argv: list[str] | None, *, prog_name: str) -> None:
    """The CLI's one error boundary: every entry point (``atomic-agents``, ``python -m
    atomic_agents.migrate``) runs through here.

    Usage mistakes are exit 2, shown as click's standalone mode shows them, except that an
    argument that looks like a secret is hidden from the message (``_usage_error``). Anything a user can
    cause that reaches here becomes one line on stderr (and, when the command's
    output is JSON, an error object on stdout) and exit 1, never a traceback: an
    :class:`~atomic_agents.AtomicAgentsError`, an ``OSError`` (a file where a
    folder should be, a read-only vault, a name longer than the file system
    allows), a ``RecursionError``. Arguments that are not UTF-8 are a usage
    error (exit 2) and are not echoed. Output never fails on a file name that is
    not UTF-8 (it is printed with backslash escapes).
    """
    from ..exceptions import AtomicAgentsError

    args = sys.argv[1:] if argv is None else list(argv)
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            try:
                reconfigure(errors="backslashreplace")
            except (ValueError, OSError):  # pragma: no cover - a closed or odd stream
                pass
    reset_output_state()
    if sys.stdout is None:  # started with stdout closed (`>&-`): nothing is done that could not be reported
        if sys.stderr is not None:
            print("error: standard output is closed; nothing was done", file=sys.stderr)
        sys.exit(1)
    bad = _undecodable(args)
    if bad is not None:
        print(f"error: argument {bad} is not valid UTF-8 (check the shell's encoding)", file=sys.stderr)
        sys.exit(2)
    try:
        # Not click's standalone mode: a usage error comes back here, so that a value it would
        # echo ("'<a pasted key>' is not a valid int") is hidden first when it looks like a secret.
        code = command(args=args, prog_name=prog_name, standalone_mode=False)
        sys.exit(code if isinstance(code, int) and not isinstance(code, bool) else 0)  # (an int: typer.Exit's code)
    except ClickException as exc:
        _usage_error(exc, args)
    except Abort:
        _show_abort()
    except AtomicAgentsError as exc:
        _fail(exc, str(exc), args)
    except OSError as exc:
        _fail(exc, _os_message(exc), args)
    except RecursionError as exc:
        _fail(exc, "input nested too deeply", args)
    except KeyboardInterrupt:
        sys.exit(130)
