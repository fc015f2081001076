"""``python -m atomic_agents.mcp [OPTIONS]``: the MCP server, as ``atomic-agents serve [OPTIONS]``."""

from ._entry import main

main()
