"""The README's command examples run as written, in order, on a temporary vault.

A fenced ```bash or ```console block right after a ``<!-- readme-test -->`` line
is a runnable example. All such blocks run in one bash session (so ``export``
and variables carry from block to block), in a fresh temporary folder, with
``atomic-agents`` and ``python`` on PATH meaning this checkout's CLI and the
test's interpreter. Every command line must exit 0, except a line whose comment
starts with ``# exit N``, which must exit N. Lines are logical lines (a trailing
backslash continues), ``$ `` prompts of console blocks are dropped.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
MARK = "<!-- readme-test -->"
_EXPECT = re.compile(r"#\s*exit (\d+)")


def runnable_blocks(text: str) -> list[list[str]]:
    """The marked blocks, each as its logical command lines."""
    blocks = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.strip() != MARK:
            continue
        fence = lines[i + 1].strip()
        assert fence in ("```bash", "```console"), f"README line {i + 2}: {MARK} must precede a bash/console block"
        body: list[str] = []
        for raw in lines[i + 2:]:
            if raw.strip() == "```":
                break
            body.append(raw[2:] if fence == "```console" and raw.startswith("$ ") else raw)
        logical, cur = [], ""
        for raw in body:
            cur += raw
            if cur.endswith("\\"):
                cur = cur[:-1] + " "
                continue
            if cur.strip() and not cur.lstrip().startswith("#"):
                logical.append(cur)
            cur = ""
        blocks.append(logical)
    return blocks


def _expected_exit(line: str) -> int:
    # The comment is what follows an unquoted '#': good enough for the README's lines.
    m = _EXPECT.search(line[line.index(" #"):] if " #" in line else "")
    return int(m.group(1)) if m else 0


def test_readme_marks_the_main_examples() -> None:
    blocks = runnable_blocks(README.read_text(encoding="utf-8"))
    commands = [line for block in blocks for line in block]
    assert len(blocks) >= 3
    for group in ("vault", "memory", "migrate"):
        assert any(f"atomic-agents {group} " in c or f"atomic_agents.{group}" in c for c in commands), group


def test_readme_commands_run_in_order_on_a_temporary_vault(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    src = Path(__file__).resolve().parents[1] / "src"
    (bin_dir / "atomic-agents").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m atomic_agents.cli "$@"\n')
    (bin_dir / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    script = ["set -u"]
    lines = [line for block in runnable_blocks(README.read_text(encoding="utf-8")) for line in block]
    for n, line in enumerate(lines):
        want = _expected_exit(line)
        script += [line, f'rc=$?; if [ "$rc" != {want} ]; then echo "README command {n} exited $rc, expected {want}" >&2; exit 99; fi']
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ATOMIC_AGENTS_", "EDEN_"))}
    # The real default model, as a reader of the README would run it.
    env.update(PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", PYTHONPATH=str(src))
    proc = subprocess.run(["bash", "-c", "\n".join(script)], cwd=work, env=env, capture_output=True, text=True,
                          timeout=600)
    if proc.returncode != 0:
        m = re.search(r"README command (\d+) exited (\d+)", proc.stderr)
        failed = lines[int(m.group(1))] if m else "?"
        pytest.fail(f"{failed!r} failed:\n{proc.stderr[-3000:]}")
    assert "Traceback" not in proc.stderr
    assert (work / "agents" / "finance" / "memory" / "decision_2026-q3_income_target_revised.md").is_file()
    assert (work / "backup.jsonl").is_file()
