"""`atomic-agents migrate ...` (filled in by the schema-migration issue)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Attach the ``migrate`` command to the root app."""
