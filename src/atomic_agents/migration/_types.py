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
    error: str | None

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
class LoadedScript:
    """A migration script ``vN_to_vN+1.py``, imported and checked.

    ``module`` has ``FROM_VERSION``, ``TO_VERSION``, ``applies_to(unit)`` and ``migrate(unit)``.
    """

    path: Path
    from_version: int
    to_version: int
    module: ModuleType

    @property
    def name(self) -> str:
        return self.path.name


@dataclass(frozen=True)
class MigrationPlan:
    """The contiguous chain of scripts from the vault's version to the target.

    An empty ``scripts`` means the vault is already at the target.
    """

    from_version: int
    to_version: int
    scripts: tuple[LoadedScript, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "from_version": self.from_version,
            "to_version": self.to_version,
            "scripts": [s.name for s in self.scripts],
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

    ``units_touched`` / ``units_skipped`` count (script, unit) pairs: touched when
    ``migrate()`` returned a non-empty summary, skipped when ``applies_to()`` said
    no or (dry run) ``migrate()`` returned a falsy value. ``validation_errors`` names
    unit and field; ``changes`` lists per-unit key changes (filled on dry runs).
    """

    plan: MigrationPlan
    snapshot_ref: MigrationSnapshotRef | None
    units_touched: int
    units_skipped: int
    validation_passed: bool
    validation_errors: tuple[str, ...]
    rolled_back: bool
    dry_run: bool
    error: str | None
    changes: tuple[UnitChange, ...] = ()
    run_id: str | None = None

    @property
    def ok(self) -> bool:
        """True when the run did what was asked: no error, nothing rolled back, all valid."""
        return self.error is None and not self.rolled_back and self.validation_passed

    def to_dict(self) -> dict[str, Any]:
        ref = self.snapshot_ref
        return {
            "ok": self.ok,
            "run_id": self.run_id,
            "plan": self.plan.to_dict(),
            "snapshot_ref": None if ref is None else {"backend_id": ref.backend_id, "snapshot_id": ref.snapshot_id},
            "units_touched": self.units_touched,
            "units_skipped": self.units_skipped,
            "validation_passed": self.validation_passed,
            "validation_errors": list(self.validation_errors),
            "rolled_back": self.rolled_back,
            "dry_run": self.dry_run,
            "error": self.error,
            "changes": [c.to_dict() for c in self.changes],
        }


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
