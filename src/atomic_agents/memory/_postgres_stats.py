"""BM25's corpus statistics on PostgreSQL, kept as SQLite's FTS5 keeps them (schema migration 3).

FTS5 scores a row with ``N`` (rows indexed), ``n_t`` (rows holding stem ``t``) and the
average length ``total tokens / N``, all over every row of the table. PostgreSQL keeps
the same three numbers exactly, in the transaction of each write:

- the write path tokenizes the content with SQLite's own tokenizer
  (:func:`~._scoring.tokens`: porter, ``unicode61``, diacritics removed) and stores the
  row's length (``doc_len``, FTS5's token count) and its distinct stems (``terms``);
- statement triggers add them to the sharded counters ``memory_rows`` (``n``, ``tokens``)
  and ``memory_terms`` (``stem, shard -> n``), and subtract them on delete or change.

A query reads its stems' counts and ``N`` and ``tokens`` in one indexed statement: no
scan of the matching rows, and the same IDF and average length as SQLite's for the same
rows. Rows without ``doc_len`` (a database from before the migration, rows an older
package wrote) are counted by :func:`backfill`, run at open and before a search that
finds any: batches of rows locked ``FOR UPDATE SKIP LOCKED`` so concurrent processes
share the work, then a blocking pass so none returns before every row is counted; the
``doc_len IS NULL`` re-check under the row lock means no row is counted twice.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any

from ._scoring import tokens

__all__ = ["KeywordStats", "backfill", "compact", "read_stats", "row_stats", "stem_key"]

#: Stems longer than this (in UTF-8 bytes) are keyed by their hash: a btree key must fit a
#: page, FTS5 tokens may be 32 KiB. ``#`` never occurs in a token (``unicode61`` splits on it).
_MAX_KEY_BYTES = 256
_BATCH = 1000

Stats = tuple[int, str]


def stem_key(stem: str) -> str:
    """The key of a stem in ``memories.terms`` and ``memory_terms``."""
    raw = stem.encode("utf-8", "surrogatepass")
    return stem if len(raw) <= _MAX_KEY_BYTES else "#" + hashlib.sha256(raw).hexdigest()


def row_stats(contents: Sequence[str]) -> list[Stats]:
    """``(doc_len, terms)`` per content: FTS5's token count and the distinct stem keys, space-separated.

    Tokens never hold a space, so the stored array is ``string_to_array(terms, ' ')``.
    """
    return [(len(toks), " ".join(sorted({stem_key(t) for t in toks}))) for toks in tokens(list(contents))]


class KeywordStats:
    """One snapshot's ``N``, total tokens and ``n_t`` of the asked stems (keys)."""

    __slots__ = ("hits", "pending", "rows", "total")

    def __init__(self, rows: int, total: int, hits: dict[str, int], pending: bool) -> None:
        self.rows, self.total, self.hits, self.pending = rows, total, hits, pending

    @property
    def avg_length(self) -> float:
        """FTS5's average row length (``total / N``; 0 for an empty table)."""
        return self.total / self.rows if self.rows else 0.0


def read_stats(cur: Any, keys: Sequence[str]) -> KeywordStats:
    """The counters, read in one statement (one snapshot), and whether any row is uncounted."""
    cur.execute(
        "SELECT r.n, r.tokens, r.pending, t.stem, t.n FROM"
        " (SELECT coalesce(sum(n), 0), coalesce(sum(tokens), 0),"
        "   EXISTS (SELECT 1 FROM memories WHERE doc_len IS NULL) FROM memory_rows) AS r(n, tokens, pending)"
        " LEFT JOIN (SELECT stem, sum(n) FROM memory_terms WHERE stem = ANY(%s) GROUP BY stem) AS t(stem, n) ON true",
        [list(keys)],
    )
    rows = cur.fetchall()
    first = rows[0]
    hits = {stem: int(n) for *_, stem, n in rows if stem is not None}
    return KeywordStats(int(first[0]), int(first[1]), hits, bool(first[2]))


def _count_batch(cur: Any, skip_locked: bool) -> int:
    cur.execute(
        "SELECT seq, content FROM memories WHERE doc_len IS NULL ORDER BY seq LIMIT %s FOR UPDATE"
        + (" SKIP LOCKED" if skip_locked else ""),
        [_BATCH],
    )
    rows = cur.fetchall()
    if not rows:
        return 0
    stats = row_stats([r[1] for r in rows])
    cur.execute(  # one statement: the trigger adds the whole batch at once
        "UPDATE memories AS m SET doc_len = u.len, terms = string_to_array(u.terms, ' ')"
        " FROM unnest(%s::bigint[], %s::int[], %s::text[]) AS u(seq, len, terms)"
        " WHERE m.seq = u.seq AND m.doc_len IS NULL",
        [[r[0] for r in rows], [n for n, _ in stats], [t for _, t in stats]],
    )
    return len(rows)


def backfill(run: Callable[..., Any]) -> int:
    """Count every uncounted row (``run(fn, write=True)``: one transaction per batch); returns how many."""
    done = 0
    for skip_locked in (True, False):  # share the work, then wait for batches other processes hold
        while n := run(lambda cur, s=skip_locked: _count_batch(cur, s), write=True):
            done += n
    if done:  # the planner's statistics still say "every doc_len is NULL": a search's pending
        run(lambda cur: cur.execute("ANALYZE memories"), write=True)  # check would scan the table
    return done


def compact(cur: Any) -> None:
    """Fold ``memory_terms`` to one row per stem and drop zeros (sums unchanged).

    The table lock conflicts with writers' row locks, so a writer in flight finishes
    first and new ones wait: the fold never interleaves with a counted write.
    """
    cur.execute("LOCK TABLE memory_terms IN SHARE ROW EXCLUSIVE MODE")
    cur.execute(
        "WITH gone AS (DELETE FROM memory_terms RETURNING stem, n)"
        " INSERT INTO memory_terms (stem, shard, n) SELECT stem, -1, sum(n) FROM gone GROUP BY stem HAVING sum(n) <> 0"
    )
