"""``python -m atomic_agents``: the ``atomic-agents`` command."""

from .cli import main

main()
