"""The files a graph job publishes beside the database: never written through a planted
symlink, never more readable than the database itself (they hold its vectors and scopes)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import numpy as np
import pytest

from atomic_agents.memory import _matrix_cache
from atomic_agents.memory._matrix_cache import ann_path, meta_path, publish, snapshot_path

pytestmark = pytest.mark.skipif(os.name != "posix", reason="symlinks and modes are POSIX here")


def _arrays(n: int = 8, dim: int = 4) -> dict[str, object]:
    return {
        "keys": np.arange(1, n + 1, dtype=np.int64),
        "vecs": np.ones((n, dim), dtype=np.float32),
        "scope": np.zeros(n, dtype=np.int32),
        "expires": np.full(n, np.inf),
        "scopes": np.array(["a\x1fu\x1f\x1f"], dtype=object),
    }


def _graph(tmp: Path) -> bool:
    with open(tmp, "wb") as fh:  # stands in for usearch's own save (writes by name)
        fh.write(b"graph")
    return True


def test_publish_never_writes_through_a_symlink_planted_at_its_temp_names(tmp_path: Path) -> None:
    store_dir = tmp_path / "store"
    store_dir.mkdir()
    db = store_dir / "memory.db"
    db.write_bytes(b"")
    outside = tmp_path / "outside"
    outside.mkdir()
    victims = []
    serial = next(_matrix_cache._serial)
    for path in (snapshot_path(db), meta_path(db), ann_path(db)):
        for n in range(serial, serial + 12):
            victim = outside / f"{path.name}-{n}"
            victim.write_bytes(b"precious")
            victims.append(victim)
            (store_dir / f".{path.name}.{os.getpid()}-{n}.tmp").symlink_to(victim)
    publish(db, _arrays(), _graph, dimension=4, model="m", epoch="0", rev=1)
    assert all(v.read_bytes() == b"precious" for v in victims)
    for path in (snapshot_path(db), meta_path(db), ann_path(db)):
        assert not os.path.islink(path)


def test_published_files_are_no_more_readable_than_the_database(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    db.write_bytes(b"")
    os.chmod(db, 0o600)
    old = os.umask(0o022)
    try:
        assert publish(db, _arrays(), _graph, dimension=4, model="m", epoch="0", rev=1)
    finally:
        os.umask(old)
    for path in (snapshot_path(db), meta_path(db), ann_path(db)):
        assert stat.S_IMODE(os.stat(path).st_mode) & 0o077 == 0, path
