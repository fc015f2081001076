"""The pinned notes of an agent without parsing every note: a small, self-checking index.

``list_notes(pinned=True)`` must look at the frontmatter of every note; at
10,000 notes that is a parse-cache load and 10,000 lookups (~100-300 ms), paid
by every context assembly. The pinned index keeps, per unit file, its stamp
(inode, size, mtime_ns, ctime_ns) and one flag: pinned and not superseded, or
not. Reading lists the folder and stats every file (no file is opened), and
compares each stamp with the stored one:

* equal: the file was not replaced or written since it was looked at (an
  atomic write makes a new inode; an in-place edit moves the ctime, which no
  user call can set back), so its flag still holds;
* new or different: only that file is read and parsed, and its entry replaced;
* gone: its entry is dropped.

A file stamped within :data:`RACY_NS` of being read ("racy", as in git's index
and in :mod:`._cache`) could change again inside one timestamp tick, so its
entry also holds a digest of the very bytes that were parsed, checked on use
until the file is old enough for the stamp alone.

The pinned notes themselves are then read in full from their files (the file
is the truth: a note that no longer parses, or is no longer pinned, is left
out just as the slow path leaves it out). The result equals
``list_notes(pinned=True, unit_type=...)`` for the same files; the index is an
optimisation only, lives in ``<agents_root>/_cache/vault/<agent>.pinned.json``
(regeneratable, left out of snapshots), and a missing, damaged, foreign or
unwritable index just means every file is parsed once more.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from typing import Any

from .._io import atomic_write, make_dirs, read_nofollow
from .._text import decode
from ..exceptions import FrontmatterParseError, NotFoundError, UnsafePathError
from ._cache import RACY_NS, _package_version, stamp_of
from .._format._frontmatter import parse
from ._units import Note, UnitType

__all__ = ["pinned_notes"]

_FORMAT = 1
_PINNED, _NOT_PINNED = 1, 0


def _digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def _index_path(agent: Any) -> Any:
    return agent.agents_root / "_cache" / "vault" / f"{agent.name}.pinned.json"


def _load(agent: Any) -> dict[str, Any]:
    with contextlib.suppress(OSError, ValueError, TypeError, KeyError, RecursionError, UnsafePathError):
        data = json.loads(read_nofollow(_index_path(agent), root=agent.agents_root).decode("utf-8"))
        if data.get("format") == _FORMAT and data.get("package") == _package_version() and isinstance(data["units"], dict):
            return data["units"]
    return {}


def _save(agent: Any, units: dict[str, Any]) -> None:
    payload = json.dumps({"format": _FORMAT, "package": _package_version(), "units": units}, separators=(",", ":"))
    path = _index_path(agent)
    with contextlib.suppress(OSError, UnsafePathError):  # a read-only vault or a symlinked _cache/: no index
        make_dirs(path.parent, root=agent.agents_root)
        atomic_write(path, payload, root=agent.agents_root, durable=False)


def _look(folder: str, name: str, dfd: int, now: int) -> list[Any] | None:
    """A fresh entry for one file: [ino, size, mtime, ctime, flag, digest-if-racy]; ``None`` if it is gone."""
    try:
        st = os.stat(name, dir_fd=dfd)  # follows a symlink the listing kept (one inside the root), as the scan does
        with open(os.path.join(folder, name), "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        return None
    stamp = stamp_of(st)
    path = os.path.join(folder, name)
    try:
        note = Note(path, "memory", parse(decode(data, path=path), path=path))
        flag = _PINNED if note.pinned and note.superseded_by is None else _NOT_PINNED
    except FrontmatterParseError:
        flag = _NOT_PINNED  # the slow path skips a unit that does not parse
    racy = now - max(stamp[2], stamp[3]) < RACY_NS
    return [*stamp, flag, _digest(data) if racy else None]


def _still_same(folder: str, name: str, entry: list[Any], now: int) -> bool | None:
    """A racy entry checked against the file's bytes: True (and no longer racy), False (changed), None (still racy)."""
    try:
        with open(os.path.join(folder, name), "rb") as fh:
            if _digest(fh.read()) != entry[5]:
                return False
    except OSError:
        return False
    return True if now - max(entry[2], entry[3]) >= RACY_NS else None


def pinned_notes(agent: Any, unit_type: UnitType = "memory") -> list[Note]:
    """The agent's pinned, not superseded notes (or wiki pages) in filename order, read from their files.

    Same result as ``agent.list_notes(pinned=True, unit_type=unit_type)``.
    """
    folder = str(agent.folder(unit_type))
    names = agent._unit_names(unit_type)  # the listing the slow path uses: nothing that leads out of the root
    units = _load(agent)
    stored = units.get(unit_type)
    old: dict[str, list[Any]] = stored if isinstance(stored, dict) else {}
    fresh: dict[str, list[Any]] = {}
    dirty = len(old) != len(names)
    now = time.time_ns()
    try:
        dfd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except FileNotFoundError:
        return []
    try:
        for name in names:
            entry = old.get(name)
            try:
                st = os.stat(name, dir_fd=dfd)
            except FileNotFoundError:
                dirty = True
                continue  # removed while we looked: not a unit any more
            if (isinstance(entry, list) and len(entry) == 6 and entry[0] == st.st_ino and entry[1] == st.st_size
                    and entry[2] == st.st_mtime_ns and entry[3] == st.st_ctime_ns):
                if entry[5] is None:
                    fresh[name] = entry
                    continue
                same = _still_same(folder, name, entry, now)
                if same is not None:
                    if same:
                        fresh[name] = [*entry[:5], None]
                        dirty = True
                        continue
                else:
                    fresh[name] = entry
                    continue
            looked = _look(folder, name, dfd, now)
            dirty = True
            if looked is not None:
                fresh[name] = looked
    finally:
        os.close(dfd)
    if dirty:
        units[unit_type] = fresh
        _save(agent, units)
    out: list[Note] = []
    for name, entry in fresh.items():
        if entry[4] != _PINNED:
            continue
        try:
            note = agent.load(name, unit_type)  # the file is the truth
        except (NotFoundError, FrontmatterParseError, UnsafePathError):
            continue
        if note.pinned and note.superseded_by is None:
            out.append(note)
    return out
