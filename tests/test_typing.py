"""The package is typed (py.typed ships): mypy must stay clean on it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_mypy_clean_on_the_package() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", "src/atomic_agents"],
        cwd=ROOT, capture_output=True, text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
