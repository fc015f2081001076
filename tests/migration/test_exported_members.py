"""The public surface users' scripts import is a contract: pin it."""

from __future__ import annotations

import atomic_agents.migration as migration
from atomic_agents.exceptions import AtomicAgentsError, MigrationError


def test_exported_members() -> None:
    assert migration.__all__ == sorted(migration.__all__)
    assert set(migration.__all__) == {
        "FilesystemMigrationBackend",
        "LoadedScript",
        "MemoryUnit",
        "MigratableUnit",
        "MigrationBackend",
        "MigrationCapabilities",
        "MigrationError",
        "MigrationEvent",
        "MigrationPlan",
        "MigrationResult",
        "MigrationRollbackUnavailable",
        "MigrationSnapshotNotFound",
        "MigrationSnapshotRef",
        "MigrationStatus",
        "UnitChange",
        "UnparseableUnit",
        "parse_target_version",
        "upgrade_meta",
    }
    for name in migration.__all__:
        assert getattr(migration, name).__doc__, f"{name} has no docstring"


def test_errors_sit_under_the_one_root() -> None:
    assert issubclass(migration.MigrationRollbackUnavailable, MigrationError)
    assert issubclass(migration.MigrationSnapshotNotFound, MigrationError)
    assert issubclass(MigrationError, AtomicAgentsError)


def test_dataclass_fields_match_the_spec() -> None:
    import dataclasses

    def names(cls: type) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]

    assert names(migration.MigrationCapabilities) == ["supports_transactional_rollback", "single_host_only"]
    assert names(migration.MigrationSnapshotRef) == ["backend_id", "snapshot_id"]
    assert names(migration.MigrationEvent) == [
        "run_id", "timestamp", "agents_root", "from_version", "to_version", "units_touched", "dry_run",
        "rolled_back", "error",
    ]
    assert names(migration.MigrationPlan) == ["from_version", "to_version", "scripts"]
    assert names(migration.MigrationResult)[:9] == [
        "plan", "snapshot_ref", "units_touched", "units_skipped", "validation_passed", "validation_errors",
        "rolled_back", "dry_run", "error",
    ]
    assert names(migration.LoadedScript) == ["path", "from_version", "to_version", "module"]
    for cls in (migration.MigrationCapabilities, migration.MigrationSnapshotRef, migration.MigrationEvent,
                migration.MigrationPlan, migration.MigrationResult, migration.LoadedScript):
        assert cls.__dataclass_params__.frozen


def test_parse_target_version() -> None:
    import pytest

    assert [migration.parse_target_version(v) for v in ("v2", "V2", "2", 2, " v10 ")] == [2, 2, 2, 2, 10]
    for bad in ("two", "v", "-1", "v2.1", True):
        with pytest.raises(ValueError):
            migration.parse_target_version(bad)
        with pytest.raises(MigrationError):
            migration.parse_target_version(bad)
