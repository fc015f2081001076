"""Schema migration: move every unit of a vault from one ``schema_version`` to the next, safely.

The seams are two Protocols: :class:`MigratableUnit` (what a script sees) and
:class:`MigrationBackend` (where units live). :class:`FilesystemMigrationBackend`
is the reference backend. A run is: plan the contiguous chain of
``_migrations/vN_to_vN+1.py`` scripts, lock the vault, snapshot it, apply,
validate every unit, restore the snapshot on any failure, and record one audit
event whatever happens (spec: Schema migration, MUST 1-8).

>>> from atomic_agents.migration import FilesystemMigrationBackend, parse_target_version
>>> backend = FilesystemMigrationBackend("agents")  # doctest: +SKIP
>>> backend.run_migration(parse_target_version("v2"), dry_run=True)  # doctest: +SKIP

Scripts import the handle type from here::

    from atomic_agents.migration import MigratableUnit
"""

from __future__ import annotations

from ..exceptions import MigrationError, MigrationRollbackUnavailable, MigrationSnapshotNotFound
from ._filesystem import FilesystemMigrationBackend
from ._protocol import MigratableUnit, MigrationBackend
from .._format._scripts import parse_target_version
from ._types import (
    LoadedScript,
    MigrationCapabilities,
    MigrationEvent,
    MigrationPlan,
    MigrationResult,
    MigrationSnapshotRef,
    MigrationStatus,
    UnitChange,
    UnparseableUnit,
)
from ._units import MemoryUnit
from .._format._upgrade import upgrade_meta

__all__ = [
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
]
