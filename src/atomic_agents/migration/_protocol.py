"""The two seams of the migration framework: the unit handle and the backend.

Scripts see only :class:`MigratableUnit`; the runner sees only
:class:`MigrationBackend`. Neither hands out a raw ``Path`` (spec: the old
path-shaped contract is removed), so the same script runs over the filesystem
backend today and a database backend later.

What a backend does NOT own: discovering and loading scripts (the schema is
global, scripts live in ``<agents_root>/_migrations/``), the target schema's
validators (``atomic_agents.vault``), and the CLI.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from ._types import (
    LoadedScript,
    MigrationCapabilities,
    MigrationResult,
    MigrationSnapshotRef,
)

__all__ = ["MigratableUnit", "MigrationBackend"]


@runtime_checkable
class MigratableUnit(Protocol):
    """One atomic unit (a note or a wiki page) as a migration script sees it.

    >>> def applies_to(unit: MigratableUnit) -> bool:
    ...     return unit.read_frontmatter().get("schema_version") == 1
    """

    @property
    def unit_id(self) -> str:
        """Opaque stable identifier (filesystem: absolute path). For messages; do not parse."""
        ...

    @property
    def unit_type(self) -> str:
        """``"memory"`` for atomic notes, ``"wiki"`` for wiki pages."""
        ...

    @property
    def dry_run(self) -> bool:
        """True when the runner built this handle for a dry run (writes are no-ops)."""
        ...

    def read_frontmatter(self) -> dict[str, Any]:
        """The current frontmatter, as a copy: mutating it persists nothing."""
        ...

    def write_frontmatter(self, meta: dict[str, Any]) -> None:
        """Write ``meta`` atomically (spec MUST 3); a no-op on dry-run handles."""
        ...


@runtime_checkable
class MigrationBackend(Protocol):
    """Where units live, how to checkpoint them, and how a run is driven.

    Implementer contract: spec MUST 1-8 (see each method). ``run_migration`` and
    ``restore_and_audit`` are built on the other methods by the shared runner,
    so a new backend mostly supplies storage.

    >>> from atomic_agents.migration import FilesystemMigrationBackend
    >>> isinstance(FilesystemMigrationBackend("/tmp/agents"), MigrationBackend)
    True
    """

    @property
    def backend_id(self) -> str:
        """Stable, non-empty, lowercase (MUST 6)."""
        ...

    def capabilities(self) -> MigrationCapabilities:
        """Flags; ``supports_transactional_rollback=False`` makes real runs refuse (MUST 5)."""
        ...

    def read_schema_version(self) -> int:
        """Minimum version over all units; read-only (MUST 1)."""
        ...

    def enumerate_units(self) -> list[MigratableUnit]:
        """Every unit exactly once, ``unit_type`` set, sidecars excluded (MUST 2)."""
        ...

    def apply_unit(self, unit: MigratableUnit, script: LoadedScript, dry_run: bool = True) -> dict[str, Any]:
        """``applies_to`` then ``migrate`` on one unit: its summary, ``{}`` if skipped; verify the bump (MUST 7)."""
        ...

    def snapshot(self, target_version: int) -> MigrationSnapshotRef:
        """A recoverable checkpoint, made before any write (MUST 4)."""
        ...

    def restore(self, ref: MigrationSnapshotRef) -> None:
        """Atomically return the vault to the checkpoint (MUST 4); records no audit on its own."""
        ...

    def restore_and_audit(self, ref: MigrationSnapshotRef) -> None:
        """Operator rollback: ``restore`` plus one audit event, success or failure (MUST 8)."""
        ...

    def run_migration(self, target_version: int, dry_run: bool = True) -> MigrationResult:
        """Plan, lock, snapshot, apply, validate, roll back on failure, audit (MUST 4, 5, 8)."""
        ...
