"""One `atomic-agents serve` subprocess per test module (fake embedder), on a temporary vault and store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ._client import McpClient, serve_command, server_env

CHARTER = """# Billing team charter
Roles: dispatcher, builder, verifier and archivist.
The runtime role is not active; live operations need the owner's approval.
"""


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project folder holding a vault (agent `finance`), a store file and an ATP charter."""
    from atomic_agents.vault import Vault

    base = tmp_path_factory.mktemp("mcp")
    (base / "agents").mkdir()
    Vault(base / "agents").init_agent("finance", title="Finance Coach")
    claude = base / ".claude"
    claude.mkdir()
    (claude / "agentic-team-charter.md").write_text(CHARTER, encoding="utf-8")
    (claude / "agentic-team-config.yaml").write_text("active_roles: [dispatcher, builder, verifier, archivist]\n", encoding="utf-8")
    return base


@pytest.fixture(scope="module")
def server(workdir: Path) -> Iterator[McpClient]:
    env = server_env(ATOMIC_AGENTS_EMBEDDER="hashing", EDEN_ORG_ID="acme", EDEN_WORKSPACE_ID="acme/web")
    args = serve_command("--agents-root", str(workdir / "agents"), "--db", str(workdir / "memory.db"), "--project", str(workdir))
    with McpClient(args, env, workdir, workdir / f"stderr-{id(env)}.log") as client:
        yield client
