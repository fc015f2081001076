"""A parse cache for validate and lint, keyed by each file's inode, size and mtime.

Parsing is what makes checking 10,000 notes slow; most notes do not change
between two runs. Like ruff's or mypy's caches, this one is an optimisation
only: an entry is used only when the file's (inode, size, mtime_ns) is exactly
what it was when parsed (an atomic write always makes a new inode), and the
cache lives in ``<agents_root>/_cache/vault/<agent>.json``, a regeneratable
folder the migration snapshot leaves out. Delete it at any time.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
from pathlib import Path
from typing import Any


__all__ = ["ParseCache"]

_FORMAT = 2


def _package_version() -> str:
    from .. import __version__
    from .._schema import CURRENT_SCHEMA_VERSION

    return f"{__version__}/schema{CURRENT_SCHEMA_VERSION}"


def _encode(meta: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Meta as JSON values plus the keys that held dates; anything else is not cached (TypeError)."""
    out: dict[str, Any] = {}
    dates: list[str] = []
    for key, value in meta.items():
        if type(value) is dt.date:
            out[key] = value.isoformat()
            dates.append(key)
        elif _plain_json(value):
            out[key] = value
        else:
            raise TypeError(key)
    return out, dates


def _plain_json(value: Any) -> bool:
    if value is None or isinstance(value, (str, int, float, bool)):
        return not isinstance(value, float) or value == value and abs(value) != float("inf")
    if isinstance(value, list):
        return all(_plain_json(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain_json(v) for k, v in value.items())
    return False


Stamp = tuple[int, int, int]


def stamp_of(st: os.stat_result) -> Stamp:
    return (st.st_ino, st.st_size, st.st_mtime_ns)


class ParseCache:
    """``get(rel, stamp)`` -> meta or None; ``put(rel, stamp, meta)``; ``save()`` if anything changed."""

    def __init__(self, agents_root: Path, agent: str) -> None:
        self.path = agents_root / "_cache" / "vault" / f"{agent}.json"
        self._entries: dict[str, list[Any]] = {}
        self._dirty = False
        self._seen: set[str] = set()
        self._scanned: set[str] = set()  # folders ("memory", "wiki") listed in full this run
        with contextlib.suppress(OSError, ValueError, TypeError, KeyError):
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if data.get("format") == _FORMAT and data.get("package") == _package_version():
                self._entries = data["units"]

    def scanning(self, folder: str) -> None:
        """Say that every file of ``folder`` will be looked up (so absent ones can be dropped)."""
        self._scanned.add(folder)

    def get(self, rel: str, stamp: Stamp) -> dict[str, Any] | None:
        """The cached frontmatter of ``rel`` if the file is unchanged, else ``None``."""
        self._seen.add(rel)
        entry = self._entries.get(rel)
        if entry is None or tuple(entry[0]) != stamp:
            return None
        try:
            meta = dict(entry[1])
            for key in entry[2]:
                meta[key] = dt.date.fromisoformat(meta[key])
            return meta
        except (ValueError, TypeError, KeyError, IndexError):
            return None  # a damaged entry: parse the file again

    def put(self, rel: str, stamp: Stamp, meta: dict[str, Any]) -> None:
        try:
            encoded, dates = _encode(meta)
        except TypeError:
            self._entries.pop(rel, None)
            return
        self._entries[rel] = [list(stamp), encoded, dates, None]
        self._dirty = True

    def issues(self, rel: str) -> list[list[Any]] | None:
        """Validation findings stored for the current version of ``rel`` (after a hit or a put)."""
        entry = self._entries.get(rel)
        return entry[3] if entry is not None and len(entry) > 3 else None

    def set_issues(self, rel: str, issues: list[list[Any]]) -> None:
        entry = self._entries.get(rel)
        if entry is not None:
            entry[3] = issues
            self._dirty = True

    def save(self) -> None:
        """Write the cache (dropping files not seen this run); failures are ignored: it is only a cache."""
        gone = {r for r in self._entries if r not in self._seen and r.split("/", 1)[0] in self._scanned}
        if not self._dirty and not gone:
            return
        for rel in gone:
            del self._entries[rel]
        payload = json.dumps({"format": _FORMAT, "package": _package_version(), "units": self._entries}, separators=(",", ":"))
        with contextlib.suppress(OSError):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
            tmp.write_text(payload, encoding="utf-8")
            os.replace(tmp, self.path)
