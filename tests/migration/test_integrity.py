"""Issue 7 §4: MUST 1 and MUST 8 to the letter, dry-run handles, the lock's refusal, debris, and the
reference implementation's public shapes (units_touched, apply_unit, a failed restore, atomic_write)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from atomic_agents._io import atomic_write
from atomic_agents.exceptions import UnsafePathError
from atomic_agents._schema import CURRENT_SCHEMA_VERSION
from atomic_agents.exceptions import MigrationError
from atomic_agents.migration import FilesystemMigrationBackend, MigrationSnapshotRef, parse_target_version
from atomic_agents._format._scripts import load_script
from atomic_agents.migration._units import FileUnit, version_of
from atomic_agents._format._units import meta_version

from ._vault import V0_TO_V1, make_vault, tree, write_note, write_script

QUIET = {"announce": lambda *a: None}
MALFORMED = ['"1"', "1.5", "null", "true", "-1", "[1]", "v1"]


def _set_version(path: Path, literal: str | None) -> None:
    text = path.read_text()
    line = "" if literal is None else f"schema_version: {literal}\n"
    path.write_text(text.replace("schema_version: 1\n", line))


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


# -- MUST 1 -----------------------------------------------------------------------------
@pytest.mark.parametrize("literal", MALFORMED)
def test_must1_a_present_but_malformed_version_is_not_legacy(agents_root: Path, literal: str, caplog) -> None:
    good = write_note(agents_root, "a", "good", version=1)
    bad = write_note(agents_root, "a", "bad", version=1)
    _set_version(bad, literal)
    backend = FilesystemMigrationBackend(agents_root)
    with caplog.at_level(logging.WARNING, logger="atomic_agents.migration"):
        assert backend.read_schema_version() == 1  # excluded from the minimum, not read as v0
    assert str(bad) in caplog.text  # the diagnostic names the file
    status = backend.status()
    assert status.invalid_version == (str(bad),) and status.by_version == {1: 1}
    assert str(good) not in status.invalid_version


def test_must1_a_unit_with_no_version_is_legacy_v0(agents_root: Path) -> None:
    write_note(agents_root, "a", "good", version=1)
    write_note(agents_root, "a", "old", version=None)
    _set_version(write_note(agents_root, "a", "bad", version=1), '"1"')
    backend = FilesystemMigrationBackend(agents_root)
    assert backend.read_schema_version() == 0
    assert backend.status().by_version == {0: 1, 1: 1}


def test_must1_every_unit_malformed_reports_current_with_a_diagnostic(agents_root: Path, caplog) -> None:
    for i, literal in enumerate(MALFORMED):
        _set_version(write_note(agents_root, "a", f"bad_{i}", version=1), literal)
    with caplog.at_level(logging.WARNING, logger="atomic_agents.migration"):
        assert FilesystemMigrationBackend(agents_root).read_schema_version() == CURRENT_SCHEMA_VERSION
    assert f"{len(MALFORMED)} unit(s)" in caplog.text


def test_must1_the_vault_and_the_runner_share_one_version_rule() -> None:
    cases = [{}, {"schema_version": 0}, {"schema_version": 3}, {"schema_version": "1"}, {"schema_version": None},
             {"schema_version": True}, {"schema_version": -1}, {"schema_version": 1.0}]
    assert [version_of(m) for m in cases] == [meta_version(m) for m in cases] == [0, 0, 3, None, None, None, None, None]


# -- MUST 8: a manual rollback that restored the vault says so ------------------------------
def _migrated(root: Path) -> tuple[FilesystemMigrationBackend, MigrationSnapshotRef]:
    make_vault(root, version=None)
    write_script(root, "v0_to_v1.py", V0_TO_V1)
    backend = FilesystemMigrationBackend(root)
    result = backend.run_migration(1, dry_run=False, **QUIET)
    assert result.ok, result.error
    return backend, result.snapshot_ref


def _events(backend: FilesystemMigrationBackend) -> list[dict]:
    return [json.loads(line) for line in backend.audit_path.read_text().splitlines()]


def test_must8_rollback_is_recorded_as_done_when_the_version_read_after_it_fails(agents_root: Path,
                                                                                 monkeypatch) -> None:
    backend, ref = _migrated(agents_root)
    real = backend.read_schema_version
    calls = []

    def flaky() -> int:
        calls.append(1)
        if len(calls) == 2:  # the read after the restore
            raise OSError("disk hiccup")
        return real()

    monkeypatch.setattr(backend, "read_schema_version", flaky)
    backend.restore_and_audit(ref)
    event = _events(backend)[-1]
    assert (event["rolled_back"], event["from_version"], event["to_version"]) == (True, 1, -1)
    assert real() == 0  # the vault really is back


def test_must8_rollback_is_recorded_as_done_when_a_later_step_fails(agents_root: Path, monkeypatch) -> None:
    backend, ref = _migrated(agents_root)

    def broken_history(line: str) -> None:
        raise OSError("README is read-only")

    monkeypatch.setattr(backend, "_record_history", broken_history)
    backend.restore_and_audit(ref)  # the history line is not the audit record: the rollback stands
    event = _events(backend)[-1]
    assert event["rolled_back"] is True and event["error"] == ""
    assert backend.read_schema_version() == 0


def test_must8_rollback_is_recorded_as_done_when_the_lock_release_fails(agents_root: Path, monkeypatch) -> None:
    backend, ref = _migrated(agents_root)
    from atomic_agents.migration import _filesystem

    def bad_exit(self, *exc: object) -> None:
        raise OSError("release failed")

    monkeypatch.setattr(_filesystem._VaultLock, "__exit__", bad_exit)
    backend.restore_and_audit(ref)
    assert _events(backend)[-1]["rolled_back"] is True


def test_must8_a_rollback_that_could_not_restore_says_so(agents_root: Path, monkeypatch) -> None:
    backend, ref = _migrated(agents_root)

    def broken_restore(r: MigrationSnapshotRef) -> None:
        raise MigrationError("archive unreadable")

    monkeypatch.setattr(backend, "restore", broken_restore)
    with pytest.raises(MigrationError):
        backend.restore_and_audit(ref)
    event = _events(backend)[-1]
    assert event["rolled_back"] is False and "archive unreadable" in event["error"]


# -- dry-run handles --------------------------------------------------------------------
def test_a_dry_run_write_is_a_no_op_for_the_handle_too(vault: Path) -> None:
    path = vault / "caldwell" / "memory" / "feedback_topic_0.md"
    before = path.read_bytes()
    unit = FileUnit(path, "memory", dry_run=True)
    meta = unit.read_frontmatter()
    unit.write_frontmatter({**meta, "schema_version": 2, "extra": "x"})
    assert unit.read_frontmatter() == meta  # spec handle table: a later read is unchanged
    assert path.read_bytes() == before


def test_every_backends_dry_run_handles_ignore_their_own_writes(vault: Path, make_harness) -> None:
    h = make_harness(vault)
    for unit in h.backend.enumerate_units(dry_run=True):
        meta = unit.read_frontmatter()
        unit.write_frontmatter({"schema_version": 99})
        assert unit.read_frontmatter() == meta


# -- the lock: taken before the version scan, so a second run is refused at once ------------
HOLD = """
import os, sys, time
FROM_VERSION = 0
TO_VERSION = 1


def applies_to(unit):
    return "schema_version" not in unit.read_frontmatter()


def migrate(unit):
    go = os.environ["AA_GO"]
    open(go + ".ready", "w").close()
    while not os.path.exists(go):
        time.sleep(0.01)
    meta = unit.read_frontmatter()
    meta["schema_version"] = 1
    unit.write_frontmatter(meta)
    return {"changes": ["added schema_version"]}
"""


def test_a_second_migration_is_refused_at_once_and_records_the_holders_version(agents_root: Path, tmp_path: Path,
                                                                               monkeypatch) -> None:
    make_vault(agents_root, version=None)
    write_script(agents_root, "v0_to_v1.py", HOLD)
    go = tmp_path / "go"
    code = f"from atomic_agents.migration import FilesystemMigrationBackend as B; " \
           f"r = B({str(agents_root)!r}).run_migration(1, dry_run=False); print('OK' if r.ok else r.error)"
    env = {**os.environ, "AA_GO": str(go), "PYTHONPATH": os.pathsep.join(sys.path)}
    holder = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not Path(str(go) + ".ready").exists():  # the holder is inside apply, lock held
            assert holder.poll() is None and time.monotonic() < deadline
            time.sleep(0.01)
        second = FilesystemMigrationBackend(agents_root)

        def no_scan() -> int:
            raise AssertionError("a refused run must not scan the vault")

        monkeypatch.setattr(second, "read_schema_version", no_scan)
        with pytest.raises(MigrationError, match="Another migration is already running"):
            second.run_migration(1, dry_run=False, **QUIET)
        refused = [e for e in _events(second) if "Another migration" in (e["error"] or "")]
        assert [(e["from_version"], e["to_version"]) for e in refused] == [(0, 1)]  # resolved, not -1
    finally:
        go.touch()
        out, _ = holder.communicate(timeout=120)
    assert out.strip().splitlines()[-1] == "OK"
    assert not (agents_root / ".migration.lock.plan").exists()  # the holder's plan goes with its lock


# -- debris of a killed rollback -----------------------------------------------------------
def test_staging_left_by_a_killed_rollback_is_removed_by_the_next_run(agents_root: Path, tmp_path: Path) -> None:
    make_vault(agents_root, version=None)
    write_script(agents_root, "v0_to_v1.py", V0_TO_V1)
    dead = _dead_pid()
    staging = agents_root / "_migrations" / f".restore-{dead}-0a1b2c3d"
    (staging / "caldwell" / "memory").mkdir(parents=True)
    (staging / "caldwell" / "memory" / "feedback_topic_0.md").write_text("staged copy\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep\n")
    (agents_root / "_migrations" / f".restore-{dead}-ffff").symlink_to(outside, target_is_directory=True)
    live = agents_root / "_migrations" / f".restore-{os.getppid()}-beef"  # a live process's: left alone
    live.mkdir()
    result = FilesystemMigrationBackend(agents_root).run_migration(1, dry_run=True, **QUIET)
    assert result.ok
    left = sorted(p.name for p in (agents_root / "_migrations").iterdir() if p.name.startswith(".restore-"))
    assert left == [live.name]
    assert (outside / "keep.txt").read_text() == "keep\n"  # the link was removed, not followed


# -- --to takes ASCII digits only ------------------------------------------------------------
@pytest.mark.parametrize("value", ["１", "v１", "٢", "v²", "1\n", "0x1", "+1", ""])
def test_target_version_accepts_ascii_digits_only(value: str) -> None:
    with pytest.raises(ValueError):
        parse_target_version(value)


def test_target_version_ascii_forms_still_work() -> None:
    assert [parse_target_version(v) for v in ("v2", "V2", "2", " 3 ", 4)] == [2, 2, 2, 3, 4]


def test_cli_to_with_a_full_width_digit_is_a_usage_error(vault: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "atomic_agents.migrate", "--to", "１", "--dry-run",
                           "--agents-root", str(vault)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


def test_a_script_named_with_non_ascii_digits_is_not_a_script(agents_root: Path) -> None:
    write_script(agents_root, "v０_to_v１.py", V0_TO_V1)
    with pytest.raises(MigrationError, match="must be named"):
        load_script(agents_root / "_migrations" / "v０_to_v１.py")
    assert FilesystemMigrationBackend(agents_root).status().scripts == ()


# -- the reference implementation's public shapes ---------------------------------------------
def test_apply_unit_returns_a_dict_and_an_empty_one_when_skipped(agents_root: Path) -> None:
    make_vault(agents_root, version=None)
    write_note(agents_root, "caldwell", "current", version=1)
    path = write_script(agents_root, "v0_to_v1.py", V0_TO_V1)
    backend = FilesystemMigrationBackend(agents_root)
    script = load_script(path)
    units = {Path(u.unit_id).name: u for u in backend.enumerate_units(dry_run=True)}
    touched = backend.apply_unit(units["feedback_topic_0.md"], script, dry_run=True)
    skipped = backend.apply_unit(units["feedback_current.md"], script, dry_run=True)  # applies_to says no
    assert touched == {"changes": ["added schema_version: 1"], "script": "v0_to_v1.py",
                       "unit_id": units["feedback_topic_0.md"].unit_id}
    assert skipped == {} and isinstance(skipped, dict)


def test_result_and_audit_line_types_match_the_reference(agents_root: Path) -> None:
    make_vault(agents_root, version=None)
    write_script(agents_root, "v0_to_v1.py", V0_TO_V1)
    backend = FilesystemMigrationBackend(agents_root)
    result = backend.run_migration(1, dry_run=False, **QUIET)
    assert isinstance(result.units_touched, list) and all(isinstance(s, dict) for s in result.units_touched)
    assert isinstance(result.units_skipped, int) and result.error == "" and result.ok
    line = _events(backend)[-1]
    assert line["units_touched"] == len(result.units_touched) == 12 and line["error"] == ""
    as_json = result.to_dict()
    assert as_json["units_touched"][0]["script"] == "v0_to_v1.py" and as_json["units_skipped"] == 0


def test_a_failed_restore_is_returned_in_the_result_not_raised(agents_root: Path, monkeypatch) -> None:
    make_vault(agents_root, version=None)
    write_script(agents_root, "v0_to_v1.py", V0_TO_V1)
    write_note(agents_root, "caldwell", "broken", version=None).write_text("---\nname: broken\n---\n")
    backend = FilesystemMigrationBackend(agents_root)

    def broken_restore(ref: MigrationSnapshotRef) -> None:
        raise MigrationError("disk full")

    monkeypatch.setattr(backend, "restore", broken_restore)
    result = backend.run_migration(1, dry_run=False, **QUIET)
    assert not result.ok and result.rolled_back is False and not result.validation_passed
    assert "disk full" in result.error and "--rollback" in result.error
    event = _events(backend)[-1]
    assert event["rolled_back"] is False and "disk full" in event["error"]
    # The operator's command in the message works.
    monkeypatch.undo()
    FilesystemMigrationBackend(agents_root).restore_and_audit(result.snapshot_ref)
    assert FilesystemMigrationBackend(agents_root).read_schema_version() == 0


def test_a_failed_restore_after_a_script_crash_is_returned_too(agents_root: Path, monkeypatch) -> None:
    make_vault(agents_root, version=None)
    write_script(agents_root, "v0_to_v1.py", V0_TO_V1.replace('return {"changes"', 'raise RuntimeError("boom")\n    return {"changes"'))
    backend = FilesystemMigrationBackend(agents_root)
    monkeypatch.setattr(backend, "restore", lambda ref: (_ for _ in ()).throw(OSError("EIO")))
    result = backend.run_migration(1, dry_run=False, **QUIET)
    assert result.rolled_back is False and "boom" in result.error and "EIO" in result.error


def test_atomic_write_creates_a_missing_parent_inside_the_tree(tmp_path: Path) -> None:
    atomic_write(tmp_path / "a" / "b" / "c.md", "x\n", root=tmp_path)
    assert (tmp_path / "a" / "b" / "c.md").read_text() == "x\n"


def test_atomic_write_never_creates_a_parent_through_a_symlink_or_dotdot(tmp_path: Path) -> None:
    inside, outside = tmp_path / "inside", tmp_path / "outside"
    inside.mkdir()
    outside.mkdir()
    (inside / "link").symlink_to(outside, target_is_directory=True)
    refused = (OSError, UnsafePathError)
    with pytest.raises(refused):
        atomic_write(inside / "link" / "new" / "c.md", "x\n", root=inside)
    (inside / "dangling").symlink_to(outside / "nowhere")
    with pytest.raises(refused):
        atomic_write(inside / "dangling" / "c.md", "x\n", root=inside)
    with pytest.raises(refused):
        atomic_write(inside / "q" / ".." / ".." / "escaped" / "c.md", "x\n", root=inside)
    assert list(outside.iterdir()) == [] and not (tmp_path / "escaped").exists()
    assert tree(inside) == {"link": "-> " + str(outside), "dangling": "-> " + str(outside / "nowhere")}
