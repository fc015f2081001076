"""The reference backend: a vault of markdown files under ``agents_root``.

Units are ``<agents_root>/<agent>/memory/*.md`` (notes) and
``<agents_root>/<agent>/wiki/*.md`` (wiki pages). Storage choices:
snapshots are ``tar.gz`` archives in ``_migrations/snapshots/``; the audit
trail is ``_migrations/migration.jsonl``; the vault lock is ``flock`` on
``<agents_root>/.migration.lock`` (one host: ``single_host_only=True``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from pathlib import Path
from typing import Any

from .._io import FileLock, atomic_write, pid_alive, sweep_stale_temps
from .._schema import CURRENT_SCHEMA_VERSION
from ..exceptions import FrontmatterParseError, LockBusyError, MigrationError
from ._audit import AUDIT_FILE, HISTORY_FILE, append_history, record_event
from ._commit import GroupCommit
from ._layout import UNIT_FOLDERS, covers_unit, is_agent_name, is_unit_name
from ._protocol import MigratableUnit
from ._runner import RunnerMixin
from .._format._scripts import list_scripts
from ._snapshot import create_snapshot, list_snapshot_names, resolve_snapshot, restore_snapshot, sweep_staging
from ._types import (
    MigrationCapabilities,
    MigrationEvent,
    MigrationPlan,
    MigrationSnapshotRef,
    MigrationStatus,
    UnparseableUnit,
)
from ._units import FileUnit, ParseCache, peek, version_of

__all__ = ["FilesystemMigrationBackend", "LOCK_FILE"]

log = logging.getLogger("atomic_agents.migration")

LOCK_FILE = ".migration.lock"
#: The lock holder's resolved plan (pid, from_version), for the audit line of a run it refuses.
PLAN_FILE = ".migration.lock.plan"
#: The vault's per-agent write lock (atomic_agents.vault): held for a whole run too.
AGENT_LOCK_FILE = ".agent.lock"
AGENT_LOCK_WAIT = 10.0  # let an in-flight vault write finish; vault writers wait up to 120 s for us


def _inside(real_root: str, real: str) -> tuple[str, ...] | None:
    """``real`` as parts relative to ``real_root``; None when it lies outside."""
    if real == real_root:
        return ()
    prefix = real_root.rstrip(os.sep) + os.sep
    if not real.startswith(prefix):
        return None
    return tuple(real[len(prefix):].split(os.sep))


class FilesystemMigrationBackend(RunnerMixin):
    """Migrate the markdown vault at ``agents_root``.

    >>> backend = FilesystemMigrationBackend("agents")  # doctest: +SKIP
    >>> len(backend.run_migration(2, dry_run=True).units_touched)  # doctest: +SKIP
    12
    """

    def __init__(self, agents_root: str | os.PathLike[str]) -> None:
        self.agents_root = Path(agents_root).expanduser().absolute()
        self._parsed = ParseCache()
        self._commit: GroupCommit | None = None  # only while run_migration runs

    # MUST 6: a constant, so stable for the lifetime of the instance.
    @property
    def backend_id(self) -> str:
        return "filesystem"

    def capabilities(self) -> MigrationCapabilities:
        return MigrationCapabilities(supports_transactional_rollback=True, single_host_only=True)

    @property
    def migrations_dir(self) -> Path:
        return self.scripts_dir

    @property
    def snapshots_dir(self) -> Path:
        return self.migrations_dir / "snapshots"

    @property
    def audit_path(self) -> Path:
        return self.migrations_dir / AUDIT_FILE

    # -- units ----------------------------------------------------------------------
    def _unit_paths(self) -> list[tuple[str, str]]:
        """(resolved path, unit_type) of every unit, each physical file once (MUST 2).

        What is a unit, and whether its real location is one a snapshot keeps,
        are both decided by ``_layout`` (the snapshot reads the same rule), so a
        run never touches a file its rollback could not put back.
        """
        root = self.agents_root
        if not root.is_dir():
            return []
        real_root = os.path.realpath(root)
        # Plain strings, not Path objects: this runs three times per run over every unit.
        seen: set[str] = set()
        out: list[tuple[str, str]] = []
        for agent in sorted(os.scandir(root), key=lambda e: e.name):
            if not is_agent_name(agent.name) or not agent.is_dir():
                continue  # _migrations, _dashboard, _cache, _memory, .git ...
            for folder, unit_type in UNIT_FOLDERS:
                d = os.path.join(agent.path, folder)
                try:
                    entries = sorted(os.scandir(d), key=lambda e: e.name)
                except (FileNotFoundError, NotADirectoryError):
                    continue
                real_dir = os.path.realpath(d)  # once per folder; only symlinked files resolve one by one
                dir_parts = _inside(real_root, real_dir)
                for f in entries:
                    name = f.name
                    if not is_unit_name(name):
                        continue
                    if f.is_symlink():
                        real = os.path.realpath(f.path)
                        if not os.path.isfile(real):
                            continue
                        parts = _inside(real_root, real)
                    else:
                        if not f.is_file():
                            continue
                        real = os.path.join(real_dir, name)
                        parts = None if dir_parts is None else dir_parts + (name,)
                    if real in seen:
                        continue
                    if parts is None or not covers_unit(parts):
                        # A snapshot could not cover it, so it is never migrated.
                        log.warning("skipping %s: it resolves to %s, which a snapshot does not capture", f.path, real)
                        continue
                    seen.add(real)
                    out.append((real, unit_type))
        return out

    def enumerate_units(self, *, dry_run: bool = True) -> list[MigratableUnit]:
        """Every note and wiki page once, symlinks resolved, sidecars excluded (MUST 2)."""
        writer = self._commit.submit if (self._commit is not None and not dry_run) else None
        cache = self._parsed
        root = self.agents_root
        return [FileUnit(p, t, dry_run=dry_run, writer=writer, cache=cache, root=root) for p, t in self._unit_paths()]

    def _unit_filename(self, unit: MigratableUnit) -> str | None:
        return os.path.basename(unit.unit_id)

    def _scan(self) -> tuple[dict[int, int], list[str], list[UnparseableUnit], int]:
        by_version: dict[int, int] = {}
        invalid: list[str] = []
        bad: list[UnparseableUnit] = []
        units = self.enumerate_units(dry_run=True)
        for unit in units:
            try:
                meta = peek(unit)
            except FrontmatterParseError as exc:
                bad.append(UnparseableUnit(unit.unit_id, exc.line, exc.message))
                continue
            v = version_of(meta)
            if v is None:
                invalid.append(unit.unit_id)
            else:
                by_version[v] = by_version.get(v, 0) + 1
        return by_version, invalid, bad, len(units)

    def read_schema_version(self) -> int:
        """Minimum version over all units; a unit with no ``schema_version`` is v0 (MUST 1)."""
        by_version, invalid, bad, total = self._scan()
        if bad or invalid:
            log.warning(
                "%d unit(s) under %s yield no integer schema_version (unparseable: %s; non-integer: %s)",
                len(bad) + len(invalid), self.agents_root, ", ".join(map(str, bad[:3])) or "-",
                ", ".join(invalid[:3]) or "-",
            )
        if not by_version:
            # Empty vault, or nothing readable: "no safe forward migration available".
            return CURRENT_SCHEMA_VERSION
        return min(by_version)

    def status(self) -> MigrationStatus:
        """Version, per-version counts (legacy = 0), unparseable units by file and line."""
        by_version, invalid, bad, total = self._scan()
        return MigrationStatus(
            agents_root=str(self.agents_root),
            package_version=CURRENT_SCHEMA_VERSION,
            vault_version=min(by_version) if by_version else CURRENT_SCHEMA_VERSION,
            units=total,
            by_version=dict(sorted(by_version.items())),
            invalid_version=tuple(invalid),
            unparseable=tuple(bad),
            scripts=tuple(list_scripts(self.migrations_dir)),
            snapshots=len(list_snapshot_names(self.snapshots_dir)),
        )

    def run_migration(self, target_version: int | str, dry_run: bool = True, **kwargs: Any) -> Any:
        """See :meth:`RunnerMixin.run_migration`; parsed files are cached for the run only."""
        self._commit = GroupCommit(self.agents_root)
        try:
            return super().run_migration(target_version, dry_run, **kwargs)
        finally:
            commit, self._commit = self._commit, None
            commit.close()
            self._parsed.clear()

    # -- snapshots --------------------------------------------------------------------
    def snapshot(self, target_version: int) -> MigrationSnapshotRef:
        """``_migrations/snapshots/YYYY-MM-DDTHHMMSS_pre_v{N}_migration.tar.gz`` (MUST 4)."""
        path = create_snapshot(self.agents_root, self.snapshots_dir, target_version)
        return MigrationSnapshotRef(backend_id=self.backend_id, snapshot_id=path.name)

    def restore(self, ref: MigrationSnapshotRef) -> None:
        """Stage the whole archive, then rename captured files back; nothing else is touched (MUST 4)."""
        ref = self._coerce_ref(ref)
        if ref.backend_id != self.backend_id:
            raise MigrationError(f"snapshot {ref.snapshot_id} belongs to backend {ref.backend_id!r}, not {self.backend_id!r}")
        archive = resolve_snapshot(self.snapshots_dir, ref.snapshot_id)
        restore_snapshot(self.agents_root, archive, self.migrations_dir)

    def list_snapshots(self) -> list[MigrationSnapshotRef]:
        """Every snapshot, oldest first."""
        return [MigrationSnapshotRef(self.backend_id, n) for n in list_snapshot_names(self.snapshots_dir)]

    def snapshot_path(self, ref: MigrationSnapshotRef | str) -> Path:
        return resolve_snapshot(self.snapshots_dir, self._coerce_ref(ref).snapshot_id)

    # -- hooks of the runner ----------------------------------------------------------
    def _lock(self) -> contextlib.AbstractContextManager[Any]:
        return _VaultLock(self.agents_root)

    def _publish_plan(self, run_id: str, plan: MigrationPlan) -> None:
        # Written under the lock, removed before it is released: a run refused by
        # the lock reads its from_version here instead of scanning the vault (MUST 8).
        data = {"pid": os.getpid(), "run_id": run_id, "from_version": plan.from_version, "to_version": plan.to_version}
        try:
            atomic_write(self.agents_root / PLAN_FILE, json.dumps(data) + "\n", root=self.agents_root)
        except OSError as exc:  # only the refused run's audit detail depends on it
            log.warning("could not publish the migration plan: %s", exc)

    def _published_from_version(self) -> int | None:
        try:
            fd = os.open(self.agents_root / PLAN_FILE, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            return None
        try:
            with os.fdopen(fd, "rb") as fh:
                data = json.loads(fh.read(4096))
            pid, version = data["pid"], data["from_version"]
        except (OSError, ValueError, TypeError, KeyError):
            return None
        ok = isinstance(pid, int) and isinstance(version, int) and not isinstance(version, bool)
        return version if ok and pid_alive(pid) else None  # a dead holder's file is stale

    def _sweep_debris(self) -> None:
        for name in sweep_staging(self.migrations_dir):
            log.warning("removed %s, the staging folder of a rollback that was killed", self.migrations_dir / name)
        # a run killed while writing the lock's plan file leaves that write's temp file at the root
        for path in sweep_stale_temps(self.agents_root, root=self.agents_root):
            log.warning("removed %s, the temp file of a writer that was killed", path)

    def _record_event(self, event: MigrationEvent) -> None:
        record_event(self.audit_path, event, root=self.agents_root)

    def _record_history(self, line: str) -> None:
        append_history(self.migrations_dir / HISTORY_FILE, line, root=self.agents_root)

    def _flush(self) -> None:
        # Every write of the pass is renamed into place and its folder fsynced before anything reads on.
        if self._commit is not None:
            self._commit.drain()

    def _quiesce(self) -> None:
        if self._commit is not None:
            self._commit.quiesce()

    def _describe_ref(self, ref: MigrationSnapshotRef) -> str:
        path = self.snapshots_dir / ref.snapshot_id
        root = str(self.agents_root)
        quoted = root if all(c.isalnum() or c in "/._-" for c in root) else "'" + root.replace("'", "'\\''") + "'"
        return (
            f"Snapshot created: {path}\n"
            f"If this migration is interrupted, run: python -m atomic_agents.migrate "
            f"--rollback {ref.snapshot_id} --agents-root {quoted}"
        )


def _drop_plan(root: Path) -> None:
    with contextlib.suppress(OSError):
        os.unlink(root / PLAN_FILE)


class _VaultLock:
    """The migration lock (refused at once if held), then every agent's write lock.

    Holding the agents' locks keeps vault writers out for the whole run: no
    write lands between the snapshot and a restore (it would be lost), and no
    agent writes an old-schema file mid-run (spec: half-migrated state is forbidden).
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self._held: list[FileLock] = []

    def __enter__(self) -> _VaultLock:
        main = FileLock(self.root / LOCK_FILE, root=self.root, timeout=0, what="the migration lock")
        main.acquire()  # LockBusyError: the runner answers "Another migration is already running"
        self._held.append(main)
        try:
            _drop_plan(self.root)  # a killed holder's plan is not ours
            for agent in sorted(os.scandir(self.root), key=lambda e: e.name):
                if not is_agent_name(agent.name) or not agent.is_dir(follow_symlinks=False):
                    continue
                lock = FileLock(Path(agent.path) / AGENT_LOCK_FILE, root=self.root, timeout=AGENT_LOCK_WAIT,
                                what=f"agent {agent.name!r}")
                try:
                    lock.acquire()
                except LockBusyError as exc:
                    raise MigrationError(
                        f"agent {agent.name!r} is being written to (its lock is held); stop agent runs and retry"
                    ) from exc
                self._held.append(lock)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        held, self._held = self._held, []
        if held:
            _drop_plan(self.root)
        for lock in reversed(held):
            with contextlib.suppress(OSError):
                lock.release()
