"""A sidecar snapshot of the vector matrix, so a fresh process does not re-read every blob.

``<db>-vectors.npz`` holds the live rows' vectors and what they were valid for
(model, ``store_meta.epoch``, the highest ``rev``). Loading it and then pulling rows
with a higher ``rev`` gives exactly what a full load from SQLite gives: every
change bumps ``rev``, and the changes ``rev`` cannot express (hard deletes,
reindexing) bump ``epoch``, which invalidates the snapshot. Any problem reading it
just means a full load; the SQLite file stays the only source of truth.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

import numpy as np

from ._vectors import VectorIndex

__all__ = ["MIN_ROWS", "load_snapshot", "save_snapshot", "snapshot_path"]

#: Below this many rows a full load from SQLite is already fast; no sidecar is written.
MIN_ROWS = 5_000


def snapshot_path(db: Path) -> Path:
    return db.with_name(db.name + "-vectors.npz")


def save_snapshot(db: Path, index: VectorIndex, *, model: str, epoch: str, rev: int) -> None:
    arrays = index.to_arrays()
    header = json.dumps({"model": model, "epoch": epoch, "rev": rev, "dimension": index.dimension})
    target = snapshot_path(db)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            np.savez(
                fh,
                header=np.array(header),
                keys=arrays["keys"],
                vecs=arrays["vecs"],
                scope=arrays["scope"],
                expires=arrays["expires"],
                scopes=np.array(arrays["scopes"].tolist(), dtype=str),
            )
        os.replace(tmp, target)  # readers see the old snapshot or the new one, never half
    except OSError:
        pass  # a cache that cannot be written is only a slower next start
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


def load_snapshot(db: Path, *, model: str, epoch: str) -> tuple[VectorIndex, int] | None:
    """``(index, rev)`` if a snapshot for this model and epoch exists and reads cleanly."""
    path = snapshot_path(db)
    if not path.exists():
        return None
    try:
        with np.load(path, allow_pickle=False) as data:
            header = json.loads(str(data["header"]))
            if header["model"] != model or header["epoch"] != epoch:
                return None
            arrays = {k: data[k] for k in ("keys", "vecs", "scope", "expires", "scopes")}
        return VectorIndex.from_arrays(int(header["dimension"]), arrays), int(header["rev"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
