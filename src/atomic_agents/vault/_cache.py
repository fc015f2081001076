"""A parse cache for validate and lint, keyed by each file's inode, size, mtime and ctime.

Parsing is what makes checking 10,000 notes slow; most notes do not change
between two runs. Like ruff's or mypy's caches, this one is an optimisation
only: an entry is used only when the file's (inode, size, mtime_ns, ctime_ns)
is exactly what it was when parsed. An atomic write makes a new inode; an
in-place edit that keeps size and mtime (``cp -p``, ``touch -r``) still sets
the ctime, which no user call can set back. A file changed so shortly before
it was cached that a second change could fall in the same timestamp tick (the
kernel's clock is coarse; some file systems keep seconds) is "racy", as in
git's index: its entry also holds a digest of the bytes, checked on use until
the file is old enough for the stamp alone to be trusted.

The cache lives in ``<agents_root>/_cache/vault/<agent>.json``, a
regeneratable folder the migration snapshot leaves out. Delete it at any time.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import time
from pathlib import Path
from typing import Any

from .._io import atomic_write, make_dirs, read_nofollow
from ..exceptions import UnsafePathError

__all__ = ["ParseCache"]

_FORMAT = 3
#: a file stamped less than this before it was cached is checked by digest (FAT keeps 2 s, HFS+ 1 s)
RACY_NS = 2_000_000_000


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


Stamp = tuple[int, int, int, int]


def stamp_of(st: os.stat_result) -> Stamp:
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _racy(stamp: Stamp) -> bool:
    return time.time_ns() - max(stamp[2], stamp[3]) < RACY_NS


def _digest(path: str | os.PathLike[str]) -> str | None:
    import hashlib  # only racy entries are digested: most runs never load it (nor OpenSSL)

    try:
        with open(path, "rb") as fh:
            return hashlib.blake2b(fh.read(), digest_size=16).hexdigest()
    except OSError:
        return None


class ParseCache:
    """``get(rel, stamp)`` -> meta or None; ``put(rel, stamp, meta)``; ``save()`` if anything changed."""

    def __init__(self, agents_root: Path, agent: str) -> None:
        self.root = agents_root
        self.path = agents_root / "_cache" / "vault" / f"{agent}.json"
        self._entries: dict[str, list[Any]] = {}
        self._dirty = False
        self._seen: set[str] = set()
        self._scanned: set[str] = set()  # folders ("memory", "wiki") listed in full this run
        with contextlib.suppress(OSError, ValueError, TypeError, KeyError, RecursionError, UnsafePathError):
            data = json.loads(read_nofollow(self.path, root=agents_root).decode("utf-8"))
            if data.get("format") == _FORMAT and data.get("package") == _package_version():
                self._entries = data["units"]

    def scanning(self, folder: str) -> None:
        """Say that every file of ``folder`` will be looked up (so absent ones can be dropped)."""
        self._scanned.add(folder)

    def get(self, rel: str, stamp: Stamp, path: str | os.PathLike[str] | None = None) -> dict[str, Any] | None:
        """The cached frontmatter of ``rel`` if the file (at ``path``) is unchanged, else ``None``."""
        self._seen.add(rel)
        entry = self._entries.get(rel)
        if entry is None or tuple(entry[0]) != stamp:
            return None
        known = entry[4] if len(entry) > 4 else None
        if known is not None:
            if path is None or _digest(path) != known:
                return None  # a racy entry we cannot check, or changed within one timestamp tick
            if not _racy(stamp):
                entry[4] = None  # checked after the tick: from now on the stamp alone tells
                self._dirty = True
        try:
            meta = dict(entry[1])
            for key in entry[2]:
                meta[key] = dt.date.fromisoformat(meta[key])
            return meta
        except (ValueError, TypeError, KeyError, IndexError):
            return None  # a damaged entry: parse the file again

    def put(self, rel: str, stamp: Stamp, meta: dict[str, Any], path: str | os.PathLike[str] | None = None) -> None:
        """Cache the frontmatter parsed from ``rel`` as stamped; a racy file also gets a digest of its bytes (read at ``path``)."""
        try:
            encoded, dates = _encode(meta)
        except TypeError:
            self._entries.pop(rel, None)
            return
        known = None
        if _racy(stamp):
            known = _digest(path) if path is not None else None
            if known is None:
                self._entries.pop(rel, None)  # racy and not checkable: do not cache
                return
        self._entries[rel] = [list(stamp), encoded, dates, None, known]
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
        with contextlib.suppress(OSError, UnsafePathError):  # a symlinked _cache/ is simply not used
            make_dirs(self.path.parent, root=self.root)
            atomic_write(self.path, payload, root=self.root, durable=False)
