"""Fixtures of the symlink matrix: a folder outside the agents root whose every byte and mtime is watched."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

OLD = 1_600_000_000  # a fixed past mtime: any write or truncation through a symlink moves it


@dataclass
class Outside:
    """A folder outside the root: ``canary.txt`` and whatever a test moves there."""

    dir: Path

    @property
    def canary(self) -> Path:
        return self.dir / "canary.txt"

    def state(self) -> dict[str, tuple[object, ...]]:
        """Every entry (not following symlinks) with its kind, bytes hash, size, mtime and mode."""
        out: dict[str, tuple[object, ...]] = {}
        for dirpath, dirnames, filenames in os.walk(self.dir):
            for name in dirnames + filenames:
                p = os.path.join(dirpath, name)
                st = os.lstat(p)
                rel = os.path.relpath(p, self.dir)
                if os.path.islink(p):
                    out[rel] = ("link", os.readlink(p))
                elif os.path.isdir(p):
                    out[rel] = ("dir", st.st_mode)
                else:
                    data = Path(p).read_bytes()
                    out[rel] = ("file", hashlib.sha256(data).hexdigest(), st.st_size, st.st_mtime_ns, st.st_mode)
        return out

    def age(self) -> None:
        """Set every mtime under the folder to OLD (so a touch shows)."""
        for dirpath, dirnames, filenames in os.walk(self.dir):
            for name in dirnames + filenames:
                os.utime(os.path.join(dirpath, name), (OLD, OLD), follow_symlinks=False)


@pytest.fixture
def outside(tmp_path: Path) -> Outside:
    d = tmp_path / "outside"
    d.mkdir()
    (d / "canary.txt").write_bytes(b"canary: must never change\n")
    os.utime(d / "canary.txt", (OLD, OLD))
    return Outside(d)
