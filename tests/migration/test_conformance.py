"""The MigrationBackend contract (spec MUST 1-8), run against every backend in ``_backends.FACTORIES``.

Only Protocol methods are used to act and to observe, so a database backend
passes or fails these exactly as the filesystem one does.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from atomic_agents._schema import CURRENT_SCHEMA_VERSION
from atomic_agents.exceptions import AtomicAgentsError, MigrationError, MigrationRollbackUnavailable
from atomic_agents.migration import MigrationBackend, MigrationSnapshotRef

from ._backends import memory_harness
from ._vault import V0_TO_V1, V1_TO_V2_SPEC, make_vault, write_note, write_script, write_wiki


def test_protocol_is_satisfied(vault: Path, make_harness) -> None:
    h = make_harness(vault)
    assert isinstance(h.backend, MigrationBackend)
    assert not hasattr(h.backend, "write_schema_version")  # MUST 1: there is no such method


# -- MUST 1 -------------------------------------------------------------------------------
def test_must1_schema_version_is_minimum_over_all_units(agents_root: Path, make_harness) -> None:
    make_vault(agents_root, version=1)
    write_note(agents_root, "caldwell", "old_one", version=0)
    assert make_harness(agents_root).backend.read_schema_version() == 0


def test_must1_missing_schema_version_is_legacy_v0(agents_root: Path, make_harness) -> None:
    make_vault(agents_root, version=1)
    write_wiki(agents_root, "nova", "ancient_page", version=None)
    assert make_harness(agents_root).backend.read_schema_version() == 0


def test_must1_empty_vault_reports_current_version(agents_root: Path, make_harness) -> None:
    (agents_root / "caldwell" / "memory").mkdir(parents=True)
    assert make_harness(agents_root).backend.read_schema_version() == CURRENT_SCHEMA_VERSION


def test_must1_no_integer_version_reports_current_and_warns(agents_root: Path, make_harness, caplog) -> None:
    p = write_note(agents_root, "caldwell", "weird")
    p.write_text(p.read_text().replace("schema_version: 1", 'schema_version: "one"'))
    h = make_harness(agents_root)
    with caplog.at_level(logging.WARNING, logger="atomic_agents.migration"):
        assert h.backend.read_schema_version() == CURRENT_SCHEMA_VERSION
    if h.name == "filesystem":
        assert any("no integer schema_version" in r.getMessage() for r in caplog.records)


def test_must1_read_schema_version_is_read_only(vault: Path, make_harness) -> None:
    h = make_harness(vault)
    before = h.metas()
    h.backend.read_schema_version()
    assert h.metas() == before


# -- MUST 2 -------------------------------------------------------------------------------
def test_must2_each_unit_once_with_a_unit_type(vault: Path, make_harness) -> None:
    units = make_harness(vault).backend.enumerate_units()
    ids = [u.unit_id for u in units]
    assert len(ids) == len(set(ids)) == 12  # 2 agents x (4 notes + 2 wiki)
    assert {u.unit_type for u in units} == {"memory", "wiki"}
    assert not any(i.rsplit("/", 1)[-1].startswith("INDEX") for i in ids)


# -- MUST 3 -------------------------------------------------------------------------------
def test_must3_dry_run_handles_never_write(vault: Path, make_harness) -> None:
    h = make_harness(vault)
    unit = h.backend.enumerate_units()[0]
    assert unit.dry_run is True
    meta = unit.read_frontmatter()
    meta["name"] = "changed"
    unit.write_frontmatter(meta)
    assert h.metas()[unit.unit_id]["name"] != "changed"


def test_must3_read_frontmatter_returns_a_copy(vault: Path, make_harness) -> None:
    unit = make_harness(vault).backend.enumerate_units()[0]
    unit.read_frontmatter()["name"] = "mutated"
    assert unit.read_frontmatter()["name"] != "mutated"


# -- MUST 4 -------------------------------------------------------------------------------
def test_must4_snapshot_announced_before_first_write(agents_root: Path, make_harness) -> None:
    make_vault(agents_root, version=None)
    write_script(agents_root, "v0_to_v1.py", V0_TO_V1)
    h = make_harness(agents_root)
    seen: list[tuple[MigrationSnapshotRef, dict]] = []
    before = h.metas()
    result = h.backend.run_migration(1, dry_run=False, announce=lambda ref, text: seen.append((ref, h.metas())))
    assert result.ok, result
    assert len(seen) == 1 and seen[0][0] == result.snapshot_ref
    assert seen[0][1] == before  # nothing written when the ref was announced
    assert all(m["schema_version"] == 1 for m in h.metas().values())


def test_must4_restore_returns_units_to_the_snapshot(agents_root: Path, make_harness) -> None:
    make_vault(agents_root, version=None)
    write_script(agents_root, "v0_to_v1.py", V0_TO_V1)
    h = make_harness(agents_root)
    before = h.metas()
    result = h.backend.run_migration(1, dry_run=False, announce=lambda *a: None)
    assert h.metas() != before
    h.backend.restore(result.snapshot_ref)
    assert h.metas() == before


# -- MUST 5 -------------------------------------------------------------------------------
def test_must5_no_rollback_backend_refuses_real_run_before_any_write(agents_root: Path) -> None:
    make_vault(agents_root, version=None)
    write_script(agents_root, "v0_to_v1.py", V0_TO_V1)
    h = memory_harness(agents_root, rollback=False)
    before = h.metas()
    with pytest.raises(MigrationRollbackUnavailable):
        h.backend.run_migration(1, dry_run=False)
    assert h.metas() == before
    assert h.backend._snapshots == {}  # not even a snapshot was attempted
    [event] = h.events()
    assert event["from_version"] == -1 and "cannot roll back" in event["error"]


def test_must5_no_rollback_backend_dry_run_proceeds(agents_root: Path) -> None:
    make_vault(agents_root, version=None)
    write_script(agents_root, "v0_to_v1.py", V0_TO_V1)
    h = memory_harness(agents_root, rollback=False)
    result = h.backend.run_migration(1, dry_run=True)
    assert result.ok and len(result.units_touched) == 12
    assert all(isinstance(s, dict) and s["script"] == "v0_to_v1.py" for s in result.units_touched)


# -- MUST 6 -------------------------------------------------------------------------------
def test_must6_backend_id_is_stable_lowercase_nonempty(vault: Path, make_harness) -> None:
    b = make_harness(vault).backend
    ids = {b.backend_id for _ in range(5)}
    assert len(ids) == 1
    (bid,) = ids
    assert bid and bid == bid.lower()


# -- MUST 7 -------------------------------------------------------------------------------
LAZY = '''
FROM_VERSION = 0
TO_VERSION = 1
def applies_to(unit):
    return "schema_version" not in unit.read_frontmatter()
def migrate(unit):
    meta = unit.read_frontmatter()
    if unit.unit_type == "wiki":
        return {}          # claims the unit, then forgets to bump it
    meta["schema_version"] = 1
    unit.write_frontmatter(meta)
    return {"changes": ["bumped"]}
'''


def test_must7_unbumped_unit_fails_names_script_and_unit_and_rolls_back(agents_root: Path, make_harness) -> None:
    make_vault(agents_root, version=None)
    write_script(agents_root, "v0_to_v1.py", LAZY)
    h = make_harness(agents_root)
    before = h.metas()
    result = h.backend.run_migration(1, dry_run=False, announce=lambda *a: None)
    assert result.rolled_back and not result.ok
    assert "v0_to_v1.py" in result.error and "did not bump" in result.error
    wiki_ids = [u.unit_id for u in h.backend.enumerate_units() if u.unit_type == "wiki"]
    assert any(w in result.error for w in wiki_ids)
    assert h.metas() == before


def test_must7_apply_unit_raises_atomic_agents_error(agents_root: Path, make_harness) -> None:
    make_vault(agents_root, version=None, agents=("caldwell",))
    write_script(agents_root, "v0_to_v1.py", LAZY)
    from atomic_agents._format._scripts import load_script

    script = load_script(agents_root / "_migrations" / "v0_to_v1.py")
    b = make_harness(agents_root).backend
    wiki = next(u for u in b.enumerate_units(dry_run=False) if u.unit_type == "wiki")
    with pytest.raises(AtomicAgentsError, match="did not bump"):
        b.apply_unit(wiki, script, dry_run=False)


# -- MUST 8 -------------------------------------------------------------------------------
def test_must8_audit_on_success_and_dry_run(agents_root: Path, make_harness) -> None:
    make_vault(agents_root, version=None)
    write_script(agents_root, "v0_to_v1.py", V0_TO_V1)
    h = make_harness(agents_root)
    h.backend.run_migration(1, dry_run=True)
    h.backend.run_migration(1, dry_run=False, announce=lambda *a: None)
    dry, real = h.events()
    assert (dry["dry_run"], dry["from_version"], dry["to_version"], dry["units_touched"]) == (True, 0, 1, 12)
    assert (real["dry_run"], real["rolled_back"], real["error"], real["units_touched"]) == (False, False, "", 12)


def test_must8_audit_on_validation_rollback(vault: Path, make_harness) -> None:
    write_script(vault, "v1_to_v2.py", V1_TO_V2_SPEC)
    h = make_harness(vault)
    result = h.backend.run_migration(2, dry_run=False, announce=lambda *a: None)
    assert result.rolled_back
    [event] = h.events()
    assert event["rolled_back"] is True and event["from_version"] == 1 and event["to_version"] == 2


def test_must8_audit_on_mid_apply_exception(agents_root: Path, make_harness) -> None:
    make_vault(agents_root, version=None)
    write_script(agents_root, "v0_to_v1.py", RAISES_MIDWAY)
    h = make_harness(agents_root)
    result = h.backend.run_migration(1, dry_run=False, announce=lambda *a: None)
    [event] = h.events()
    assert event["rolled_back"] is True and "boom" in event["error"] and result.rolled_back


def test_must8_audit_on_pre_plan_refusal_uses_sentinel(vault: Path, make_harness) -> None:
    h = make_harness(vault)
    with pytest.raises(MigrationError, match="missing migration script"):
        h.backend.run_migration(3, dry_run=False)
    [event] = h.events()
    assert event["from_version"] == -1 and event["to_version"] == 3 and "missing" in event["error"]


def test_must8_audit_on_lock_busy_records_resolved_version(agents_root: Path, make_harness) -> None:
    make_vault(agents_root, version=None)
    write_script(agents_root, "v0_to_v1.py", V0_TO_V1)
    h = make_harness(agents_root)
    with h.lock():
        with pytest.raises(MigrationError, match="Another migration is already running"):
            h.backend.run_migration(1, dry_run=False)
    [event] = h.events()
    assert event["from_version"] == 0 and event["to_version"] == 1 and "Another migration" in event["error"]


def test_must8_audit_on_manual_rollback(agents_root: Path, make_harness) -> None:
    make_vault(agents_root, version=None)
    write_script(agents_root, "v0_to_v1.py", V0_TO_V1)
    h = make_harness(agents_root)
    result = h.backend.run_migration(1, dry_run=False, announce=lambda *a: None)
    h.backend.restore_and_audit(result.snapshot_ref)
    with pytest.raises(MigrationError):
        h.backend.restore_and_audit(MigrationSnapshotRef(h.backend.backend_id, "no-such-snapshot.tar.gz"))
    _, ok, failed = h.events()
    assert (ok["rolled_back"], ok["from_version"], ok["to_version"], ok["error"]) == (True, 1, 0, "")
    assert failed["rolled_back"] is False and "no-such-snapshot" in failed["error"]


def test_must8_audit_survives_lock_release_failure(agents_root: Path, make_harness, monkeypatch) -> None:
    make_vault(agents_root, version=None)
    write_script(agents_root, "v0_to_v1.py", V0_TO_V1)
    h = make_harness(agents_root)
    real_lock = h.backend._lock

    class BrokenRelease:
        def __init__(self) -> None:
            self.inner = real_lock()

        def __enter__(self):
            return self.inner.__enter__()

        def __exit__(self, *exc):
            self.inner.__exit__(*exc)
            raise OSError("release failed")

    monkeypatch.setattr(h.backend, "_lock", BrokenRelease)
    result = h.backend.run_migration(1, dry_run=False, announce=lambda *a: None)
    assert result.ok
    [event] = h.events()
    assert event["error"] == "" and event["units_touched"] == 12


# -- runner rules that every backend shares -------------------------------------------------
RAISES_MIDWAY = '''
FROM_VERSION = 0
TO_VERSION = 1
calls = []
def applies_to(unit):
    return "schema_version" not in unit.read_frontmatter()
def migrate(unit):
    calls.append(unit.unit_id)
    if len(calls) == 5:
        raise RuntimeError("boom")
    meta = unit.read_frontmatter()
    meta["schema_version"] = 1
    unit.write_frontmatter(meta)
    return {"changes": ["bumped"]}
'''

EMPTY_FOR_WIKI = '''
FROM_VERSION = 0
TO_VERSION = 1
def applies_to(unit):
    return "schema_version" not in unit.read_frontmatter()
def migrate(unit):
    if unit.unit_type == "wiki":
        return {}
    meta = unit.read_frontmatter()
    meta["schema_version"] = 1
    unit.write_frontmatter(meta)
    return {"changes": ["bumped"]}
'''


def test_dry_run_skip_is_decided_on_the_raw_return_value(agents_root: Path, make_harness) -> None:
    make_vault(agents_root, version=None)  # 8 notes, 4 wiki pages
    write_script(agents_root, "v0_to_v1.py", EMPTY_FOR_WIKI)
    result = make_harness(agents_root).backend.run_migration(1, dry_run=True)
    assert (len(result.units_touched), result.units_skipped) == (8, 4)


def test_dry_run_counts_applies_to_false_as_skipped(agents_root: Path, make_harness) -> None:
    make_vault(agents_root, version=1)
    write_note(agents_root, "caldwell", "legacy_a", version=None)
    write_script(agents_root, "v0_to_v1.py", V0_TO_V1)
    result = make_harness(agents_root).backend.run_migration(1, dry_run=True)
    assert (len(result.units_touched), result.units_skipped) == (1, 12)
    [change] = result.changes
    assert change.added == ("schema_version",)


def test_dry_run_reports_added_removed_renamed_keys(vault: Path, make_harness) -> None:
    write_script(vault, "v1_to_v2.py", V1_TO_V2_SPEC)
    h = make_harness(vault)
    before = h.metas()
    result = h.backend.run_migration(2, dry_run=True)
    assert h.metas() == before
    change = result.changes[0]
    assert ("sources", "evidence") in change.renamed
    assert "schema_version" in change.changed
    note = next(c for c in result.changes if c.unit_type == "memory")
    assert "provenance" in note.added  # notes had none; wiki pages already do


def test_validation_covers_every_unit_not_only_touched(agents_root: Path, make_harness) -> None:
    make_vault(agents_root, version=None)
    only_notes = V0_TO_V1.replace('return "schema_version" not in unit.read_frontmatter()',
                                  'return unit.unit_type == "memory"')
    write_script(agents_root, "v0_to_v1.py", only_notes)
    h = make_harness(agents_root)
    before = h.metas()
    result = h.backend.run_migration(1, dry_run=False, announce=lambda *a: None)
    assert result.rolled_back and not result.validation_passed
    assert result.validation_errors and all("schema_version" in e["error"] for e in result.validation_errors)
    assert h.metas() == before


def test_version_cliff_real_v1_to_v2_validates_and_rolls_back(vault: Path, make_harness) -> None:
    write_script(vault, "v1_to_v2.py", V1_TO_V2_SPEC)
    h = make_harness(vault)
    before = h.metas()
    result = h.backend.run_migration(2, dry_run=False, announce=lambda *a: None)
    assert result.rolled_back and not result.validation_passed
    assert any("schema_version" in e["error"] for e in result.validation_errors)
    assert h.metas() == before


def test_script_raising_midway_rolls_back_automatically(agents_root: Path, make_harness) -> None:
    make_vault(agents_root, version=None)
    write_script(agents_root, "v0_to_v1.py", RAISES_MIDWAY)
    h = make_harness(agents_root)
    before = h.metas()
    result = h.backend.run_migration(1, dry_run=False, announce=lambda *a: None)
    assert result.rolled_back and "boom" in result.error and "v0_to_v1.py" in result.error
    assert h.metas() == before


def test_already_at_target_is_a_no_op(vault: Path, make_harness) -> None:
    h = make_harness(vault)
    result = h.backend.run_migration(1, dry_run=False)
    assert result.ok and result.snapshot_ref is None and result.plan.scripts == ()
