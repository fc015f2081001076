"""BM25's corpus statistics on PostgreSQL, kept as SQLite's FTS5 keeps them (schema migration 3).

FTS5 scores a row with ``N`` (rows indexed), ``n_t`` (rows holding stem ``t``) and the
average length ``total tokens / N``, all over every row of the table. PostgreSQL keeps
the same three numbers exactly, in the transaction of each write:

- the write path tokenizes the content with SQLite's own tokenizer
  (:func:`~._scoring.tokens`: porter, ``unicode61``, diacritics removed) and stores the
  row's length (FTS5's token count), its distinct stems and (schema 5) their counts in
  ``memory_docs``, whose GIN index on the stems finds keyword candidates;
- statement triggers add them to the sharded counters ``memory_rows`` (``tokens``,
  ``docs``; ``n`` is migration 2's row count) and ``memory_terms`` (``stem, shard -> n``),
  and subtract them when the row is erased or its content changes.

A query reads its stems' counts, ``N`` and ``tokens`` in one indexed statement: no scan
of the matching rows, and the same IDF and average length as SQLite's for the same rows.
Rows without counts (``docs < n``: a database from before the migration, rows an older
package wrote or changed; or, schema 5, ``tfs IS NULL``: counted before term counts were
kept) are counted by :func:`backfill`, run at open and before a search that finds any. It walks the table by ``seq`` in batches; the primary key of
``memory_docs`` means a row is never counted twice (two processes backfilling at once
only repeat some tokenizing), and each batch inserts only rows still holding the content
it read, locked ``FOR KEY SHARE`` so that one erased meanwhile is not counted.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from ._scoring import tokens

__all__ = ["KeywordStats", "backfill", "compact", "insert_docs", "pending", "read_stats", "row_stats", "stem_key"]

#: Stems longer than this (in UTF-8 bytes) are keyed by their hash: a btree key must fit a
#: page, FTS5 tokens may be 32 KiB. ``#`` never occurs in a token (``unicode61`` splits on it).
_MAX_KEY_BYTES = 256
_BATCH = 1000
#: Some counted row lacks its term counts (schema 5's ``tfs``): served by a partial index.
_UNTALLIED = "EXISTS (SELECT 1 FROM memory_docs WHERE tfs IS NULL)"

Stats = tuple[int, str, str]


def stem_key(stem: str) -> str:
    """The key of a stem in ``memories.terms`` and ``memory_terms``."""
    raw = stem.encode("utf-8", "surrogatepass")
    return stem if len(raw) <= _MAX_KEY_BYTES else "#" + hashlib.sha256(raw).hexdigest()


def row_stats(contents: Sequence[str]) -> list[Stats]:
    """``(doc_len, terms, tfs)`` per content: FTS5's token count, the distinct stem keys and their counts.

    Both space-separated (tokens never hold a space): the stored arrays are
    ``string_to_array(terms, ' ')`` and ``string_to_array(tfs, ' ')::int[]``, ``tfs[i]``
    the count of ``terms[i]`` (schema 5).
    """
    out: list[Stats] = []
    for toks in tokens(list(contents)):
        counts = Counter(stem_key(t) for t in toks)
        keys = sorted(counts)
        out.append((len(toks), " ".join(keys), " ".join(str(counts[k]) for k in keys)))
    return out


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
        f"SELECT r.n, r.tokens, r.docs, t.stem, t.n, {_UNTALLIED} FROM"
        " (SELECT coalesce(sum(n), 0), coalesce(sum(tokens), 0), coalesce(sum(docs), 0) FROM memory_rows)"
        " AS r(n, tokens, docs)"
        " LEFT JOIN (SELECT stem, sum(n) FROM memory_terms WHERE stem = ANY(%s) GROUP BY stem) AS t(stem, n) ON true",
        [list(keys)],
    )
    rows = cur.fetchall()
    first = rows[0]
    hits = {stem: int(n) for _, _, _, stem, n, _ in rows if stem is not None}
    return KeywordStats(int(first[0]), int(first[1]), hits, int(first[2]) != int(first[0]) or bool(first[5]))


def pending(cur: Any) -> bool:
    """Whether some row of ``memories`` has no counts yet (O(1): the counters' sums, the partial index)."""
    cur.execute(f"SELECT coalesce(sum(n), 0) <> coalesce(sum(docs), 0) OR {_UNTALLIED} FROM memory_rows")
    return bool(cur.fetchone()[0])


def insert_docs(cur: Any, seqs: Sequence[int], stats: Sequence[Stats]) -> None:
    """The counts of rows this transaction wrote (one statement: the trigger adds them at once)."""
    cur.execute(
        "INSERT INTO memory_docs (seq, doc_len, terms, tfs)"
        " SELECT seq, len, string_to_array(terms, ' '), string_to_array(tfs, ' ')::int[]"
        " FROM unnest(%s::bigint[], %s::int[], %s::text[], %s::text[]) AS u(seq, len, terms, tfs)",
        [list(seqs), *_columns(stats)],
    )


def _count_batch(cur: Any, after: int) -> int:
    """Count the next uncounted rows past ``seq = after``; returns the last seq looked at (0: none left)."""
    cur.execute(
        "SELECT m.seq, m.content, m.content_hash FROM memories m WHERE m.seq > %s"
        " AND NOT EXISTS (SELECT 1 FROM memory_docs d WHERE d.seq = m.seq) ORDER BY m.seq LIMIT %s",
        [after, _BATCH],
    )
    rows = cur.fetchall()
    if not rows:
        return 0
    stats = row_stats([r[1] for r in rows])
    cur.execute(
        "INSERT INTO memory_docs (seq, doc_len, terms, tfs)"
        " SELECT u.seq, u.len, string_to_array(u.terms, ' '), string_to_array(u.tfs, ' ')::int[]"
        " FROM unnest(%s::bigint[], %s::text[], %s::int[], %s::text[], %s::text[]) AS u(seq, hash, len, terms, tfs)"
        " JOIN memories m ON m.seq = u.seq AND m.content_hash = u.hash"
        " ORDER BY u.seq FOR KEY SHARE OF m ON CONFLICT (seq) DO NOTHING",
        [[r[0] for r in rows], [r[2] for r in rows], *_columns(stats)],
    )
    return int(rows[-1][0])


def _columns(stats: Sequence[Stats]) -> list[list[Any]]:
    return [[n for n, _, _ in stats], [t for _, t, _ in stats], [f for _, _, f in stats]]


def _tally_batch(cur: Any, after: int) -> int:
    """Give the next counted rows without term counts (``tfs``: rows counted before schema 5, or by
    an older package's process still running) their counts; returns the last seq looked at (0: none left).

    Only a row still holding the content read (its hash) and the same stems gets them; the rows
    are locked in seq order first, and a row another process tallied meanwhile is left as it is.
    """
    cur.execute(
        "SELECT d.seq, m.content, m.content_hash FROM memory_docs d JOIN memories m ON m.seq = d.seq"
        " WHERE d.tfs IS NULL AND d.seq > %s ORDER BY d.seq LIMIT %s",
        [after, _BATCH],
    )
    rows = cur.fetchall()
    if not rows:
        return 0
    stats = row_stats([r[1] for r in rows])
    seqs = [r[0] for r in rows]
    cur.execute("SELECT seq FROM memory_docs WHERE seq = ANY(%s) AND tfs IS NULL ORDER BY seq FOR NO KEY UPDATE", [seqs])
    cur.execute(
        "UPDATE memory_docs d SET tfs = string_to_array(u.tfs, ' ')::int[]"
        " FROM unnest(%s::bigint[], %s::text[], %s::int[], %s::text[], %s::text[]) AS u(seq, hash, len, terms, tfs)"
        " JOIN memories m ON m.seq = u.seq AND m.content_hash = u.hash"
        " WHERE d.seq = u.seq AND d.tfs IS NULL AND d.doc_len = u.len AND d.terms = string_to_array(u.terms, ' ')",
        [seqs, [r[2] for r in rows], *_columns(stats)],
    )
    return int(rows[-1][0])


def backfill(run: Callable[..., Any]) -> int:
    """Count every uncounted row (``run(fn, write=True)``: one transaction per batch); returns the walks made."""
    walks = 0
    while run(pending, write=False) and walks < 3:  # rows committed behind the walk: walk again
        walks += 1
        after = 0
        while after := run(lambda cur, a=after: _count_batch(cur, a), write=True):
            pass
        after = 0
        while after := run(lambda cur, a=after: _tally_batch(cur, a), write=True):
            pass
    return walks
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
