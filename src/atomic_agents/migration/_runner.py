"""The runner: one implementation of ``run_migration`` / ``restore_and_audit`` for every backend.

:class:`RunnerMixin` builds the two orchestration methods of
:class:`~atomic_agents.migration.MigrationBackend` on the backend's primitives
(``capabilities``, ``read_schema_version``, ``enumerate_units``, ``apply_unit``,
``snapshot``, ``restore``) plus a few storage hooks (the lock, where audit
events go). A database backend subclasses it and supplies storage; the
ordering guarantees below then hold for it unchanged:

    refuse no-rollback real runs (MUST 5)  ->  take the vault lock (a second
    run is refused at once)  ->  probe version, build the plan  ->  enumerate
    ->  snapshot + announce (MUST 4)
    ->  apply every script to every unit (MUST 7 inside apply_unit)
    ->  validate every unit  ->  restore on any failure  ->  audit (MUST 8)
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Callable, Iterator, Sequence
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
from .._format._scripts import MIGRATIONS_DIR, build_plan, parse_target_version
from .._format._units import _Handle
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
from ._units import copy_meta, diff_meta, peek

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


def apply_script(unit: MigratableUnit, script: LoadedScript, dry_run: bool) -> dict[str, Any]:
    """``applies_to(unit)`` then ``migrate(unit)`` with the spec's return-value contract and MUST 7.

    Returns the script's summary (plus ``script`` and ``unit_id``), or ``{}``
    when the unit is skipped: ``applies_to`` said no, or (dry run) ``migrate``
    returned a falsy value.
    """
    if unit.dry_run != dry_run:
        raise MigrationError(f"{unit.unit_id}: handle built with dry_run={unit.dry_run} used for dry_run={dry_run}")
    if not script.module.applies_to(unit):
        return {}
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
        return {}
    summary = dict(raw) if isinstance(raw, dict) else {"result": raw}
    summary.setdefault("script", script.name)
    summary.setdefault("unit_id", unit.unit_id)
    return summary


class _Preview(_Handle):
    """The handle a dry run's scripts get: reads see the unit as the chain left it, writes are no-ops.

    The chain is previewed here, in the runner: after each script pass the
    runner builds the next pass's handles from what this pass's scripts
    wrote, so a later script sees an earlier one's output while every
    handle keeps the spec's contract (on a dry-run handle ``write_frontmatter``
    changes nothing a later ``read_frontmatter`` returns).
    """

    __slots__ = ("_unit_id", "_unit_type", "_dry_run", "_meta", "written")

    def __init__(self, unit_id: str, unit_type: str, meta: dict[str, Any]) -> None:
        self._unit_id = unit_id
        self._unit_type = unit_type
        self._dry_run = True
        self._meta = meta  # never mutated: reads hand out copies
        self.written: dict[str, Any] | None = None

    def read_frontmatter(self) -> dict[str, Any]:
        return copy_meta(self._meta)

    def peek_frontmatter(self) -> dict[str, Any]:
        return self._meta

    def write_frontmatter(self, meta: dict[str, Any]) -> None:
        if not isinstance(meta, dict):
            raise TypeError(f"write_frontmatter expects a dict, got {type(meta).__name__}")
        self.written = copy_meta(meta)

    def after(self) -> dict[str, Any]:
        """The frontmatter as the next script of the chain sees it."""
        return self.written if self.written is not None else self._meta


def validate_units(
    units: Sequence[MigratableUnit], target_version: int, filename_of: Callable[[MigratableUnit], str | None]
) -> list[dict[str, Any]]:
    """Every unit against the target schema: notes with the note validator, wiki with the wiki one.

    One ``{"unit_id", "error"}`` dict per problem (the reference implementation's
    shape), plus ``field`` for a field that failed and ``line`` for a parse error.
    """
    from .._format._validate import validate_note_meta, validate_wiki_meta

    errors: list[dict[str, Any]] = []
    for unit in units:
        try:
            meta = peek(unit)  # validators only read
        except FrontmatterParseError as exc:
            errors.append(_unparseable_error(UnparseableUnit(unit.unit_id, exc.line, exc.message)))
            continue
        check = validate_wiki_meta if unit.unit_type == "wiki" else validate_note_meta
        for issue in check(meta, filename=filename_of(unit), path=unit.unit_id, target_version=target_version):
            if issue.severity == "error":
                errors.append({"unit_id": unit.unit_id, "error": str(issue), "field": issue.field})
    return errors


def _unparseable_error(bad: UnparseableUnit) -> dict[str, Any]:
    return {"unit_id": bad.unit_id, "error": f"unparseable: {bad}", "line": bad.line}


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

    def apply_unit(self, unit: MigratableUnit, script: LoadedScript, dry_run: bool = True) -> dict[str, Any]:
        """``applies_to`` + ``migrate`` on one unit; ``{}`` when skipped; on a real run verify the bump (MUST 7)."""
        return apply_script(unit, script, dry_run)

    # -- hooks for the lock's bookkeeping (a backend may leave them as they are) ------
    def _publish_plan(self, run_id: str, plan: MigrationPlan) -> None:
        """Tell a migration refused by our lock which ``from_version`` we resolved (MUST 8)."""

    def _published_from_version(self) -> int | None:
        """The ``from_version`` the lock's holder published, if any."""
        return None

    def _sweep_debris(self) -> None:
        """Remove what a killed run left behind (under the lock, before anything else)."""

    # -- orchestration ----------------------------------------------------------------
    @contextlib.contextmanager
    def _held_lock(self, on_busy: Callable[[], None] | None = None) -> Iterator[None]:
        lock = self._lock()
        try:
            lock.__enter__()
        except LockBusyError as exc:
            if on_busy is not None:
                on_busy()
            raise MigrationError(f"{BUSY_MESSAGE} on {self.agents_root} (lock held)") from exc
        try:
            yield
        finally:
            try:
                lock.__exit__(None, None, None)
            except Exception as exc:  # MUST 8: teardown never costs the audit line; flock dies with the fd
                log.warning("releasing the migration lock failed: %s", exc)

    def _busy_from_version(self) -> int:
        """For the audit line of a lock-busy refusal: the holder's resolved version, else a probe."""
        published = self._published_from_version()
        if published is not None:
            return published
        try:  # the holder has not resolved its plan yet: read-only probe (rare: its first moments)
            return self.read_schema_version()
        except Exception:
            return -1

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
        ``rolled_back=True`` (``rolled_back=False`` and the error when the restore
        itself failed). Exactly one audit event is recorded either way.

        >>> FilesystemMigrationBackend(root).run_migration(2, dry_run=True)  # doctest: +SKIP
        """
        run_id = new_run_id()
        from_version = -1  # MUST 8 sentinel until the plan exists
        to_version = -1
        result: MigrationResult | None = None

        def on_busy() -> None:
            nonlocal from_version
            from_version = self._busy_from_version()

        try:
            to_version = parse_target_version(target_version)
            if not dry_run and not self.capabilities().supports_transactional_rollback:
                # MUST 5: fail closed before the plan, the snapshot, or any write.
                raise MigrationRollbackUnavailable(
                    f"backend {self.backend_id!r} cannot roll back; a real migration is refused (dry runs are allowed)"
                )
            if not Path(self.agents_root).is_dir():
                raise MigrationError(f"no vault at {self.agents_root}")
            # The lock comes before the vault-wide version scan, so a second run is
            # refused at once; it still records the from_version the holder resolved.
            with self._held_lock(on_busy):
                self._sweep_debris()
                plan = build_plan(self.scripts_dir, self.read_schema_version(), to_version)
                from_version = plan.from_version
                self._publish_plan(run_id, plan)
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
            units_touched=len(result.units_touched),
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
                plan=plan, snapshot_ref=None, units_touched=[], units_skipped=0, validation_passed=True,
                validation_errors=[], rolled_back=False, dry_run=dry_run, error="", run_id=run_id,
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
                validation_errors=[_unparseable_error(b) for b in bad],
                error=(parse_note + "; nothing was written") if bad else "",
            )
        if dry_run:
            return self._dry_run(plan, good, bad, result, progress)
        return self._real_run(plan, good, result, announce, progress)

    def _apply_pass(self, script: LoadedScript, units: list[Any], dry_run: bool, progress: Progress | None,
                    touched: list[dict[str, Any]]) -> int:
        """One script over every unit; appends summaries to ``touched``; returns how many were skipped."""
        skipped = 0
        total = len(units)
        phase = f"{script.name}{' (dry run)' if dry_run else ''}"
        for i, unit in enumerate(units):
            try:
                summary = self.apply_unit(unit, script, dry_run=dry_run)
            except Exception as exc:
                raise _UnitFailure(script, unit, exc) from exc
            if summary:
                touched.append(summary)
            else:
                skipped += 1
            if progress is not None and (i % 64 == 0 or i == total - 1):
                progress(phase, i + 1, total)
        return skipped

    def _dry_run(self, plan: MigrationPlan, units: list[Any], bad: list[UnparseableUnit],
                 result: Callable[..., MigrationResult], progress: Progress | None) -> MigrationResult:
        touched: list[dict[str, Any]] = []
        skipped = 0
        originals = [peek(u) for u in units]  # read-only; _Preview never mutates what it is given
        current = originals
        wrote = [False] * len(units)
        try:
            for script in plan.scripts:
                handles = [_Preview(u.unit_id, u.unit_type, m) for u, m in zip(units, current)]
                skipped += self._apply_pass(script, handles, True, progress, touched)
                for i, h in enumerate(handles):
                    wrote[i] = wrote[i] or h.written is not None
                current = [h.after() for h in handles]
        except _UnitFailure as exc:
            return result(validation_passed=False, error=f"{exc}; dry run: nothing was written")
        names = tuple(s.name for s in plan.scripts)
        changes = [
            diff_meta(u.unit_id, u.unit_type, before, after, names)
            for u, before, after, w in zip(units, originals, current, wrote) if w
        ]
        # Preview of the post-run validation: what the real run would roll back on.
        finals = [_Preview(u.unit_id, u.unit_type, m) for u, m in zip(units, current)]
        errors = [_unparseable_error(b) for b in bad] + validate_units(finals, plan.to_version, self._unit_filename)
        error = ""
        if bad:
            error = f"{len(bad)} unit(s) have frontmatter that does not parse; dry run: nothing was written"
        return result(
            units_touched=touched, units_skipped=skipped, validation_passed=not errors,
            validation_errors=errors, changes=tuple(changes), error=error,
        )

    def _real_run(self, plan: MigrationPlan, units: list[Any], result: Callable[..., MigrationResult],
                  announce: Announce, progress: Progress | None) -> MigrationResult:
        ref = self.snapshot(plan.to_version)  # MUST 4: before the first apply_unit
        announce(ref, self._describe_ref(ref))
        touched: list[dict[str, Any]] = []
        skipped = 0
        try:
            for script in plan.scripts:
                skipped += self._apply_pass(script, units, False, progress, touched)
                self._flush()
            if progress is not None:
                progress("validate", 0, len(units))
            # Every unit, re-read through fresh handles, not only the touched ones.
            errors = validate_units(self.enumerate_units(dry_run=True), plan.to_version, self._unit_filename)
        except BaseException as exc:
            restore_failed = self._restore_after_failure(ref, exc)
            if not isinstance(exc, Exception):
                raise
            if restore_failed:
                return result(snapshot_ref=ref, units_touched=touched, units_skipped=skipped,
                              validation_passed=False, rolled_back=False, error=f"{exc}; {restore_failed}")
            return result(snapshot_ref=ref, units_touched=touched, units_skipped=skipped, validation_passed=False,
                          rolled_back=True, error=f"{exc}; the snapshot was restored")
        if errors:
            restore_failed = self._restore_after_failure(ref, None)
            msg = f"validation failed on {len(errors)} issue(s) at v{plan.to_version}"
            if plan.to_version > CURRENT_SCHEMA_VERSION:
                msg += (f" (this package reads schema up to v{CURRENT_SCHEMA_VERSION}; v{plan.to_version} "
                        "is adopted only when CURRENT_SCHEMA_VERSION is bumped)")
            if restore_failed:
                return result(snapshot_ref=ref, units_touched=touched, units_skipped=skipped, validation_passed=False,
                              validation_errors=errors, rolled_back=False, error=f"{msg}; {restore_failed}")
            msg += "; the snapshot was restored"
            self._record_history(f"v{plan.from_version} -> v{plan.to_version}: rolled back, {msg} ({ref.snapshot_id})")
            return result(snapshot_ref=ref, units_touched=touched, units_skipped=skipped, validation_passed=False,
                          validation_errors=errors, rolled_back=True, error=msg)
        self._record_history(
            f"v{plan.from_version} -> v{plan.to_version}: {len(touched)} unit change(s) by "
            f"{', '.join(s.name for s in plan.scripts)}; snapshot {ref.snapshot_id}"
        )
        return result(snapshot_ref=ref, units_touched=touched, units_skipped=skipped)

    def _restore_after_failure(self, ref: MigrationSnapshotRef, cause: BaseException | None) -> str:
        """Restore ``ref``; return "" when it worked, else what failed and how to finish by hand.

        A failed restore is reported in the result (and its audit line), not
        raised, so the caller always learns the vault's state and the command to run.
        """
        self._quiesce()  # no write of the failed pass may land after the restore
        try:
            self.restore(ref)
        except Exception as exc:
            msg = (f"restoring snapshot {ref.snapshot_id} ALSO failed ({type(exc).__name__}: {exc}); the vault may "
                   f"be half-migrated: run the rollback by hand: {self._describe_ref(ref).splitlines()[-1]}")
            log.error("%s", msg)
            try:
                self._record_history(f"restore of {ref.snapshot_id} failed after: {cause or 'validation'}: {exc}")
            except Exception:  # the result and the audit line still say it
                pass
            return msg
        if cause is not None:
            self._record_history(f"rolled back after: {cause} ({ref.snapshot_id})")
        return ""

    def restore_and_audit(self, ref: MigrationSnapshotRef | str) -> None:
        """Operator rollback (``--rollback``): restore under the vault lock and record one event (MUST 8).

        The event says ``rolled_back=True`` once the restore itself succeeded,
        whatever fails after it (reading the restored version, the history line,
        the lock's release): the vault was restored, and that is what an
        operator needs the record to say. A failure before or in the restore
        records ``rolled_back=False`` and the error, then re-raises.
        """
        run_id = new_run_id()
        before = after = -1
        restored = recorded = False
        coerced: MigrationSnapshotRef | None = None
        try:
            coerced = self._coerce_ref(ref)
            with self._held_lock():
                self._sweep_debris()
                try:
                    before = self.read_schema_version()
                except Exception as exc:  # a flaky probe never stops the operator's recovery
                    log.warning("reading the version before the rollback failed (%s); recording -1", exc)
                self.restore(coerced)
                restored = True
                try:
                    after = self.read_schema_version()
                except Exception as exc:
                    log.warning("the rollback worked but reading the restored version failed (%s); recording -1", exc)
                self._audit(make_event(run_id=run_id, agents_root=self.agents_root, from_version=before,
                                       to_version=after, dry_run=False, rolled_back=True))
                recorded = True
        except BaseException as exc:
            if not recorded:
                self._audit(make_event(run_id=run_id, agents_root=self.agents_root, from_version=before,
                                       to_version=after if restored else before, dry_run=False,
                                       rolled_back=restored, error=f"{type(exc).__name__}: {exc}"))
            raise
        try:
            self._record_history(f"manual rollback to {coerced.snapshot_id}: v{before} -> v{after}")
        except Exception as exc:  # the audit line (MUST 8) already holds the record
            log.warning("the rollback worked but its history line could not be written: %s", exc)


class _UnitFailure(MigrationError):
    """A script raised (or failed MUST 7) on one unit; names both."""

    def __init__(self, script: LoadedScript, unit: MigratableUnit, cause: Exception) -> None:
        self.script = script.name
        self.unit_id = unit.unit_id
        self.cause = cause
        detail = str(cause) if isinstance(cause, MigrationError) else f"{type(cause).__name__}: {cause}"
        super().__init__(f"{script.name} failed on {unit.unit_id}: {detail}")
