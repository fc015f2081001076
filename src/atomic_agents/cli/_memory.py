"""`atomic-agents memory ...` (filled in by the memory-store issue)."""

from __future__ import annotations

import typer

app = typer.Typer(help="Durable memories with keyword, semantic and hybrid recall.", no_args_is_help=True)
