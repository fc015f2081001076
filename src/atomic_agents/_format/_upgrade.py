"""The single-file upgrade hook: bring one unit's frontmatter up to date, in memory.

The vault calls :func:`upgrade_meta` when it writes to a file whose
``schema_version`` is older than the package's (spec: "a write to a file
that's still at an old schema triggers in-place migration of just that
file"). It runs the same ``_migrations/vN_to_vN+1.py`` chain as a full run,
on a :class:`MemoryUnit`, and returns the new mapping; the vault then writes
it with its own atomic write. Nothing here touches the disk.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .._schema import CURRENT_SCHEMA_VERSION
from ..exceptions import MigrationError
from ._scripts import MIGRATIONS_DIR, build_plan
from ._units import MemoryUnit
from ._units import meta_version as version_of

__all__ = ["upgrade_meta"]


def upgrade_meta(
    agents_root: str | Path,
    meta: dict[str, Any],
    *,
    unit_type: str,
    unit_id: str,
    to_version: int = CURRENT_SCHEMA_VERSION,
) -> dict[str, Any]:
    """Run the script chain from ``meta``'s version (missing = 0) to ``to_version``; return the new meta.

    Raises :class:`MigrationError` if a script is missing or broken, raises, or
    does not bump the version (the spec's MUST 7 check, applied per step).

    >>> upgrade_meta("agents", {"name": "x"}, unit_type="memory", unit_id="agents/a/memory/x.md")  # doctest: +SKIP
    {'name': 'x', 'schema_version': 1}
    """
    if unit_type not in ("memory", "wiki"):
        raise MigrationError(f"{unit_id}: unit_type must be 'memory' or 'wiki', not {unit_type!r}")
    from_version = version_of(meta)
    if from_version is None:
        raise MigrationError(f"{unit_id}: schema_version {meta.get('schema_version')!r} is not a schema version"
                             " (a non-negative integer)")
    if from_version >= to_version:
        if from_version > to_version:
            raise MigrationError(f"{unit_id}: is at v{from_version}, newer than v{to_version}; migrations are forward only")
        return dict(meta)
    plan = build_plan(Path(agents_root) / MIGRATIONS_DIR, from_version, to_version)
    unit = MemoryUnit(unit_id, unit_type, meta, dry_run=False)
    for script in plan.scripts:
        try:
            if script.module.applies_to(unit):
                script.module.migrate(unit)
        except Exception as exc:
            raise MigrationError(f"{script.name} failed on {unit_id}: {type(exc).__name__}: {exc}") from exc
        version = unit.read_frontmatter().get("schema_version")
        if isinstance(version, bool) or version != script.to_version:
            raise MigrationError(
                f"{script.name} did not bring {unit_id} to schema_version {script.to_version} (it is {version!r})"
            )
    return unit.read_frontmatter()
