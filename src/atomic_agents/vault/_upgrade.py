"""Single-file schema upgrade on write (spec: "Helper behavior with old schema_version files").

Reading accepts any version up to the current one; a write to an older file
first upgrades that one file's frontmatter. When ``_migrations/`` holds the
script chain, the migration framework runs those very scripts on the one unit
(so a single-file upgrade and a vault-wide migration give the same result).
Without scripts, only the legacy step 0 -> 1 is built in: schema 1 is the
first schema with the version key, so stamping the key is the whole change.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .._schema import CURRENT_SCHEMA_VERSION, LEGACY_SCHEMA_VERSION
from ..exceptions import SchemaVersionError
from ._units import UnitType, meta_version

__all__ = ["upgrade_for_write"]


def upgrade_for_write(agents_root: Path, meta: dict[str, Any], *, unit_type: UnitType, path: Path) -> dict[str, Any]:
    """Return ``meta`` at ``CURRENT_SCHEMA_VERSION`` (a new dict), or raise naming the file."""
    version = meta_version(meta)
    if version == CURRENT_SCHEMA_VERSION:
        return dict(meta)
    if version is None:
        raise SchemaVersionError(
            f"{path}: schema_version {meta.get('schema_version')!r} is not a schema version (a non-negative integer); fix it by hand",
            path=path,
            version=meta.get("schema_version"),
        )
    if version > CURRENT_SCHEMA_VERSION:
        raise SchemaVersionError(
            f"{path}: schema_version {version} is newer than this package ({CURRENT_SCHEMA_VERSION}); upgrade atomic-agents",
            path=path,
            version=version,
        )
    scripts = agents_root / "_migrations"
    if (scripts / f"v{version}_to_v{version + 1}.py").exists():
        from .._format._upgrade import upgrade_meta  # noqa: PLC0415 - only old files need the script chain

        return dict(upgrade_meta(agents_root, dict(meta), unit_type=unit_type, unit_id=str(path)))
    if version == LEGACY_SCHEMA_VERSION and CURRENT_SCHEMA_VERSION == 1:
        upgraded = {"schema_version": CURRENT_SCHEMA_VERSION}
        upgraded.update(meta)
        upgraded["schema_version"] = CURRENT_SCHEMA_VERSION
        return upgraded
    raise SchemaVersionError(
        f"{path}: schema_version {version} needs _migrations/v{version}_to_v{version + 1}.py to be written at "
        f"{CURRENT_SCHEMA_VERSION}; run `python -m atomic_agents.migrate --status`",
        path=path,
        version=version,
    )
