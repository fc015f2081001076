"""Leases with fencing tokens: the one coordination primitive a store offers.

A lease gives one holder a key (an ATP goal, say) until it expires or is
released. Every grant of a key carries a token one greater than the key's last
token, so a writer that lost its lease (it stalled past the expiry and someone
else claimed the key) holds a *stale* token and can be refused at the write:
the fencing-token scheme. Grants, releases and fenced writes are serialised by
the backend (one ``BEGIN IMMEDIATE`` transaction in SQLite), so two racing
claimers never both win.

The store knows nothing of what a key means; ATP builds claims on it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ..exceptions import ConflictError, ValidationError

__all__ = ["MAX_LEASE_MS", "Fence", "Lease", "LeaseHeldError", "StaleFenceError", "check_fence", "check_lease_args", "held_error"]

#: Longest lease a holder may ask for: a day. Longer is a lock that outlives its holder.
MAX_LEASE_MS = 24 * 3600 * 1000


@dataclass(frozen=True)
class Lease:
    """One grant of ``key`` to ``holder``. Times are unix seconds.

    >>> Lease("goal:g1", "builder", 3, 0.0, 60.0, None).live(now=30.0)
    True
    """

    key: str
    holder: str
    token: int
    acquired_at: float
    expires_at: float
    released_at: float | None = None

    def live(self, now: float | None = None) -> bool:
        now = time.time() if now is None else now
        return self.released_at is None and self.expires_at > now

    def to_dict(self) -> dict[str, object]:
        return {
            "key": self.key,
            "holder": self.holder,
            "token": self.token,
            "acquired_at": self.acquired_at,
            "expires_at": self.expires_at,
            "released_at": self.released_at,
        }


@dataclass(frozen=True)
class Fence:
    """"Write only if ``token`` is still the live lease on ``key``" (checked in the write's transaction).

    ``token=0`` means "only if no live lease holds ``key``": a writer without a claim
    is refused atomically if someone claimed the key after it last looked.
    """

    key: str
    token: int


class LeaseHeldError(ConflictError):
    """A live lease on the key belongs to someone else. ``.lease`` is that lease."""

    def __init__(self, message: str, *, lease: Lease) -> None:
        self.lease = lease
        super().__init__(message)


class StaleFenceError(ConflictError):
    """A write or release presented a token that is not the key's live lease."""

    def __init__(self, message: str, *, key: str, token: int, current: Lease | None) -> None:
        self.key = key
        self.token = token
        self.current = current
        super().__init__(message)


def check_lease_args(key: object, holder: object, ttl_ms: object) -> tuple[str, str, int]:
    if not isinstance(key, str) or not key or len(key) > 1024:
        raise ValidationError("lease key must be a non-empty string", field="key", rule="type")
    if not isinstance(holder, str) or not holder or len(holder) > 512:
        raise ValidationError("lease holder must be a non-empty string", field="holder", rule="type")
    if isinstance(ttl_ms, bool) or not isinstance(ttl_ms, int) or not 0 < ttl_ms <= MAX_LEASE_MS:
        raise ValidationError(f"ttl_ms must be an integer in 1..{MAX_LEASE_MS}", field="ttl_ms", rule="range")
    return key, holder, ttl_ms


def check_fence(fence: Fence, current: Lease | None, now: float) -> None:
    """Raise :class:`StaleFenceError` unless ``fence`` names the live lease ``current``
    (for ``token=0``: :class:`LeaseHeldError` if any lease on the key is live)."""
    if fence.token == 0:
        if current is not None and current.live(now):
            raise held_error(current, now)
        return
    if current is None or current.token != fence.token or not current.live(now):
        state = "no lease" if current is None else f"token {current.token} ({'live' if current.live(now) else 'ended'})"
        raise StaleFenceError(
            f"token {fence.token} is stale for {fence.key}: the key has {state}; claim it again",
            key=fence.key,
            token=fence.token,
            current=current,
        )


def held_error(current: Lease, now: float) -> LeaseHeldError:
    left = max(0.0, current.expires_at - now)
    return LeaseHeldError(
        f"{current.key} is held by {current.holder} (token {current.token}) for another {left:.0f} s",
        lease=current,
    )
