"""Fault injection: SIGKILL the migration process mid-apply, then ``--rollback`` the printed snapshot.

Two kinds of kill, 22 trials in all (plus 3 kills before the snapshot line):

* the script kills its own process at a random unit (before or after that
  unit's write), so every such trial is provably mid-apply;
* the test kills the process after a random delay from the moment the snapshot
  line appears, so kills also land inside a write, during validation, or after.

Each time the vault must come back byte-identical (every file, dot-files
included, except ``_migrations/``). A kill before the snapshot line must leave
the vault untouched with no rollback at all (the snapshot precedes any write).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from atomic_agents.migration import FilesystemMigrationBackend

from ._vault import make_vault, tree, write_script

SCRIPT = '''
import os, signal, time

FROM_VERSION = 0
TO_VERSION = 1
_seen = []
_KILL_AT = int(os.environ.get("AA_KILL_AT", "-1"))
_KILL_AFTER_WRITE = os.environ.get("AA_KILL_AFTER_WRITE") == "1"


def applies_to(unit):
    return "schema_version" not in unit.read_frontmatter()


def migrate(unit):
    _seen.append(unit.unit_id)
    if len(_seen) == _KILL_AT and not _KILL_AFTER_WRITE:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.004)
    meta = unit.read_frontmatter()
    meta["schema_version"] = 1
    unit.write_frontmatter(meta)
    if len(_seen) == _KILL_AT and _KILL_AFTER_WRITE:
        os.kill(os.getpid(), signal.SIGKILL)
    return {"changes": ["added schema_version"]}
'''

UNITS = 30  # 2 agents x (10 notes + 5 wiki pages)


def _vault(root: Path) -> dict[str, bytes | str]:
    make_vault(root, notes=10, wiki=5, version=None)
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    write_script(root, "v0_to_v1.py", SCRIPT)
    return tree(root)


def _migrate(root: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "atomic_agents.migrate", *args, "--agents-root", str(root)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})},
    )


def _snapshot_name(stdout: str) -> str | None:
    for line in stdout.splitlines():
        if "--rollback " in line:
            return line.split("--rollback ", 1)[1].split()[0]
    return None


def _rollback(root: Path, name: str, *, via_cli: bool) -> None:
    """``--rollback NAME``: through the command line, or the one library call it makes (saves a process)."""
    if via_cli:
        proc = _migrate(root, "--rollback", name)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    else:
        FilesystemMigrationBackend(root).restore_and_audit(name)


def _changed(root: Path, before: dict[str, bytes | str]) -> int:
    now = tree(root)
    return sum(1 for k in set(before) | set(now) if before.get(k) != now.get(k))


@pytest.mark.parametrize("batch", range(2))
def test_sigkill_inside_a_script_then_rollback_is_byte_identical(tmp_path: Path, batch: int) -> None:
    rng = random.Random(1000 + batch)
    for trial in range(6):
        root = tmp_path / f"t{trial}"
        before = _vault(root)
        kill_at = rng.randint(1, UNITS)
        proc = _migrate(root, "--to", "v1",
                        env={"AA_KILL_AT": str(kill_at), "AA_KILL_AFTER_WRITE": str(rng.randint(0, 1))})
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == -signal.SIGKILL
        name = _snapshot_name(out)
        assert name is not None, out  # the ref reached stdout before the first write
        _rollback(root, name, via_cli=trial == 0)
        assert tree(root) == before, f"trial {trial}: kill at unit {kill_at}"


@pytest.mark.parametrize("batch", range(2))
def test_sigkill_at_a_random_time_then_rollback_is_byte_identical(tmp_path: Path, batch: int) -> None:
    rng = random.Random(2000 + batch)
    mid_apply = 0
    for trial in range(5):
        root = tmp_path / f"t{trial}"
        before = _vault(root)
        proc = _migrate(root, "--to", "v1")
        assert proc.stdout is not None
        first = proc.stdout.readline() + proc.stdout.readline()  # blocks until the snapshot is announced
        time.sleep(rng.uniform(0.0, 0.2))
        proc.send_signal(signal.SIGKILL)
        rest, _ = proc.communicate(timeout=120)
        name = _snapshot_name(first + rest)
        assert name is not None, first
        changed = _changed(root, before)
        mid_apply += 0 < changed < UNITS
        _rollback(root, name, via_cli=trial == 0)
        assert tree(root) == before, f"trial {trial}: {changed} files differed before the rollback"
    print(f"timed kills that landed mid-apply: {mid_apply}/5")


def test_sigkill_before_the_snapshot_line_leaves_the_vault_untouched(tmp_path: Path) -> None:
    rng = random.Random(3000)
    for trial in range(3):
        root = tmp_path / f"t{trial}"
        before = _vault(root)
        proc = _migrate(root, "--to", "v1")
        time.sleep(rng.uniform(0.0, 0.3))  # somewhere in start-up, planning or snapshotting
        proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate(timeout=120)
        name = _snapshot_name(out)
        if name is None:  # no ref printed: nothing may have been written but a killed write's temp file,
            # which the next run sweeps (a temp file is never the vault's: its target kept the old bytes)
            assert {k: v for k, v in tree(root).items() if not k.endswith(".tmp")} == before
            assert _migrate(root, "--to", "v1").communicate(timeout=120)[0]  # the next run: sweeps, then migrates
            assert not [k for k in tree(root) if k.endswith(".tmp")]
        else:
            _rollback(root, name, via_cli=False)
            assert tree(root) == before


def test_the_next_run_sweeps_the_temp_file_of_a_killed_plan_write(tmp_path: Path) -> None:
    root = tmp_path / "v"
    _vault(root)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # its pid is gone: whatever it left half-written is debris
    debris = root / f"..migration.lock.plan.{dead.pid}.123.tmp"
    debris.write_text('{"pid": ')
    out, err = _migrate(root, "--to", "v1").communicate(timeout=120)
    assert "--rollback " in out, err
    assert not debris.exists()
