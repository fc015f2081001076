"""The frozen records that cross the migration seam.

Backends take and return these; the runner, the CLI and the audit trail only
ever see these shapes. Names and fields follow the spec (Schema migration) and
the reference implementation, so tooling written for it reads them unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from .._format._types import LoadedScript, MigrationPlan

__all__ = [
    "LoadedScript",
    "MigrationCapabilities",
    "MigrationEvent",
    "MigrationPlan",
    "MigrationResult",
    "MigrationSnapshotRef",
    "MigrationStatus",
    "UnitChange",
    "UnparseableUnit",
]


@dataclass(frozen=True)
class MigrationCapabilities:
    """What a backend can promise.

    ``supports_transactional_rollback`` gates real runs (spec MUST 5);
    ``single_host_only`` is advisory (snapshots on local disk, one host's lock).

    >>> MigrationCapabilities(supports_transactional_rollback=True).single_host_only
    True
    """

    supports_transactional_rollback: bool
    single_host_only: bool = True


@dataclass(frozen=True)
class MigrationSnapshotRef:
    """Names a checkpoint made by ``backend.snapshot()``.

    For the filesystem backend ``snapshot_id`` is the archive's file name, the
    argument ``--rollback`` takes.

    >>> MigrationSnapshotRef("filesystem", "2026-08-12T143000_pre_v2_migration.tar.gz").backend_id
    'filesystem'
    """

    backend_id: str
    snapshot_id: str


@dataclass(frozen=True)
class MigrationEvent:
    """One audit record: every ``run_migration()`` exit and every manual rollback (spec MUST 8).

    ``from_version`` is ``-1`` when the run was refused before its plan existed.
    """

    run_id: str
    timestamp: str
    agents_root: str
    from_version: int
    to_version: int
    units_touched: int
    dry_run: bool
    rolled_back: bool
    error: str  # "" when the run went through (the reference implementation's shape)

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "timestamp": self.timestamp,
            "agents_root": self.agents_root,
            "from_version": self.from_version,
            "to_version": self.to_version,
            "units_touched": self.units_touched,
            "dry_run": self.dry_run,
            "rolled_back": self.rolled_back,
            "error": self.error,
        }


@dataclass(frozen=True)
class UnitChange:
    """What a run did (or, on a dry run, would do) to one unit's frontmatter keys."""

    unit_id: str
    unit_type: str
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    renamed: tuple[tuple[str, str], ...] = ()
    changed: tuple[str, ...] = ()
    scripts: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "unit_id": self.unit_id,
            "unit_type": self.unit_type,
            "added": list(self.added),
            "removed": list(self.removed),
            "renamed": [list(r) for r in self.renamed],
            "changed": list(self.changed),
            "scripts": list(self.scripts),
        }


@dataclass(frozen=True)
class MigrationResult:
    """The outcome of ``run_migration()``.

    Shapes follow the reference implementation, so its tooling reads them:
    ``units_touched`` is the list of summaries ``apply_unit()`` returned for each
    (script, unit) pair a script changed (its audit line records the count);
    ``units_skipped`` counts the pairs skipped (``applies_to()`` said no, or on
    a dry run ``migrate()`` returned a falsy value). ``validation_errors`` holds
    one ``{"unit_id", "error"}`` dict per problem; ``error`` is ``""`` when the
    run went through. ``changes`` lists per-unit key changes (filled on dry runs).

    ``rolled_back`` is True only when the snapshot was restored: a run whose
    restore itself failed returns ``rolled_back=False`` with both failures in ``error``.
    """

    plan: MigrationPlan
    snapshot_ref: MigrationSnapshotRef | None
    units_touched: list[dict[str, Any]]
    units_skipped: int
    validation_passed: bool
    validation_errors: list[dict[str, Any]]
    rolled_back: bool
    dry_run: bool
    error: str
    changes: tuple[UnitChange, ...] = ()
    run_id: str | None = None

    @property
    def ok(self) -> bool:
        """True when the run did what was asked: no error, nothing rolled back, all valid."""
        return not self.error and not self.rolled_back and self.validation_passed

    def to_dict(self) -> dict[str, Any]:
        ref = self.snapshot_ref
        return {
            "ok": self.ok,
            "run_id": self.run_id,
            "plan": self.plan.to_dict(),
            "snapshot_ref": None if ref is None else {"backend_id": ref.backend_id, "snapshot_id": ref.snapshot_id},
            "units_touched": [_jsonable(s) for s in self.units_touched],
            "units_skipped": self.units_skipped,
            "validation_passed": self.validation_passed,
            "validation_errors": [dict(e) for e in self.validation_errors],
            "rolled_back": self.rolled_back,
            "dry_run": self.dry_run,
            "error": self.error,
            "changes": [c.to_dict() for c in self.changes],
        }


def _jsonable(value: Any) -> Any:
    """A script's summary as JSON data: dates and other values a script may return become strings."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


@dataclass(frozen=True)
class UnparseableUnit:
    """A unit whose frontmatter does not parse: never skipped silently, never counted as current."""

    unit_id: str
    line: int | None
    message: str

    def __str__(self) -> str:
        where = self.unit_id if self.line is None else f"{self.unit_id}:{self.line}"
        return f"{where}: {self.message}"


@dataclass(frozen=True)
class MigrationStatus:
    """What ``--status`` reports: the vault's version and what is in it.

    ``by_version`` maps each integer version to its unit count (``0`` = legacy,
    no ``schema_version`` key); ``invalid_version`` lists units whose version is
    not an integer; ``unparseable`` lists units whose frontmatter does not parse.
    """

    agents_root: str
    package_version: int
    vault_version: int
    units: int
    by_version: dict[int, int] = field(default_factory=dict)
    invalid_version: tuple[str, ...] = ()
    unparseable: tuple[UnparseableUnit, ...] = ()
    scripts: tuple[str, ...] = ()
    snapshots: int = 0

    @property
    def legacy_units(self) -> int:
        return self.by_version.get(0, 0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "agents_root": self.agents_root,
            "package_version": self.package_version,
            "vault_version": self.vault_version,
            "units": self.units,
            "legacy_units": self.legacy_units,
            "by_version": {str(k): v for k, v in sorted(self.by_version.items())},
            "invalid_version": list(self.invalid_version),
            "unparseable": [{"unit_id": u.unit_id, "line": u.line, "message": u.message} for u in self.unparseable],
            "scripts": list(self.scripts),
            "snapshots": self.snapshots,
        }
