"""Leases on SQLite: the ``leases`` table, granted and released in ``BEGIN IMMEDIATE`` transactions.

A mixin of :class:`~atomic_agents.memory.SQLiteMemoryStore` (it uses the store's
connection, lock and read helper); the rules live in :mod:`._leases`.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ._leases import Fence, Lease, check_fence, check_lease_args, held_error
from ._sqlite_schema import write_txn

__all__ = ["SQLiteLeases", "lease_row"]

LEASE_SQL = "SELECT key, holder, token, acquired_at, expires_at, released_at FROM leases WHERE key = ?"


def lease_row(c: sqlite3.Connection, key: str) -> Lease | None:
    row = c.execute(LEASE_SQL, [key]).fetchone()
    return Lease(*row) if row else None


class SQLiteLeases:
    """Leases with fencing tokens (the ``MemoryStore`` Protocol's lease calls)."""

    _conn: sqlite3.Connection
    _lock: threading.RLock

    if TYPE_CHECKING:  # provided by the store

        def _read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]: ...

    def acquire_lease(self, key: str, holder: str, ttl_ms: int) -> Lease:
        """Grant ``key`` to ``holder`` for ``ttl_ms`` with the key's next fencing token.

        Raises :class:`LeaseHeldError` while another grant of the key is live.
        """
        k, h, ttl = check_lease_args(key, holder, ttl_ms)

        def tx(c: sqlite3.Connection) -> Lease:
            now = time.time()
            cur = lease_row(c, k)
            if cur is not None and cur.live(now):
                raise held_error(cur, now)
            new = Lease(k, h, (cur.token if cur else 0) + 1, now, now + ttl / 1000.0)
            c.execute(
                "INSERT INTO leases (key, holder, token, acquired_at, expires_at, released_at) VALUES (?, ?, ?, ?, ?, NULL)"
                " ON CONFLICT (key) DO UPDATE SET holder = excluded.holder, token = excluded.token,"
                " acquired_at = excluded.acquired_at, expires_at = excluded.expires_at, released_at = NULL",
                [new.key, new.holder, new.token, new.acquired_at, new.expires_at],
            )
            return new

        with self._lock:
            return write_txn(self._conn, tx)

    def release_lease(self, key: str, token: int) -> Lease:
        """End the live grant ``token`` of ``key`` (:class:`StaleFenceError` if it is not live)."""
        fence = Fence(check_lease_args(key, "-", 1)[0], token)

        def tx(c: sqlite3.Connection) -> Lease:
            now = time.time()
            cur = lease_row(c, fence.key)
            check_fence(fence, cur, now)
            assert cur is not None
            c.execute("UPDATE leases SET released_at = ? WHERE key = ?", [now, fence.key])
            return Lease(cur.key, cur.holder, cur.token, cur.acquired_at, cur.expires_at, now)

        with self._lock:
            return write_txn(self._conn, tx)

    def get_lease(self, key: str) -> Lease | None:
        """The latest grant of ``key`` (live or ended), or ``None`` if it was never granted."""
        rows = self._read(LEASE_SQL, [key])
        return Lease(*rows[0]) if rows else None

    def leases(self, prefix: str = "") -> list[Lease]:
        """Every key's latest grant whose key starts with ``prefix``."""
        rows = self._read(
            "SELECT key, holder, token, acquired_at, expires_at, released_at FROM leases WHERE substr(key, 1, ?) = ?",
            [len(prefix), prefix],
        )
        return [Lease(*r) for r in rows]

