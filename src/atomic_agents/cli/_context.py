"""`atomic-agents context AGENT`: the system prompt the agent runs with (parse, one library call, render).

Markdown (the default) prints the prompt alone on stdout, so it pipes straight
into a model; what was included, dropped and why goes to stderr. ``--format
json`` prints every part with its source, token count and reason.
"""

from __future__ import annotations

import contextlib
import enum
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from ..exceptions import ValidationError
from ._common import agents_root, db_path, embedder_name, option, shared

__all__ = ["register"]


class Format(str, enum.Enum):
    markdown = "markdown"
    json = "json"


def context_command(
    agent: Annotated[str, typer.Argument(metavar="AGENT", help="Agent name.", show_default=False)],
    query: Annotated[Optional[str], typer.Option("--query", metavar="TEXT", help="Recall the notes most relevant to this.",
                                                 show_default=False)] = None,
    goal: Annotated[Optional[str], typer.Option("--goal", metavar="GOAL_ID", help="Add the goal's latest ATP records and "
                                                "the memories recalled for it.", show_default=False)] = None,
    budget: Annotated[Optional[int], typer.Option("--budget", metavar="TOKENS", help="Token budget (default: model.md's "
                                                  "'Max system prompt').", show_default=False)] = None,
    format_: Annotated[Format, typer.Option("--format", help="markdown (the prompt) or json (every part with its size and reason).")] = Format.markdown,
    limit: Annotated[int, typer.Option("--limit", metavar="N", help="At most this many recalled notes (1-100).")] = 8,
) -> None:
    """Assemble the agent's context: persona, tools.md rules, pinned notes, INDEX, recalled notes, goal records."""
    from ..bridge import context
    from ..vault import Vault

    if budget is not None and budget <= 0:
        raise ValidationError("must be a positive number of tokens", field="--budget", rule="positive")
    if not 1 <= limit <= 100:
        raise ValidationError("must be between 1 and 100", field="--limit", rule="range")
    ag = Vault(agents_root()).agent(agent)
    ag.require()
    identity: Any = None
    with contextlib.ExitStack() as stack:
        store: Any = None
        if query or goal:
            from ._daemon import command_store  # inside `atomic-agents daemon`: its warm store, when it is this one

            store = stack.enter_context(command_store(_open_store))
        if goal:
            from ..atp import resolve_identity

            identity = resolve_identity(option("project") or Path("."), org_id=option("org_id"),
                                        workspace_id=option("workspace_id"), agent_id=option("agent_id"),
                                        user_id=option("user_id"))
        ctx = context(ag, store, query=query, goal=goal, budget=budget, identity=identity, limit=limit)
    if format_ is Format.json:
        sys.stdout.write(ctx.to_json())
        return
    sys.stdout.write(ctx.text)
    for line in ctx.summary():
        print(line, file=sys.stderr)


def _open_store() -> Any:
    from ..memory import embedder_from_name, open_store

    return open_store(db_path(), agents_root=agents_root(), embedder=embedder_from_name(embedder_name()), ann_build="off")


def register(app: typer.Typer) -> None:
    app.command("context")(shared("agents_root", "db", "embedder", "project", "org_id", "workspace_id",
                                  "agent_id", "user_id")(context_command))
