"""`atomic-agents vault ...`."""

from __future__ import annotations

import typer

app = typer.Typer(help="Atomic Agent vaults: notes, wiki, INDEX, journal, logs, lint.", no_args_is_help=True)
