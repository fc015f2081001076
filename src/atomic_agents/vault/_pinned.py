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
optimisation only, lives in ``<agents_root>/_cache/vault/<agent>.<memory|wiki>.pinned.json``
(regeneratable, left out of snapshots), and a missing, damaged, foreign or
unwritable index just means every file is parsed once more.
"""

from __future__ import annotations

import bisect
import contextlib
import json
import os
import stat
import threading
import time
from typing import Any

from .._io import atomic_write, make_dirs, read_nofollow
from .._text import decode
from ..exceptions import FrontmatterParseError, NotFoundError, UnsafePathError
from ._cache import RACY_NS, _package_version
from .._format._frontmatter import parse
from ._units import Note, UnitType
from ._watch import MAX_FOLDERS, changed

__all__ = ["pinned_notes"]

_FORMAT = 2


def _digest(data: bytes) -> str:
    import hashlib  # loaded by the first digest, not by every command that imports the vault

    return hashlib.blake2b(data, digest_size=16).hexdigest()


def _stamp_text(st: os.stat_result) -> str:
    # one string per file: 10,000 entries load as strings, not lists the garbage collector has to walk
    return f"{st.st_ino} {st.st_size} {st.st_mtime_ns} {st.st_ctime_ns}"


def _index_path(agent: Any, unit_type: str) -> Any:
    return agent.agents_root / "_cache" / "vault" / f"{agent.name}.{unit_type}.pinned.json"


class _Index:
    """``stamps``: name -> stamp text; ``pinned``: names pinned and live; ``racy``: name -> digest of the parsed bytes."""

    def __init__(self, stamps: dict[str, str], pinned: set[str], racy: dict[str, str]) -> None:
        self.stamps, self.pinned, self.racy = stamps, pinned, racy


def _load(agent: Any, unit_type: str) -> _Index:
    with contextlib.suppress(OSError, ValueError, TypeError, KeyError, RecursionError, AttributeError, UnsafePathError):
        data = json.loads(read_nofollow(_index_path(agent, unit_type), root=agent.agents_root).decode("utf-8"))
        if data.get("format") == _FORMAT and data.get("package") == _package_version():
            stamps, pinned, racy = data["stamps"], data["pinned"], data["racy"]
            if (isinstance(stamps, dict) and isinstance(pinned, list) and isinstance(racy, dict)
                    and all(isinstance(v, str) for v in stamps.values()) and all(isinstance(v, str) for v in racy.values())):
                return _Index(stamps, {n for n in pinned if isinstance(n, str)}, racy)
    return _Index({}, set(), {})


def _save(agent: Any, unit_type: str, index: _Index) -> None:
    payload = json.dumps({"format": _FORMAT, "package": _package_version(), "stamps": index.stamps,
                          "pinned": sorted(index.pinned), "racy": index.racy}, separators=(",", ":"))
    path = _index_path(agent, unit_type)
    with contextlib.suppress(OSError, UnsafePathError):  # a read-only vault or a symlinked _cache/: no index
        make_dirs(path.parent, root=agent.agents_root)
        atomic_write(path, payload, root=agent.agents_root, durable=False)


def _racy(st: os.stat_result, now: int) -> bool:
    return now - max(st.st_mtime_ns, st.st_ctime_ns) < RACY_NS


def _read_regular(dfd: int, name: str) -> tuple[os.stat_result, bytes] | None:
    """The stat and bytes of ``name`` if it is a regular file (a FIFO, folder or device put there: ``None``, no hang)."""
    try:  # follows a symlink the listing kept (one inside the root), as the scan does
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd)
    except OSError:  # gone, unreadable, a loop
        return None
    with open(fd, "rb") as fh:
        try:
            st = os.fstat(fd)  # the stamp of the very file read, taken before the read
            return (st, fh.read()) if stat.S_ISREG(st.st_mode) else None
        except OSError:
            return None


def _look(folder: str, name: str, dfd: int, now: int, index: _Index) -> None:
    """Read and parse one new or changed file and put its entry in ``index`` (or none if it is gone)."""
    index.stamps.pop(name, None)
    index.pinned.discard(name)
    index.racy.pop(name, None)
    got = _read_regular(dfd, name)
    if got is None:  # no entry: looked at again when it changes
        return
    st, data = got
    path = os.path.join(folder, name)
    try:
        note = Note(path, "memory", parse(decode(data, path=path), path=path))
        if note.pinned and note.superseded_by is None:
            index.pinned.add(name)
    except FrontmatterParseError:
        pass  # the slow path skips a unit that does not parse
    index.stamps[name] = _stamp_text(st)  # the stamp taken before the read: a later change shows as a new stamp
    if _racy(st, now):
        index.racy[name] = _digest(data)  # of the very bytes parsed


def _bytes_digest(dfd: int, name: str) -> str | None:
    got = _read_regular(dfd, name)
    return None if got is None else _digest(got[1])


class _Live:
    """What this process knows of one folder between two calls (used only while :func:`._watch.changed` vouches for it)."""

    __slots__ = ("always", "index", "names", "where")

    def __init__(self, index: _Index, names: list[str], always: set[str], where: tuple[str, str]) -> None:
        self.index, self.names, self.always, self.where = index, names, always, where


# (agents root, folder, unit type) -> what the last call saw
_live: dict[tuple[str, str, str], _Live] = {}
_looking = threading.Lock()


def _reset_after_fork() -> None:
    """A child starts afresh: the lock may be held by a thread that is not in the child (it would never be released)."""
    global _looking
    _looking = threading.Lock()
    _live.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


def _forget(index: _Index, name: str) -> None:
    index.stamps.pop(name, None)
    index.pinned.discard(name)
    index.racy.pop(name, None)


def _listed(names: list[str], name: str) -> bool:
    at = bisect.bisect_left(names, name)
    return at < len(names) and names[at] == name


def _pinned_names(agent: Any, unit_type: UnitType) -> list[str] | None:
    """The names the index holds as pinned and live, every entry checked (``None``: no folder)."""
    folder = str(agent.folder(unit_type))
    key = (str(agent.agents_root), folder, unit_type)
    news = changed(folder, f"pinned:{unit_type}")  # before looking: a write from here on shows at the next call
    live = _live.pop(key, None)
    # The listing's rule (which entries lead out of the root) depends on where the root and the folder resolve
    # to: the same watched folder can be reached by a new path (a parent moved, a link re-pointed) with no event.
    where = (os.path.realpath(agent.agents_root), os.path.realpath(folder))
    dirty = False
    tracked: set[str] | None = None  # watched: the names already stat'ed at every call (new hard links show against it)
    if news is None or live is None or live.where != where:
        links: set[str] = set()
        names = agent._unit_names(unit_type, links=links)  # the listing the slow path uses: nothing out of the root
        index = _load(agent, unit_type)  # every stamp is checked below: the shared index is as good as ours
        look = names
        seen = set(names)
        for gone in [n for n in index.stamps if n not in seen]:  # not a unit any more
            _forget(index, gone)
            dirty = True
    else:
        index, names, links = live.index, live.names, live.always
        tracked = set(links)
        again = news | links  # a symlink can turn into a unit or out of one (its target came, went, moved) with no event here
        for name in again:
            unit, link = agent._unit_name(unit_type, name)
            at = bisect.bisect_left(names, name)
            listed = _listed(names, name)
            if unit and not listed:
                names.insert(at, name)
            elif not unit and listed:
                del names[at]
            links.discard(name)  # a hard-linked file is put back below when its stat says so
            if link:
                links.add(name)
            if not unit and name in index.stamps:
                _forget(index, name)
                dirty = True
        look = [n for n in sorted(again | set(index.racy)) if _listed(names, n)]
    now = time.time_ns()
    try:
        dfd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except FileNotFoundError:
        return None
    try:
        stamps = index.stamps
        todo = list(look)
        for name in todo:  # grows by the other names of a file hard-linked since the last look (below)
            try:
                st = os.stat(name, dir_fd=dfd)
            except OSError:  # gone, or (since the listing) a symlink loop, unreadable: its entry goes
                _look(folder, name, dfd, now, index)
                dirty = True
                continue
            if st.st_nlink > 1:
                links.add(name)  # another name of the same file can be written without an event here
                if tracked is not None and name not in tracked:  # hard-linked since the last look (e.g. `ln a.md b.md`)
                    tracked.add(name)
                    ino = f"{st.st_ino} "
                    for other, stamp in stamps.items():  # its other names here got no event: stat'ed from now on
                        if stamp.startswith(ino) and other not in tracked and _listed(names, other):
                            tracked.add(other)
                            todo.append(other)
            if stamps.get(name) == _stamp_text(st):
                known = index.racy.get(name)
                if known is None:
                    continue
                if _bytes_digest(dfd, name) == known:
                    if not _racy(st, now):
                        del index.racy[name]  # checked after the tick: from now on the stamp alone tells
                        dirty = True
                    continue
            _look(folder, name, dfd, now, index)
            dirty = True
    finally:
        os.close(dfd)
    if dirty:
        _save(agent, unit_type, index)
    _live[key] = _Live(index, names, links, where)  # what the next call starts from if the watch vouches for the folder
    while len(_live) > MAX_FOLDERS:  # a process visiting many agents keeps the most recent ones
        del _live[next(iter(_live))]
    return sorted(index.pinned)


def pinned_notes(agent: Any, unit_type: UnitType = "memory") -> list[Note]:
    """The agent's pinned, not superseded notes (or wiki pages) in filename order, read from their files.

    Same result as ``agent.list_notes(pinned=True, unit_type=unit_type)``.

    In a process that asks more than once, the folder is watched (:mod:`._watch`): a
    later call stats only the names the kernel reported written since the previous
    call, plus every symlink and hard-linked file (a write through another name raises
    no event in this folder); whenever the watch cannot vouch, every file is stat'ed.
    """
    with _looking:  # one look at a time: two threads must not split one folder's events between them
        pinned = _pinned_names(agent, unit_type)
    out: list[Note] = []
    for name in pinned or []:
        try:
            note = agent.load(name, unit_type)  # the file is the truth
        except (NotFoundError, FrontmatterParseError, UnsafePathError):
            continue
        if note.pinned and note.superseded_by is None:
            out.append(note)
    return out
