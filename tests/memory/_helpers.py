"""Test helpers shared by the memory tests."""

from __future__ import annotations

import importlib.util
import multiprocessing as mp
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from atomic_agents.memory import HashingEmbedder


class CountingEmbedder(HashingEmbedder):
    """The fake embedder, counting the texts it was asked to embed."""

    def __init__(self, dimension: int = 256) -> None:
        super().__init__(dimension)
        self.calls: list[str] = []

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.extend(texts)
        return super().embed_batch(texts)


def pg_downgrade(cur: object, to: int) -> None:
    """Put a PostgreSQL store's schema back to what package schema ``to`` (1, 2, 3 or 4) left, rows kept.

    The reverse of migrations ``to + 1`` .. 5 (``memory/_postgres_schema.py``), for the tests
    that an old database is migrated (and backfilled) on open.
    """
    run = cur.execute  # type: ignore[attr-defined]
    run("DROP INDEX ix_memory_docs_terms")
    run("DROP INDEX ix_memory_docs_untallied")
    run("ALTER TABLE memory_docs DROP COLUMN tfs")
    if to == 4:
        run("UPDATE store_meta SET value = '4' WHERE key = 'schema_version'")
        return
    run("DROP INDEX ix_memories_timeline")
    if to == 3:
        run("UPDATE store_meta SET value = '3' WHERE key = 'schema_version'")
        return
    run("DROP TRIGGER memory_stats_del ON memories")
    run("DROP TRIGGER memory_stats_stale ON memories")
    run("DROP TABLE memory_docs")  # its triggers with it
    run("DROP FUNCTION atomic_agents_keyword_stats()")
    run("DROP FUNCTION atomic_agents_erase_docs()")
    run("DROP FUNCTION atomic_agents_stale_docs()")
    run("DROP TABLE memory_terms")
    run("ALTER TABLE memory_rows DROP COLUMN tokens, DROP COLUMN docs")
    if to == 1:
        run("DROP TRIGGER memory_rows_ins ON memories")
        run("DROP TRIGGER memory_rows_del ON memories")
        run("DROP FUNCTION atomic_agents_count_rows()")
        run("DROP TABLE memory_rows")
    run("UPDATE store_meta SET value = %s WHERE key = 'schema_version'", [str(to)])


def _open_and_close(dsn: str, out: Any) -> None:
    from atomic_agents.memory._postgres import PostgresMemoryStore

    PostgresMemoryStore(dsn, embedder=HashingEmbedder()).close()
    out.put(True)


def open_in_two_processes(dsn: str) -> None:
    """Open a PostgreSQL store (so migrate and backfill it) from two spawned processes at once."""
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_open_and_close, args=(dsn, out)) for _ in range(2)]
    for p in procs:
        p.start()
    assert [out.get(timeout=300) for _ in procs] == [True, True]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0


def bench_module(name: str) -> ModuleType:
    """A module of ``bench/`` (not a package) by file name, e.g. the labelled sets' loaders."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parents[2] / "bench" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)
    spec.loader.exec_module(module)
    return module
