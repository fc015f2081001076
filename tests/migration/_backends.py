"""Backends the conformance suite runs against, behind one ``Harness`` shape.

A new backend (e.g. a database) joins the suite by adding one entry to
``FACTORIES``: a function that takes a vault root already seeded on disk and
returns a :class:`Harness` over a backend holding the same units.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from atomic_agents._schema import CURRENT_SCHEMA_VERSION
from atomic_agents.exceptions import LockBusyError, MigrationSnapshotNotFound
from atomic_agents.migration import (
    FilesystemMigrationBackend,
    MigrationBackend,
    MigrationCapabilities,
    MigrationEvent,
    MigrationSnapshotRef,
)
from atomic_agents.migration._runner import RunnerMixin
from atomic_agents.migration._units import version_of


class _StoreUnit:
    """A handle onto one row of :class:`InMemoryMigrationBackend`."""

    def __init__(self, backend: InMemoryMigrationBackend, unit_id: str, dry_run: bool) -> None:
        self._backend = backend
        self._unit_id = unit_id
        self._dry_run = dry_run

    unit_id = property(lambda self: self._unit_id)
    unit_type = property(lambda self: self._backend.rows[self._unit_id][0])
    dry_run = property(lambda self: self._dry_run)

    def read_frontmatter(self) -> dict[str, Any]:
        return copy.deepcopy(self._backend.rows[self._unit_id][1])

    def write_frontmatter(self, meta: dict[str, Any]) -> None:
        if self._dry_run:
            return  # spec handle table: a no-op, for this handle's own reads too
        kind = self._backend.rows[self._unit_id][0]
        self._backend.rows[self._unit_id] = (kind, copy.deepcopy(meta))  # one assignment: atomic


class InMemoryMigrationBackend(RunnerMixin):
    """Units as rows in a dict: the shape a database backend would have."""

    def __init__(self, agents_root: Path, rows: dict[str, tuple[str, dict[str, Any]]], *, rollback: bool = True) -> None:
        self.agents_root = Path(agents_root)  # scripts are global: <agents_root>/_migrations
        self.rows = rows
        self.events: list[MigrationEvent] = []
        self._rollback = rollback
        self._snapshots: dict[str, dict[str, tuple[str, dict[str, Any]]]] = {}
        self._ids = itertools.count(1)
        self._mutex = threading.Lock()

    @property
    def backend_id(self) -> str:
        return "memory" if self._rollback else "memory-norollback"

    def capabilities(self) -> MigrationCapabilities:
        return MigrationCapabilities(supports_transactional_rollback=self._rollback, single_host_only=True)

    def read_schema_version(self) -> int:
        versions = [v for _, meta in self.rows.values() if (v := version_of(meta)) is not None]
        return min(versions) if versions else CURRENT_SCHEMA_VERSION

    def enumerate_units(self, *, dry_run: bool = True) -> list[Any]:
        return [_StoreUnit(self, uid, dry_run) for uid in sorted(self.rows)]

    def snapshot(self, target_version: int) -> MigrationSnapshotRef:
        sid = f"mem-{next(self._ids)}-pre-v{target_version}"
        self._snapshots[sid] = copy.deepcopy(self.rows)
        return MigrationSnapshotRef(self.backend_id, sid)

    def restore(self, ref: MigrationSnapshotRef) -> None:
        ref = self._coerce_ref(ref)
        if ref.snapshot_id not in self._snapshots:
            raise MigrationSnapshotNotFound(f"no snapshot {ref.snapshot_id}")
        self.rows.clear()
        self.rows.update(copy.deepcopy(self._snapshots[ref.snapshot_id]))

    @contextlib.contextmanager
    def _lock(self) -> Iterator[None]:
        if not self._mutex.acquire(blocking=False):
            raise LockBusyError("memory backend lock is held")
        try:
            yield
        finally:
            self._mutex.release()

    def _record_event(self, event: MigrationEvent) -> None:
        self.events.append(event)

    def _unit_filename(self, unit: Any) -> str | None:
        return unit.unit_id.rsplit("/", 1)[-1]


@dataclass
class Harness:
    """A backend plus backend-neutral ways to inspect it."""

    name: str
    backend: MigrationBackend
    events: Callable[[], list[dict[str, Any]]]
    lock: Callable[[], contextlib.AbstractContextManager[Any]]

    def metas(self) -> dict[str, dict[str, Any]]:
        return {u.unit_id: u.read_frontmatter() for u in self.backend.enumerate_units()}


def filesystem_harness(root: Path) -> Harness:
    backend = FilesystemMigrationBackend(root)

    def events() -> list[dict[str, Any]]:
        p = backend.audit_path
        return [json.loads(line) for line in p.read_text().splitlines()] if p.exists() else []

    return Harness("filesystem", backend, events, backend._lock)


def _rows_from_disk(root: Path) -> dict[str, tuple[str, dict[str, Any]]]:
    rows = {}
    for unit in FilesystemMigrationBackend(root).enumerate_units():
        rel = str(Path(unit.unit_id).relative_to(root.resolve()))
        rows[rel] = (unit.unit_type, unit.read_frontmatter())
    return rows


def memory_harness(root: Path, *, rollback: bool = True) -> Harness:
    backend = InMemoryMigrationBackend(root, _rows_from_disk(root), rollback=rollback)
    return Harness("memory", backend, lambda: [e.to_dict() for e in backend.events], backend._lock)


FACTORIES: dict[str, Callable[[Path], Harness]] = {
    "filesystem": filesystem_harness,
    "memory": memory_harness,
}
