"""The hard-delete log of the SQLite store (schema 2): how a snapshot of an older ``rev`` stays usable.

Every change to ``memories`` takes a ``rev`` from one counter (:data:`REV_NOW` + 1) and
a process that holds the vectors as of rev R catches up by reading what is above R.
A soft delete, an edit or an expiry is a row with a higher ``rev``; a hard delete
leaves no row, so it writes one **tombstone** ``(rev, seq)`` per erased row, in the
deleting transaction, with a ``rev`` from the same counter. Catching up is then one
read of rows and tombstones above R (:data:`PULL_SQL`, a single statement, so a
single snapshot of the file): an in-memory matrix, a memory-mapped snapshot and its
ANN graph of any older rev stay valid (the erased keys are marked removed, as soft
deletes are). Only reindexing (every vector changes) still bumps ``store_meta.epoch``.

**Bounding the log.** ``store_meta.tombstone_floor`` F: tombstones with ``rev <= F``
may be gone, so a matrix or snapshot whose rev is below F cannot catch up and is
reloaded (as after an epoch change). ``store_meta.snapshot_rev`` is the rev of the
last snapshot a process published beside the file. Inside each hard delete's own
transaction (no extra commit), :func:`trim` deletes the tombstones at or below

    max(min(rev of the KEEP+1-th newest tombstone, snapshot_rev), rev of the CAP+1-th newest)

and raises the floor to the newest tombstone so dropped. So the newest :data:`KEEP`
tombstones are always kept (a process a little behind just pulls), and older ones
only once the published snapshot is past them: a process behind the floor reloads
*from that snapshot* (a memory map), never from the rows. The log never holds more
than :data:`CAP` entries (~20 bytes each): past that the oldest go even if no
snapshot covers them (a store whose snapshot is never refreshed), and a single hard
delete of more than CAP rows drops its own (they share one rev); a process behind
the floor then loads from the rows, as every process did after a hard delete before.
A reindex empties the log (every process reloads anyway) and sets the floor to the
counter.

The counter never goes back: :data:`REV_NOW` is the largest of the rows' revs, the
tombstones' revs and the floor (which is at least every pruned tombstone's rev), so
an erased row's rev is never handed out again.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

__all__ = [
    "CAP", "FLOOR_SQL", "KEEP", "PULL_SQL", "REV_NOW",
    "clear", "floor_of", "next_rev", "note_snapshot", "record", "snapshot_terms", "trim",
]  # fmt: skip

#: The newest tombstones always kept (a process this far behind catches up by pulling).
KEEP = 10_000
#: The log never holds more than this many tombstones (past it the oldest are dropped).
CAP = 250_000

#: The counter's current value: no row, tombstone or pruned tombstone has a higher rev.
REV_NOW = (
    "SELECT max(coalesce((SELECT max(rev) FROM memories), 0),"
    " coalesce((SELECT max(rev) FROM memory_tombstones), 0),"
    " coalesce((SELECT CAST(value AS INTEGER) FROM store_meta WHERE key = 'tombstone_floor'), 0))"
)

#: Everything above a rev, rows and tombstones, in one statement (one read snapshot).
#: A tombstone comes out as a deleted row with no vector (``deleted_at`` 1).
PULL_SQL = (
    "SELECT seq, agent_id, user_id, org_id, workspace_id, expires_at, deleted_at, embedder, embedding, rev"
    " FROM memories WHERE rev > ?"
    " UNION ALL SELECT seq, NULL, NULL, NULL, NULL, NULL, 1, NULL, NULL, rev FROM memory_tombstones WHERE rev > ?"
    " ORDER BY rev"
)

FLOOR_SQL = "SELECT coalesce((SELECT CAST(value AS INTEGER) FROM store_meta WHERE key = 'tombstone_floor'), 0)"


def next_rev(c: sqlite3.Connection) -> int:
    """The rev of the change this (write) transaction makes."""
    return int(c.execute(REV_NOW).fetchone()[0]) + 1


def floor_of(meta: dict[str, str]) -> int:
    """``store_meta.tombstone_floor`` (0 if absent)."""
    return _int(meta.get("tombstone_floor", "0"))


def snapshot_terms(meta: dict[str, str]) -> tuple[int, int]:
    """What a snapshot must be as of to be used: ``load_snapshot``'s ``(min_rev, legacy_upto)``."""
    return floor_of(meta), _int(meta.get("legacy_snapshot_rev", "0"))


def _int(value: str) -> int:
    try:
        return int(value)
    except ValueError:
        return 0


def record(c: sqlite3.Connection, seqs: Sequence[int], ids: Sequence[str], rev: int) -> int:
    """Erase the rows ``(seq, id)`` that still exist, logging a tombstone for each; how many were erased.

    Matching the id too: a ``seq`` whose row was erased meanwhile by another process may
    belong to a newer row now (SQLite hands the highest rowid out again), which is not
    one the caller chose.
    """
    marks_s, marks_i = ",".join("?" * len(seqs)), ",".join("?" * len(ids))
    where = f"seq IN ({marks_s}) AND id IN ({marks_i})"
    c.execute(f"INSERT OR IGNORE INTO memory_tombstones (rev, seq) SELECT ?, seq FROM memories WHERE {where}", [rev, *seqs, *ids])
    return int(c.execute(f"DELETE FROM memories WHERE {where}", [*seqs, *ids]).rowcount)


def _nth_newest(c: sqlite3.Connection, n: int) -> int | None:
    row = c.execute("SELECT rev FROM memory_tombstones ORDER BY rev DESC LIMIT 1 OFFSET ?", [n]).fetchone()
    return None if row is None else int(row[0])


def _meta_int(c: sqlite3.Connection, key: str) -> int:
    row = c.execute("SELECT value FROM store_meta WHERE key = ?", [key]).fetchone()
    try:
        return int(row[0]) if row is not None else 0
    except ValueError:
        return 0


def trim(c: sqlite3.Connection) -> int:
    """Prune the log by the rule in the module docstring (inside the caller's write transaction); the floor."""
    floor = _meta_int(c, "tombstone_floor")
    beyond_keep = _nth_newest(c, KEEP)
    if beyond_keep is None:
        return floor
    cut = min(beyond_keep, _meta_int(c, "snapshot_rev"))
    beyond_cap = _nth_newest(c, CAP)
    if beyond_cap is not None:
        cut = max(cut, beyond_cap)
    # the floor goes to the newest tombstone actually dropped (not to ``cut``): a matrix as of
    # any rev at or above it lacks nothing the log still has to say
    dropped = c.execute("SELECT max(rev) FROM memory_tombstones WHERE rev <= ?", [cut]).fetchone()[0]
    if dropped is None or int(dropped) <= floor:
        return floor
    c.execute("DELETE FROM memory_tombstones WHERE rev <= ?", [dropped])
    _set(c, "tombstone_floor", int(dropped))
    return int(dropped)


def clear(c: sqlite3.Connection) -> None:
    """Empty the log (a reindex: every process reloads anyway); the floor goes to the counter."""
    now = int(c.execute(REV_NOW).fetchone()[0])
    c.execute("DELETE FROM memory_tombstones")
    _set(c, "tombstone_floor", now)
    _set(c, "snapshot_rev", 0)


def note_snapshot(c: sqlite3.Connection, rev: int, epoch: str) -> None:
    """Record that a snapshot as of ``rev`` was just published beside the file (if it is of the current epoch)."""
    if _meta_str(c, "epoch") == epoch:
        _set(c, "snapshot_rev", rev)


def _meta_str(c: sqlite3.Connection, key: str) -> str | None:
    row = c.execute("SELECT value FROM store_meta WHERE key = ?", [key]).fetchone()
    return None if row is None else str(row[0])


def _set(c: sqlite3.Connection, key: str, value: int) -> None:
    c.execute("INSERT INTO store_meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value", [key, str(value)])
