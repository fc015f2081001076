"""Issue 7 §1 (restore): a rollback never creates, replaces or truncates a file outside the root.

Both restore paths (manual ``--rollback`` and the automatic restore after a
failed run) x the places a symlink can be: the live tree (agent folder,
``memory/``, ``wiki/``, ``journal/``, ``persona/``, ``log/``, a final file),
the migration's own files (``_migrations/``, ``snapshots/``, a snapshot file,
the audit trail, the migration lock), and archive members (absolute,
relative, ``..`` after a name, chained over two restores, through a live
symlink). Each case checks that an outside folder kept every byte and
mtime, and that a refused restore left the vault exactly as it was.
"""

from __future__ import annotations

import io
import os
import shutil
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from atomic_agents.exceptions import AtomicAgentsError, MigrationError
from atomic_agents.migrate import main as migrate_main
from atomic_agents.migration import FilesystemMigrationBackend

from ..migration._vault import V0_TO_V1, V1_TO_V2_GENTLE, make_vault, tree, write_script
from .conftest import Outside

QUIET = {"announce": lambda *a: None}


def _migrated(root: Path) -> tuple[FilesystemMigrationBackend, str]:
    """A legacy vault migrated to v1 for real: its pre-v1 snapshot restores real changes."""
    make_vault(root, version=None)
    write_script(root, "v0_to_v1.py", V0_TO_V1)
    backend = FilesystemMigrationBackend(root)
    result = backend.run_migration(1, dry_run=False, **QUIET)
    assert result.ok and result.snapshot_ref is not None
    return backend, result.snapshot_ref.snapshot_id


def _move_out(path: Path, outside: Outside) -> Path:
    dest = outside.dir / path.name
    shutil.move(str(path), dest)
    path.symlink_to(dest, target_is_directory=dest.is_dir())
    return path


# ------------------------------------------------------------------ symlinks in the live tree
LIVE: dict[str, tuple[Callable[[Path, Outside], Path], bool]] = {
    # place -> (plant, is the restore refused?)
    "agent_folder": (lambda r, o: _move_out(r / "caldwell", o), True),
    "memory": (lambda r, o: _move_out(r / "caldwell" / "memory", o), True),
    "wiki": (lambda r, o: _move_out(r / "caldwell" / "wiki", o), True),
    "journal": (lambda r, o: _move_out(r / "caldwell" / "journal", o), True),
    "persona": (lambda r, o: _move_out(r / "caldwell" / "persona", o), True),
    # logs are never in a snapshot: a restore leaves them (and their symlink) alone
    "log": (lambda r, o: _move_out(r / "caldwell" / "log", o), False),
    # the restored file replaces the link itself; the file the link pointed to keeps its bytes
    "final_file": (lambda r, o: _move_out(r / "caldwell" / "memory" / "feedback_topic_0.md", o), False),
}


@pytest.mark.parametrize("place", sorted(LIVE))
def test_manual_rollback_never_follows_a_live_symlink(place: str, agents_root: Path, outside: Outside) -> None:
    backend, snapshot = _migrated(agents_root)
    plant, refused = LIVE[place]
    planted = plant(agents_root, outside)
    outside.age()
    before_out, before_vault = outside.state(), tree(agents_root)
    if refused:
        with pytest.raises(MigrationError) as exc:
            backend.restore_and_audit(snapshot)
        assert str(planted.relative_to(agents_root)) in str(exc.value) and "symlink" in str(exc.value)
        assert tree(agents_root) == before_vault  # refused before the first rename
    else:
        backend.restore_and_audit(snapshot)
        if place == "final_file":
            assert not planted.is_symlink() and b"schema_version" not in planted.read_bytes()
    assert outside.state() == before_out


@pytest.mark.parametrize("place", sorted(LIVE))
def test_automatic_restore_never_follows_a_live_symlink(place: str, agents_root: Path, outside: Outside) -> None:
    """The tree changes mid-run (after the snapshot), then the run fails and restores."""
    make_vault(agents_root, version=None)
    write_script(agents_root, "v0_to_v1.py", V0_TO_V1)
    backend = FilesystemMigrationBackend(agents_root)
    plant, refused = LIVE[place]
    planted: list[Path] = []
    real_apply = backend.apply_unit

    def apply_then_fail(unit, script, dry_run=True):  # type: ignore[no-untyped-def]
        if not planted:
            real_apply(unit, script, dry_run=dry_run)
            backend._flush()  # the write has landed (inside) before the tree changes
            planted.append(plant(agents_root, outside))
            outside.age()
            states.append(outside.state())
            raise RuntimeError("script failed after the tree changed")
        return real_apply(unit, script, dry_run=dry_run)

    states: list[dict[str, tuple[object, ...]]] = []
    backend.apply_unit = apply_then_fail  # type: ignore[method-assign]
    if refused:
        # The failed restore comes back in the result, as the reference implementation does.
        result = backend.run_migration(1, dry_run=False, **QUIET)
        assert result.rolled_back is False
        assert "restoring snapshot" in result.error and "symlink" in result.error
        assert str(planted[0].relative_to(agents_root)) in result.error
    else:
        result = backend.run_migration(1, dry_run=False, **QUIET)
        assert result.rolled_back
    assert outside.state() == states[0]


# ------------------------------------------------------------- the migration's own files
def test_symlinked_snapshots_folder_is_refused(agents_root: Path, outside: Outside) -> None:
    backend, snapshot = _migrated(agents_root)
    planted = _move_out(backend.snapshots_dir, outside)
    outside.age()
    before_out, before_vault = outside.state(), tree(agents_root)
    with pytest.raises(MigrationError, match="outside the agents root"):
        backend.restore_and_audit(snapshot)
    write_script(agents_root, "v1_to_v2.py", V1_TO_V2_GENTLE)
    before_vault = tree(agents_root)
    with pytest.raises(MigrationError, match="outside the agents root"):
        backend.run_migration(2, dry_run=False, **QUIET)  # no snapshot is written there either
    assert outside.state() == before_out and tree(agents_root) == before_vault
    assert planted.is_symlink()


def test_symlinked_snapshot_file_is_refused_and_not_listed(agents_root: Path, outside: Outside) -> None:
    backend, snapshot = _migrated(agents_root)
    planted = _move_out(backend.snapshots_dir / snapshot, outside)
    outside.age()
    before_out, before_vault = outside.state(), tree(agents_root)
    with pytest.raises(MigrationError, match="is a symlink"):
        backend.restore_and_audit(snapshot)
    assert snapshot not in [r.snapshot_id for r in backend.list_snapshots()]
    assert outside.state() == before_out and tree(agents_root) == before_vault and planted.is_symlink()


MIGRATION_FILES: dict[str, Callable[[Path, Outside], Path]] = {
    "migrations_folder": lambda r, o: _move_out(r / "_migrations", o),
    "audit_trail": lambda r, o: _link(r / "_migrations" / "migration.jsonl", o.canary),
    "history_readme": lambda r, o: _link(r / "_migrations" / "README.md", o.canary),
    "migration_lock": lambda r, o: _link(r / ".migration.lock", o.dir / "created.lock"),
    "agent_lock": lambda r, o: _link(r / "caldwell" / ".agent.lock", o.dir / "created.lock"),
}


def _link(path: Path, target: Path) -> Path:
    if path.exists() or path.is_symlink():
        path.unlink()
    path.symlink_to(target)
    return path


@pytest.mark.parametrize("place", sorted(MIGRATION_FILES))
@pytest.mark.parametrize("action", ["rollback", "run"])
def test_migration_files_are_never_written_through_a_symlink(place: str, action: str, agents_root: Path,
                                                              outside: Outside) -> None:
    backend, snapshot = _migrated(agents_root)
    write_script(agents_root, "v1_to_v2.py", V1_TO_V2_GENTLE)
    MIGRATION_FILES[place](agents_root, outside)
    outside.age()
    before = outside.state()
    try:
        if action == "rollback":
            backend.restore_and_audit(snapshot)
        else:
            backend.run_migration(2, dry_run=False, **QUIET)
    except AtomicAgentsError:
        pass
    else:  # MUST 8: a restored vault is reported rolled back; the history line is skipped with a warning
        assert (action, place) == ("rollback", "history_readme")
    assert outside.state() == before


# ------------------------------------------------------------------------- archive members
def _archive(backend: FilesystemMigrationBackend, name: str, members: list[tuple[str, str | bytes]]) -> str:
    """A crafted snapshot: (path, linkname) for a symlink (str), (path, bytes) for a file."""
    backend.snapshots_dir.mkdir(parents=True, exist_ok=True)
    path = backend.snapshots_dir / name
    with tarfile.open(path, "w:gz") as tar:
        for member, content in members:
            info = tarfile.TarInfo(member)
            if isinstance(content, str):
                info.type, info.linkname = tarfile.SYMTYPE, content
                tar.addfile(info)
            else:
                info.size = len(content)
                tar.addfile(info, io.BytesIO(content))
    return name


A = "2026-01-01T000000_pre_v2_migration.tar.gz"
B = "2026-01-02T000000_pre_v2_migration.tar.gz"

ONE_ARCHIVE: dict[str, Callable[[Path, Outside], list[tuple[str, str | bytes]]]] = {
    "absolute": lambda r, o: [("caldwell/memory/evil.md", str(o.canary))],
    "absolute_folder": lambda r, o: [("caldwell/evil", str(o.dir))],
    "relative_escape": lambda r, o: [("caldwell/memory/evil", "../../../outside")],
    "dotdot_after_name": lambda r, o: [("caldwell/evil", "memory/../../../outside")],
    "link_then_file_under_it": lambda r, o: [("caldwell/evil", "memory"), ("caldwell/evil/x.md", b"x")],
    "through_a_live_symlink": lambda r, o: [("caldwell/evil", "../nova/ext/canary.txt")],
}


@pytest.mark.parametrize("kind", sorted(ONE_ARCHIVE))
def test_archive_symlinks_leading_out_are_refused(kind: str, agents_root: Path, outside: Outside) -> None:
    backend, _ = _migrated(agents_root)
    (agents_root / "nova" / "ext").symlink_to(outside.dir, target_is_directory=True)  # a user's own link
    name = _archive(backend, A, ONE_ARCHIVE[kind](agents_root, outside) + [("caldwell/memory/new.md", b"new")])
    outside.age()
    before_out, before_vault = outside.state(), tree(agents_root)
    with pytest.raises(MigrationError, match="snapshot .* holds"):
        backend.restore_and_audit(name)
    assert outside.state() == before_out and tree(agents_root) == before_vault


CHAINS: dict[str, tuple[list[tuple[str, str | bytes]], list[tuple[str, str | bytes]]]] = {
    # restore A plants a link that stays inside; restore B tries to use it to get out
    "file_under_earlier_link": ([("caldwell/memory/hop", "../../nova")], [("caldwell/memory/hop/memory/x.md", b"x")]),
    "climb_from_earlier_link": ([("caldwell/up", "..")], [("caldwell/esc", "up/../..")]),
    "link_to_earlier_link_then_up": ([("caldwell/up", "..")], [("nova/esc", "../caldwell/up/../..")]),
    "folder_link_then_file": ([("caldwell/wiki2", "wiki")], [("caldwell/wiki2/concept_9.md", b"x")]),
}


@pytest.mark.parametrize("kind", sorted(CHAINS))
def test_archive_symlinks_composed_over_two_restores_are_refused(kind: str, agents_root: Path, outside: Outside) -> None:
    backend, _ = _migrated(agents_root)
    first, second = CHAINS[kind]
    backend.restore_and_audit(_archive(backend, A, first))  # stays inside: allowed
    for member, target in first:
        assert os.readlink(agents_root / member) == target
    outside.age()
    before_out, before_vault = outside.state(), tree(agents_root)
    with pytest.raises(MigrationError):
        backend.restore_and_audit(_archive(backend, B, second))
    assert outside.state() == before_out and tree(agents_root) == before_vault


def test_absolute_link_inside_the_root_is_kept_as_a_relative_one(agents_root: Path) -> None:
    backend, _ = _migrated(agents_root)
    backend.restore_and_audit(_archive(backend, A, [("caldwell/alias", str(agents_root / "nova"))]))
    assert os.readlink(agents_root / "caldwell" / "alias") == "../nova"
    (agents_root / "caldwell" / "mirror").symlink_to(agents_root / "nova" / "memory", target_is_directory=True)
    (agents_root / "caldwell" / "out").symlink_to(Path("/"), target_is_directory=True)
    ref = backend.snapshot(9)
    with tarfile.open(backend.snapshot_path(ref)) as tar:
        links = {m.name: m.linkname for m in tar.getmembers() if m.issym()}
    assert links["caldwell/mirror"] == "../nova/memory" and links["caldwell/alias"] == "../nova"
    assert "caldwell/out" not in links  # a link leading out is not vault content: left out, left alone


def test_hard_links_and_special_files_are_refused(agents_root: Path, outside: Outside) -> None:
    backend, _ = _migrated(agents_root)
    backend.snapshots_dir.mkdir(parents=True, exist_ok=True)
    with tarfile.open(backend.snapshots_dir / A, "w:gz") as tar:
        info = tarfile.TarInfo("caldwell/memory/hard.md")
        info.type, info.linkname = tarfile.LNKTYPE, str(outside.canary)
        tar.addfile(info)
    outside.age()
    before = outside.state()
    with pytest.raises(MigrationError, match="unsafe entry"):
        backend.restore_and_audit(A)
    assert outside.state() == before


def test_cli_rollback_exits_1_naming_the_symlink(agents_root: Path, outside: Outside,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    backend, snapshot = _migrated(agents_root)
    _move_out(agents_root / "caldwell" / "memory", outside)
    outside.age()
    before = outside.state()
    with pytest.raises(SystemExit) as exc:
        migrate_main(["--rollback", snapshot, "--agents-root", str(agents_root)])
    out, err = capsys.readouterr()
    assert exc.value.code == 1 and "caldwell/memory" in out + err and "Traceback" not in out + err
    assert outside.state() == before


@pytest.mark.parametrize("linkname", ["/etc", "../../../../outside", "a/../../../.."])
def test_tarfile_data_filter_is_a_second_line_of_defence(linkname: str, agents_root: Path, outside: Outside,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """With our own link rule switched off, tarfile's ``data`` filter still refuses links leading out."""
    import atomic_agents.migration._snapshot as snap

    backend, _ = _migrated(agents_root)
    monkeypatch.setattr(snap, "safe_linkname", lambda root, rel, name: name)
    name = _archive(backend, A, [("caldwell/memory/evil", linkname)])
    before = tree(agents_root)
    with pytest.raises(MigrationError, match="unsafe entry .*(outside the destination|absolute)"):
        backend.restore_and_audit(name)
    assert tree(agents_root) == before
