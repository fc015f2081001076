"""The runner: one implementation of ``run_migration`` / ``restore_and_audit`` for every backend.

:class:`RunnerMixin` builds the two orchestration methods of
:class:`~atomic_agents.migration.MigrationBackend` on the backend's primitives
(``capabilities``, ``read_schema_version``, ``enumerate_units``, ``apply_unit``,
``snapshot``, ``restore``) plus a few storage hooks (the lock, where audit
events go). A database backend subclasses it and supplies storage; the
ordering guarantees below then hold for it unchanged:

    refuse no-rollback real runs (MUST 5)  ->  probe version, build the plan
    ->  take the vault lock  ->  enumerate  ->  snapshot + announce (MUST 4)
    ->  apply every script to every unit (MUST 7 inside apply_unit)
    ->  validate every unit  ->  restore on any failure  ->  audit (MUST 8)
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._schema import CURRENT_SCHEMA_VERSION
from ..exceptions import (
    FrontmatterParseError,
    LockBusyError,
    MigrationError,
    MigrationRollbackUnavailable,
)
from ._audit import make_event, new_run_id
from ._protocol import MigratableUnit
from ._scripts import MIGRATIONS_DIR, build_plan, parse_target_version
from ._types import (
    LoadedScript,
    MigrationCapabilities,
    MigrationEvent,
    MigrationPlan,
    MigrationResult,
    MigrationSnapshotRef,
    UnitChange,
    UnparseableUnit,
)
from ._units import diff_meta, peek

__all__ = ["Announce", "Progress", "RunnerMixin", "apply_script", "validate_units"]

log = logging.getLogger("atomic_agents.migration")

#: ``announce(ref, description)`` is called the moment the snapshot exists.
Announce = Callable[[MigrationSnapshotRef, str], None]
#: ``progress(phase, done, total)`` for progress bars.
Progress = Callable[[str, int, int], None]

BUSY_MESSAGE = "Another migration is already running"


def _default_announce(ref: MigrationSnapshotRef, description: str) -> None:
    # Spec MUST 4: the ref reaches STDOUT before the first write, flushed, so an
    # operator who sees the process die still has the rollback command.
    sys.stdout.write(description.rstrip("\n") + "\n")
    sys.stdout.flush()


def apply_script(unit: MigratableUnit, script: LoadedScript, dry_run: bool) -> dict[str, Any] | None:
    """``script.migrate(unit)`` with the spec's return-value contract and MUST 7."""
    if unit.dry_run != dry_run:
        raise MigrationError(f"{unit.unit_id}: handle built with dry_run={unit.dry_run} used for dry_run={dry_run}")
    raw = script.module.migrate(unit)
    if not dry_run:
        # MUST 7: the bump is checked here, by apply_unit, not by the runner.
        version = peek(unit).get("schema_version")  # read_frontmatter() without the copy
        if isinstance(version, bool) or version != script.to_version:
            raise MigrationError(
                f"{script.name} did not bump {unit.unit_id} to schema_version {script.to_version} "
                f"(it is {version!r}); gate units in applies_to(), not in migrate()"
            )
    # Skip is decided on the raw return value, before provenance keys are added,
    # so an empty summary stays falsy and counts as skipped (spec: return-value contract).
    if not raw:
        return None
    summary = dict(raw) if isinstance(raw, dict) else {"result": raw}
    summary.setdefault("script", script.name)
    summary.setdefault("unit_id", unit.unit_id)
    return summary


def validate_units(
    units: list[MigratableUnit], target_version: int, filename_of: Callable[[MigratableUnit], str | None]
) -> list[str]:
    """Every unit against the target schema: notes with the note validator, wiki with the wiki one."""
    from ..vault import validate_note_meta, validate_wiki_meta

    errors: list[str] = []
    for unit in units:
        try:
            meta = peek(unit)  # validators only read
        except FrontmatterParseError as exc:
            errors.append(str(UnparseableUnit(unit.unit_id, exc.line, exc.message)))
            continue
        check = validate_wiki_meta if unit.unit_type == "wiki" else validate_note_meta
        for issue in check(meta, filename=filename_of(unit), path=unit.unit_id, target_version=target_version):
            if issue.severity == "error":
                errors.append(str(issue))
    return errors


def find_unparseable(units: list[MigratableUnit]) -> list[UnparseableUnit]:
    bad = []
    for unit in units:
        try:
            peek(unit)
        except FrontmatterParseError as exc:
            bad.append(UnparseableUnit(unit.unit_id, exc.line, exc.message))
    return bad


class RunnerMixin:
    """Shared orchestration. Subclasses provide the Protocol primitives and these hooks."""

    agents_root: Path

    # -- hooks a backend supplies -------------------------------------------------
    def _lock(self) -> contextlib.AbstractContextManager[Any]:
        """An exclusive vault-level lock that refuses at once (raises LockBusyError)."""
        raise NotImplementedError

    def _record_event(self, event: MigrationEvent) -> None:
        """Durably store one audit event (MUST 8)."""
        raise NotImplementedError

    def _record_history(self, line: str) -> None:
        """Human-readable history (filesystem: ``_migrations/README.md``)."""

    def _flush(self) -> None:
        """Make the writes of one script pass durable (e.g. fsync touched folders)."""

    def _quiesce(self) -> None:
        """Wait for writes still in flight (a restore is about to run); never raises."""

    def _unit_filename(self, unit: MigratableUnit) -> str | None:
        return None

    def _describe_ref(self, ref: MigrationSnapshotRef) -> str:
        return f"Snapshot created: {ref.backend_id}:{ref.snapshot_id}"

    def _coerce_ref(self, ref: MigrationSnapshotRef | str) -> MigrationSnapshotRef:
        if isinstance(ref, MigrationSnapshotRef):
            return ref
        return MigrationSnapshotRef(backend_id=self.backend_id, snapshot_id=str(ref))

    @property
    def scripts_dir(self) -> Path:
        return Path(self.agents_root) / MIGRATIONS_DIR

    # -- primitives every backend has (declared for type checkers) ------------------
    if TYPE_CHECKING:
        @property
        def backend_id(self) -> str: ...

        def capabilities(self) -> MigrationCapabilities: ...
        def read_schema_version(self) -> int: ...
        def enumerate_units(self, *, dry_run: bool = True) -> list[Any]: ...
        def snapshot(self, target_version: int) -> MigrationSnapshotRef: ...
        def restore(self, ref: MigrationSnapshotRef) -> None: ...

    def apply_unit(self, unit: MigratableUnit, script: LoadedScript, dry_run: bool = True) -> dict[str, Any] | None:
        """Run ``script.migrate(unit)``; on a real run verify the version bump (MUST 7)."""
        return apply_script(unit, script, dry_run)

    # -- orchestration ----------------------------------------------------------------
    @contextlib.contextmanager
    def _held_lock(self) -> Iterator[None]:
        lock = self._lock()
        try:
            lock.__enter__()
        except LockBusyError as exc:
            raise MigrationError(f"{BUSY_MESSAGE} on {self.agents_root} (lock held)") from exc
        try:
            yield
        finally:
            try:
                lock.__exit__(None, None, None)
            except Exception as exc:  # MUST 8: teardown never costs the audit line; flock dies with the fd
                log.warning("releasing the migration lock failed: %s", exc)

    def _audit(self, event: MigrationEvent) -> None:
        try:
            self._record_event(event)
        except Exception:
            log.exception("could not record the migration audit event %s", event.run_id)
            raise

    def run_migration(
        self,
        target_version: int | str,
        dry_run: bool = True,
        *,
        announce: Announce | None = None,
        progress: Progress | None = None,
    ) -> MigrationResult:
        """Migrate every unit to ``target_version`` (or, with ``dry_run``, report what would change).

        Refusals raise :class:`MigrationError` (or :class:`MigrationRollbackUnavailable`);
        a failure after the snapshot restores it and returns a result with
        ``rolled_back=True``. Exactly one audit event is recorded either way.

        >>> FilesystemMigrationBackend(root).run_migration(2, dry_run=True)  # doctest: +SKIP
        """
        run_id = new_run_id()
        from_version = -1  # MUST 8 sentinel until the plan exists
        to_version = -1
        result: MigrationResult | None = None
        try:
            to_version = parse_target_version(target_version)
            if not dry_run and not self.capabilities().supports_transactional_rollback:
                # MUST 5: fail closed before the plan, the snapshot, or any write.
                raise MigrationRollbackUnavailable(
                    f"backend {self.backend_id!r} cannot roll back; a real migration is refused (dry runs are allowed)"
                )
            if not Path(self.agents_root).is_dir():
                raise MigrationError(f"no vault at {self.agents_root}")
            plan = build_plan(self.scripts_dir, self.read_schema_version(), to_version)
            from_version = plan.from_version
            with self._held_lock():
                result = self._locked_run(plan, dry_run, run_id, announce or _default_announce, progress)
                self._audit(self._event_for(run_id, plan, result))
            return result
        except BaseException as exc:
            if result is None:
                self._audit(
                    make_event(
                        run_id=run_id,
                        agents_root=self.agents_root,
                        from_version=from_version,
                        to_version=to_version,
                        dry_run=dry_run,
                        error=f"{type(exc).__name__}: {exc}",
                    )
                )
            raise

    def _event_for(self, run_id: str, plan: MigrationPlan, result: MigrationResult) -> MigrationEvent:
        return make_event(
            run_id=run_id,
            agents_root=self.agents_root,
            from_version=plan.from_version,
            to_version=plan.to_version,
            units_touched=result.units_touched,
            dry_run=result.dry_run,
            rolled_back=result.rolled_back,
            error=result.error,
        )

    def _locked_run(
        self, plan: MigrationPlan, dry_run: bool, run_id: str, announce: Announce, progress: Progress | None
    ) -> MigrationResult:
        units = self.enumerate_units(dry_run=dry_run)
        bad = find_unparseable(units)
        bad_ids = {b.unit_id for b in bad}
        good = [u for u in units if u.unit_id not in bad_ids]

        def result(**kw: Any) -> MigrationResult:
            base: dict[str, Any] = dict(
                plan=plan, snapshot_ref=None, units_touched=0, units_skipped=0, validation_passed=True,
                validation_errors=(), rolled_back=False, dry_run=dry_run, error=None, run_id=run_id,
            )
            base.update(kw)
            return MigrationResult(**base)

        parse_note = f"{len(bad)} unit(s) have frontmatter that does not parse: " + "; ".join(map(str, bad[:5]))
        if bad and not dry_run:
            # Never skipped silently, never counted as current: a real run refuses before its snapshot.
            raise MigrationError(parse_note + (" ..." if len(bad) > 5 else "") + "; fix them and run again")
        if not plan.scripts:
            return result(
                validation_passed=not bad,
                validation_errors=tuple(map(str, bad)),
                error=(parse_note + "; nothing was written") if bad else None,
            )
        if dry_run:
            return self._dry_run(plan, good, bad, result, progress)
        return self._real_run(plan, good, result, announce, progress)

    def _apply_all(self, plan: MigrationPlan, units: list[Any], dry_run: bool, progress: Progress | None) -> tuple[int, int]:
        touched = skipped = 0
        total = len(units)
        for script in plan.scripts:
            phase = f"{script.name}{' (dry run)' if dry_run else ''}"
            for i, unit in enumerate(units):
                try:
                    claimed = script.module.applies_to(unit)
                    summary = self.apply_unit(unit, script, dry_run=dry_run) if claimed else None
                except Exception as exc:
                    raise _UnitFailure(script, unit, exc) from exc
                if summary:
                    touched += 1
                else:
                    skipped += 1
                if progress is not None and (i % 64 == 0 or i == total - 1):
                    progress(phase, i + 1, total)
            if not dry_run:
                self._flush()
        return touched, skipped

    def _dry_run(self, plan: MigrationPlan, units: list[Any], bad: list[UnparseableUnit],
                 result: Callable[..., MigrationResult], progress: Progress | None) -> MigrationResult:
        try:
            touched, skipped = self._apply_all(plan, units, True, progress)
        except _UnitFailure as exc:
            return result(validation_passed=False, error=f"{exc}; dry run: nothing was written")
        names = tuple(s.name for s in plan.scripts)
        changes: list[UnitChange] = []
        for unit in units:
            pending = unit.pending_meta() if hasattr(unit, "pending_meta") else None
            if pending is not None:
                changes.append(diff_meta(unit.unit_id, unit.unit_type, unit.original_meta() or {}, pending, names))
        # Preview of the post-run validation: what the real run would roll back on.
        errors = [str(b) for b in bad] + validate_units(units, plan.to_version, self._unit_filename)
        error = None
        if bad:
            error = f"{len(bad)} unit(s) have frontmatter that does not parse; dry run: nothing was written"
        return result(
            units_touched=touched, units_skipped=skipped, validation_passed=not errors,
            validation_errors=tuple(errors), changes=tuple(changes), error=error,
        )

    def _real_run(self, plan: MigrationPlan, units: list[Any], result: Callable[..., MigrationResult],
                  announce: Announce, progress: Progress | None) -> MigrationResult:
        ref = self.snapshot(plan.to_version)  # MUST 4: before the first apply_unit
        announce(ref, self._describe_ref(ref))
        touched = skipped = 0
        try:
            touched, skipped = self._apply_all(plan, units, False, progress)
            if progress is not None:
                progress("validate", 0, len(units))
            # Every unit, re-read through fresh handles, not only the touched ones.
            errors = validate_units(self.enumerate_units(dry_run=True), plan.to_version, self._unit_filename)
        except BaseException as exc:
            self._restore_after_failure(ref, exc)
            if not isinstance(exc, Exception):
                raise
            return result(snapshot_ref=ref, units_touched=touched, units_skipped=skipped, validation_passed=False,
                          rolled_back=True, error=f"{exc}; the snapshot was restored")
        if errors:
            self._restore_after_failure(ref, None)
            msg = f"validation failed on {len(errors)} issue(s) at v{plan.to_version}; the snapshot was restored"
            if plan.to_version > CURRENT_SCHEMA_VERSION:
                msg += (f" (this package reads schema up to v{CURRENT_SCHEMA_VERSION}; v{plan.to_version} "
                        "is adopted only when CURRENT_SCHEMA_VERSION is bumped)")
            self._record_history(f"v{plan.from_version} -> v{plan.to_version}: rolled back, {msg} ({ref.snapshot_id})")
            return result(snapshot_ref=ref, units_touched=touched, units_skipped=skipped, validation_passed=False,
                          validation_errors=tuple(errors), rolled_back=True, error=msg)
        self._record_history(
            f"v{plan.from_version} -> v{plan.to_version}: {touched} unit change(s) by "
            f"{', '.join(s.name for s in plan.scripts)}; snapshot {ref.snapshot_id}"
        )
        return result(snapshot_ref=ref, units_touched=touched, units_skipped=skipped)

    def _restore_after_failure(self, ref: MigrationSnapshotRef, cause: BaseException | None) -> None:
        self._quiesce()  # no write of the failed pass may land after the restore
        try:
            self.restore(ref)
        except BaseException as exc:
            raise MigrationError(
                f"the migration failed ({cause or 'validation'}) AND restoring snapshot {ref.snapshot_id} failed "
                f"({exc}); run the rollback by hand: {self._describe_ref(ref).splitlines()[-1]}"
            ) from exc
        if cause is not None:
            self._record_history(f"rolled back after: {cause} ({ref.snapshot_id})")

    def restore_and_audit(self, ref: MigrationSnapshotRef | str) -> None:
        """Operator rollback (``--rollback``): restore under the vault lock and record one event (MUST 8)."""
        run_id = new_run_id()
        before = after = -1
        try:
            coerced = self._coerce_ref(ref)
            with self._held_lock():
                before = self.read_schema_version()
                self.restore(coerced)
                after = self.read_schema_version()
                self._audit(make_event(run_id=run_id, agents_root=self.agents_root, from_version=before,
                                       to_version=after, dry_run=False, rolled_back=True))
            self._record_history(f"manual rollback to {coerced.snapshot_id}: v{before} -> v{after}")
        except BaseException as exc:
            if after == -1:
                self._audit(make_event(run_id=run_id, agents_root=self.agents_root, from_version=before,
                                       to_version=before, dry_run=False, rolled_back=False,
                                       error=f"{type(exc).__name__}: {exc}"))
            raise


class _UnitFailure(MigrationError):
    """A script raised (or failed MUST 7) on one unit; names both."""

    def __init__(self, script: LoadedScript, unit: MigratableUnit, cause: Exception) -> None:
        self.script = script.name
        self.unit_id = unit.unit_id
        self.cause = cause
        detail = str(cause) if isinstance(cause, MigrationError) else f"{type(cause).__name__}: {cause}"
        super().__init__(f"{script.name} failed on {unit.unit_id}: {detail}")
