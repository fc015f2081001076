"""Leases with fencing tokens on PostgreSQL: a mixin of :class:`PostgresMemoryStore`.

Times are the server's clock; a grant is serialised per key by a transaction-scoped
advisory lock, so two clients racing for a key that has no row yet still get one winner.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from ._leases import Fence, Lease, check_fence, check_lease_args, held_error

__all__ = ["PostgresLeases"]

T = TypeVar("T")
_LEASE_COLS = "key, holder, token, acquired_at, expires_at, released_at"
_NOW = "SELECT extract(epoch FROM clock_timestamp())::double precision"


def _lease(cur: Any, key: str, lock: str = "") -> Lease | None:
    cur.execute(f"SELECT {_LEASE_COLS} FROM leases WHERE key = %s{lock}", [key])
    row = cur.fetchone()
    return Lease(*row) if row else None


def _server_now(cur: Any) -> float:
    cur.execute(_NOW)
    return float(cur.fetchone()[0])


class PostgresLeases:
    """``acquire_lease`` / ``release_lease`` / ``get_lease`` / ``leases``."""

    if TYPE_CHECKING:  # provided by the store

        def _run(self, fn: Callable[[Any], T], *, write: bool) -> T: ...

        def _read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]: ...

    def acquire_lease(self, key: str, holder: str, ttl_ms: int) -> Lease:
        """Grant ``key`` to ``holder`` for ``ttl_ms`` with the key's next fencing token.

        Serialised per key by a transaction-scoped advisory lock (the row may not exist
        yet); times are the server's clock. Raises :class:`LeaseHeldError` while another
        grant of the key is live.
        """
        k, h, ttl = check_lease_args(key, holder, ttl_ms)

        def tx(cur: Any) -> Lease:
            cur.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 7))", [k])
            cur_lease = _lease(cur, k, " FOR UPDATE")
            now = _server_now(cur)
            if cur_lease is not None and cur_lease.live(now):
                raise held_error(cur_lease, now)
            new = Lease(k, h, (cur_lease.token if cur_lease else 0) + 1, now, now + ttl / 1000.0)
            cur.execute(
                f"INSERT INTO leases ({_LEASE_COLS}) VALUES (%s, %s, %s, %s, %s, NULL)"
                " ON CONFLICT (key) DO UPDATE SET holder = excluded.holder, token = excluded.token,"
                " acquired_at = excluded.acquired_at, expires_at = excluded.expires_at, released_at = NULL",
                [new.key, new.holder, new.token, new.acquired_at, new.expires_at],
            )
            return new

        return self._run(tx, write=True)

    def release_lease(self, key: str, token: int) -> Lease:
        """End the live grant ``token`` of ``key`` (:class:`StaleFenceError` if it is not live)."""
        fence = Fence(check_lease_args(key, "-", 1)[0], token)

        def tx(cur: Any) -> Lease:
            cur_lease = _lease(cur, fence.key, " FOR UPDATE")
            now = _server_now(cur)
            check_fence(fence, cur_lease, now)
            assert cur_lease is not None
            cur.execute("UPDATE leases SET released_at = %s WHERE key = %s", [now, fence.key])
            return Lease(cur_lease.key, cur_lease.holder, cur_lease.token, cur_lease.acquired_at, cur_lease.expires_at, now)

        return self._run(tx, write=True)

    def get_lease(self, key: str) -> Lease | None:
        """The latest grant of ``key`` (live or ended), or ``None`` if it was never granted."""
        rows = self._read(f"SELECT {_LEASE_COLS} FROM leases WHERE key = %s", [key])
        return Lease(*rows[0]) if rows else None

    def leases(self, prefix: str = "") -> list[Lease]:
        """Every key's latest grant whose key starts with ``prefix``."""
        rows = self._read(
            f"SELECT {_LEASE_COLS} FROM leases WHERE left(key, %s) = %s ORDER BY key", [len(prefix), prefix]
        )
        return [Lease(*r) for r in rows]
