"""Shared plumbing for the CLI: options, output rendering, error handling.

The CLI holds no logic: each command parses, makes one library call, renders.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

__all__ = ["AgentsRoot", "JsonFlag", "console", "emit", "err_console", "to_jsonable"]

DEFAULT_AGENTS_ROOT = Path("agents")

AgentsRoot = Annotated[
    Path,
    typer.Option(
        "--agents-root",
        envvar="ATOMIC_AGENTS_ROOT",
        help="Root folder of the vault (env ATOMIC_AGENTS_ROOT; default ./agents).",
        show_default=False,
    ),
]
JsonFlag = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout.")]

console = Console(highlight=False, soft_wrap=True)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)


def to_jsonable(obj: Any) -> Any:
    """Turn models, dataclasses, paths and dates into plain JSON values."""
    if hasattr(obj, "model_dump"):
        return to_jsonable(obj.model_dump(mode="json"))
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, (dt.date, dt.datetime)):
        return obj.isoformat()
    return obj


def emit(data: Any, as_json: bool, human: Callable[[], None] | None = None) -> None:
    """Print ``data`` as JSON when asked, else call the human renderer."""
    if as_json or human is None:
        sys.stdout.write(json.dumps(to_jsonable(data), ensure_ascii=False, indent=None) + "\n")
        sys.stdout.flush()
    else:
        human()
