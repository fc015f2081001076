"""The lean client's argv parser knows which options of the routed commands take no value.

It is hand-kept (no typer on the warm path); an option it thinks takes a value swallows
the next token (``--rerank --db other.db`` read ``--db`` as the value of ``--rerank``) and
the line goes to another database's daemon. Checked against the full CLI's click commands.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from atomic_agents import _daemon_client as client


def _flags(cmd: Any) -> set[str]:
    out: set[str] = set()
    for p in cmd.params:
        if getattr(p, "is_flag", False) or getattr(p, "count", False):
            out |= set(p.opts) | set(getattr(p, "secondary_opts", ()))
    return out - {"--help"}


def test_every_flag_of_a_routed_command_is_known_to_the_lean_parser() -> None:
    from typer.main import get_command

    from atomic_agents.cli._app import app

    root = get_command(app)
    memory = root.commands["memory"]
    for name in sorted(client.ROUTED):
        assert _flags(memory.commands[name]) <= client._FLAGS, f"memory {name}"
    assert _flags(root.commands["context"]) <= client.OTHER["context"], "context"
    assert _flags(root.commands["vault"].commands["search"]) <= client.OTHER["vault search"], "vault search"


def test_search_hybrid_rerank_then_db_resolves_that_db(tmp_path: Path) -> None:
    args = ["memory", "search-hybrid", "--rerank", "--db", "other.db", "--agent-id", "a", "--user-id", "u", "lunch"]
    got = client.resolve_db(args, {}, str(tmp_path))
    assert got == ("search-hybrid", os.path.realpath(tmp_path / "other.db"))


def test_an_empty_agents_root_resolves_as_the_full_cli_does(tmp_path: Path) -> None:
    """``--agents-root ""`` is given (the full CLI: ``Path("")``, the working folder), not absent.

    The lean parser fell back to ``$ATOMIC_AGENTS_ROOT`` / ``./agents``: another database's daemon.
    """
    env = {"ATOMIC_AGENTS_ROOT": str(tmp_path / "elsewhere")}
    want = os.path.realpath(tmp_path / "_memory" / "memory.db")
    for args in (
        ["memory", "recall", "--agents-root", "", "--agent-id", "a", "--user-id", "u", "q"],
        ["memory", "--agents-root=", "recall", "--agent-id", "a", "--user-id", "u", "q"],
        ["--agents-root", "", "context", "bob"],
        ["vault", "--agents-root", "", "search", "bob", "q"],
    ):
        got = client.resolve_db(args, env, str(tmp_path))
        assert got is None or got[1] == want, args
