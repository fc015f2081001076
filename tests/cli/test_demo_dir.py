"""`make demo` / `make clean` never delete a folder the demo did not make (marker file)."""

from __future__ import annotations

import subprocess
from pathlib import Path

RUN = Path(__file__).resolve().parents[2] / "demo" / "run.sh"
MARKER = ".atomic-agents-demo"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(RUN), *args], capture_output=True, text=True, timeout=60)


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_demo_refuses_a_non_empty_folder_it_did_not_make(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    (notes / "sub").mkdir(parents=True)
    (notes / "a.txt").write_text("precious")
    (notes / "sub" / "b.md").write_text("also precious")
    before = _tree(notes)
    proc = _run(str(notes))
    assert proc.returncode == 1 and "refusing" in proc.stderr and MARKER in proc.stderr
    assert _tree(notes) == before


def test_clean_refuses_the_same_folder_and_a_file(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.txt").write_text("precious")
    assert _run("--clean", str(notes)).returncode == 1
    assert (notes / "a.txt").read_text() == "precious"
    plain = tmp_path / "file"
    plain.write_text("x")
    assert _run("--clean", str(plain)).returncode == 1 and plain.read_text() == "x"


def test_a_symlinked_folder_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "real"
    target.mkdir()
    (target / MARKER).write_text("planted")
    (target / "keep.txt").write_text("keep")
    link = tmp_path / "link"
    link.symlink_to(target)
    assert _run("--clean", str(link)).returncode == 1
    assert (target / "keep.txt").exists() and link.is_symlink()


def test_clean_removes_only_a_folder_carrying_the_marker(tmp_path: Path) -> None:
    ours = tmp_path / "demo-vault"
    ours.mkdir()
    (ours / MARKER).write_text("made by the demo")
    (ours / "finance").mkdir()
    assert _run("--clean", str(ours)).returncode == 0 and not ours.exists()
    missing = tmp_path / "never-made"
    assert _run("--clean", str(missing)).returncode == 0 and not missing.exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    assert _run("--clean", str(empty)).returncode == 0 and empty.is_dir()
