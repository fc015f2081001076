"""`atomic-agents migrate` and `python -m atomic_agents.migrate`: one command, two entry points.

Parse, make one library call on :class:`FilesystemMigrationBackend`, render.
Exit codes (issue 4): 0 success; 1 refused or rolled back (and a dry run that
predicts either); 2 usage errors.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

try:  # typer >= 0.2x vendors click; its standalone mode only handles its own exceptions
    from typer._click.exceptions import UsageError
except ImportError:  # pragma: no cover - older typer on the real click
    from click.exceptions import UsageError  # type: ignore[assignment]

from ._common import agents_root, emit, err_console, run, shared, wants_json


class _Console:
    """rich, imported when the first human line is printed (never for --help or --json)."""

    def __init__(self) -> None:
        self._console: Any = None

    def print(self, *args: Any, **kwargs: Any) -> None:
        if self._console is None:
            from rich.console import Console

            self._console = Console(highlight=False, soft_wrap=True)
        self._console.print(*args, **kwargs)


console = _Console()

__all__ = ["main", "migrate", "register"]

_HELP = """Migrate the vault's notes and wiki pages to another schema_version.

Exactly one of --to, --status, --rollback, --list-snapshots. Always run
--to vN --dry-run before --to vN. Exit 0 on success, 1 when a migration is
refused or rolled back (or a dry run predicts it), 2 on usage errors.
"""


@shared("agents_root", "json")
def migrate(
    to: Annotated[str | None, typer.Option("--to", metavar="VERSION", help="Target schema version, e.g. v2.", show_default=False)] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show what would change per unit; write nothing.")] = False,
    status: Annotated[bool, typer.Option("--status", help="Which schema version is the vault at?")] = False,
    rollback: Annotated[
        str | None, typer.Option("--rollback", metavar="SNAPSHOT", help="Restore a snapshot (name from --list-snapshots).")
    ] = None,
    list_snapshots: Annotated[bool, typer.Option("--list-snapshots", help="List snapshots, oldest first.")] = False,
) -> None:
    from ..migration import FilesystemMigrationBackend, parse_target_version

    as_json = wants_json()

    actions = [a for a, on in (("--to", to is not None), ("--status", status), ("--rollback", rollback is not None),
                                ("--list-snapshots", list_snapshots)) if on]
    if len(actions) != 1:
        raise UsageError("give exactly one of --to, --status, --rollback, --list-snapshots"
                               + (f" (got {', '.join(actions)})" if actions else ""))
    if dry_run and to is None:
        raise UsageError("--dry-run goes with --to")
    backend = FilesystemMigrationBackend(agents_root())
    if status:
        st = backend.status()
        emit(st.to_dict(), as_json, lambda: _print_status(st))
        return
    if list_snapshots:
        refs = backend.list_snapshots()
        rows = [{"snapshot_id": r.snapshot_id, "bytes": backend.snapshot_path(r).stat().st_size} for r in refs]
        emit(rows, as_json, lambda: _print_snapshots(rows, backend.snapshots_dir))
        return
    if rollback is not None:
        backend.restore_and_audit(rollback)
        try:
            version: int | None = backend.read_schema_version()
        except Exception:  # noqa: BLE001 - the vault is restored and audited; the version is only shown
            version = None
        data = {"restored": rollback, "vault_version": version, "rolled_back": True}
        emit(data, as_json, lambda: console.print(
            f"Restored snapshot {Path(rollback).name}; "
            + (f"the vault is at v{version}." if version is not None else "its version could not be read.")))
        return
    assert to is not None
    try:
        target = parse_target_version(to)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--to") from None
    with _Progress(enabled=not as_json) as progress:
        result = backend.run_migration(target, dry_run=dry_run, announce=_announcer(as_json), progress=progress)
    emit(result.to_dict(), as_json, lambda: _print_result(result, backend.agents_root))
    if not result.ok:
        raise typer.Exit(1)


def _announcer(as_json: bool) -> Any:
    def announce(ref: Any, description: str) -> None:
        # Spec MUST 4: on stdout, flushed, before the first write.
        if as_json:
            line = json.dumps({"snapshot_ref": {"backend_id": ref.backend_id, "snapshot_id": ref.snapshot_id},
                               "message": description})
        else:
            line = description
        sys.stdout.write(line.rstrip("\n") + "\n")
        sys.stdout.flush()

    return announce


class _Progress:
    """A rich progress bar on stderr, shown only on a terminal."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled and sys.stderr.isatty()
        self._bar: Any = None
        self._tasks: dict[str, Any] = {}

    def __enter__(self) -> _Progress | None:
        if not self.enabled:
            return None
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                             console=err_console(), transient=True)
        self._bar.__enter__()
        return self

    def __call__(self, phase: str, done: int, total: int) -> None:
        if phase not in self._tasks:
            self._tasks[phase] = self._bar.add_task(phase, total=total)
        self._bar.update(self._tasks[phase], completed=done, total=total)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)


def _rel(unit_id: str, root: Path) -> str:
    try:
        return str(Path(unit_id).relative_to(root.resolve()))
    except ValueError:
        return unit_id


def _print_status(st: Any) -> None:
    console.print(f"Vault: {st.agents_root}")
    console.print(f"Schema: vault at v{st.vault_version}; this package writes v{st.package_version}")
    parts = [f"{n} at v{v}" if v else f"{n} legacy without schema_version" for v, n in sorted(st.by_version.items())]
    console.print(f"Units: {st.units}" + (f" ({', '.join(parts)})" if parts else ""))
    for u in st.unparseable:
        console.print(f"  [red]does not parse[/red]: {u}")
    for uid in st.invalid_version:
        console.print(f"  [red]schema_version is malformed (not a non-negative integer)[/red]: {uid}")
    console.print(f"Scripts: {', '.join(st.scripts) or 'none'} in _migrations/")
    console.print(f"Snapshots: {st.snapshots}")
    if st.vault_version < st.package_version:
        console.print(f"Next: python -m atomic_agents.migrate --to v{st.package_version} --dry-run")


def _print_snapshots(rows: list[dict[str, Any]], where: Path) -> None:
    if not rows:
        console.print(f"No snapshots in {where}")
        return
    for r in rows:
        console.print(f"{r['snapshot_id']}  {r['bytes'] / 1024:.1f} KiB")


def _print_result(result: Any, root: Path) -> None:
    plan = result.plan
    chain = " -> ".join(s.name for s in plan.scripts) or "nothing to run"
    console.print(f"Plan: v{plan.from_version} -> v{plan.to_version} ({chain})")
    for change in result.changes:
        bits = [f"+{k}" for k in change.added] + [f"-{k}" for k in change.removed]
        bits += [f"{a}->{b}" for a, b in change.renamed] + [f"~{k}" for k in change.changed]
        console.print(f"  {_rel(change.unit_id, root)}: {' '.join(bits)}", markup=False)
    console.print(f"Units touched: {len(result.units_touched)}, skipped: {result.units_skipped}")
    errors = list(result.validation_errors)
    if errors:
        label = "would fail validation" if result.dry_run else "validation errors"
        console.print(f"[red]{len(errors)} {label}[/red]:")
        prefix = str(root.resolve()) + "/"
        for e in errors[:10]:
            console.print(f"  {str(e['error']).replace(prefix, '')}", markup=False)
        if len(errors) > 10:
            console.print(f"  ... and {len(errors) - 10} more (--json lists all)")
    if result.error:
        console.print(f"[red]error[/red]: {result.error}")
    if result.dry_run:
        verdict = "a real run would go through" if result.ok else "a real run would be refused or rolled back"
        console.print(f"Dry run: nothing was written; {verdict}.")
    elif result.rolled_back:
        console.print(f"[red]Rolled back[/red] to {result.snapshot_ref.snapshot_id}; the vault is as it was.")
    elif result.snapshot_ref is not None:
        console.print(f"Migrated to v{plan.to_version}. Snapshot kept: {result.snapshot_ref.snapshot_id}")
    else:
        console.print(f"Already at v{plan.to_version}; nothing to do.")


def register(app: typer.Typer) -> None:
    """Attach the ``migrate`` command to the root app."""
    app.command("migrate", help=_HELP)(migrate)


def main(argv: list[str] | None = None) -> None:
    """``python -m atomic_agents.migrate``: the same command as ``atomic-agents migrate``."""
    standalone = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    standalone.command(help=_HELP)(migrate)
    # The same error boundary as atomic_agents.cli.main: usage errors exit 2, refusals exit 1.
    run(standalone, argv, prog_name="python -m atomic_agents.migrate")
