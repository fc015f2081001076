"""Record ids: UUIDs whose first 48 bits are the write time (the UUIDv7 layout).

ATP needs the id before the write (the identity line names it). Time-ordered
ids also make the router's tie-break (equal ``stored_at``: order by id) follow
the order records were written in one process.
"""

from __future__ import annotations

import datetime as dt
import os
import threading
import time
import uuid

__all__ = ["iso_now", "new_record_id"]

_lock = threading.Lock()
_last = [0, 0]  # last millisecond used, and the counter within it


def new_record_id(now: float | None = None) -> str:
    """A UUIDv7 string; ids made in one process sort in the order they were made."""
    ms = int((time.time() if now is None else now) * 1000)
    with _lock:
        if ms <= _last[0]:
            ms, seq = _last[0], _last[1] + 1
        else:
            seq = int.from_bytes(os.urandom(2), "big") & 0x1FF  # random start, room to count up
        _last[:] = [ms, seq]
    rand_a = seq & 0xFFF
    rand_b = int.from_bytes(os.urandom(8), "big") & ((1 << 62) - 1)
    value = (ms & ((1 << 48) - 1)) << 80 | 0x7 << 76 | rand_a << 64 | 0b10 << 62 | rand_b
    return str(uuid.UUID(int=value))


def iso_now(now: float | None = None) -> str:
    """``stored_at``: ISO 8601, UTC, microseconds (so records of one second still order)."""
    t = time.time() if now is None else now
    return dt.datetime.fromtimestamp(t, dt.timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")
