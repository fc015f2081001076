"""``python -m atomic_agents.migrate``: the spec's migration runner command line.

The same command as ``atomic-agents migrate`` (see :mod:`atomic_agents.cli._migrate`)::

    python -m atomic_agents.migrate --status
    python -m atomic_agents.migrate --to v2 --dry-run
    python -m atomic_agents.migrate --to v2
    python -m atomic_agents.migrate --rollback 2026-08-12T143000_pre_v2_migration.tar.gz
"""

from __future__ import annotations

from .cli._migrate import main

__all__ = ["main"]

if __name__ == "__main__":
    main()
