"""Test helpers shared by the memory tests."""

from __future__ import annotations

from collections.abc import Sequence

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
    """Put a PostgreSQL store's schema back to what package schema ``to`` (1 or 2) left, rows kept.

    The reverse of migrations ``to + 1`` .. 3 (``memory/_postgres_schema.py``), for the tests
    that an old database is migrated (and backfilled) on open.
    """
    from atomic_agents.memory._postgres_schema import _MIGRATIONS

    run = cur.execute  # type: ignore[attr-defined]
    for trig in ("memory_stats_ins", "memory_stats_del", "memory_stats_upd", "memory_stats_stale"):
        run(f"DROP TRIGGER {trig} ON memories")
    run("DROP FUNCTION atomic_agents_keyword_stats()")
    run("DROP FUNCTION atomic_agents_stale_terms()")
    run("DROP TABLE memory_terms")
    run("DROP INDEX ix_memories_uncounted")
    run("ALTER TABLE memories DROP COLUMN doc_len, DROP COLUMN terms")
    run("ALTER TABLE memory_rows DROP COLUMN tokens")
    if to == 2:
        for stmt in _MIGRATIONS[2][1:4]:  # the row counter's function and triggers, as migration 2 made them
            run(stmt)
    else:
        run("DROP TABLE memory_rows")
    run("UPDATE store_meta SET value = %s WHERE key = 'schema_version'", [str(to)])
