"""The vault's notes mirrored into the memory store: one memory per note or wiki page.

The vault stays the source of truth. Each mirrored memory carries the note's
path (``memory/<file>`` or ``wiki/<file>``) and a digest of the file's bytes,
so :func:`sync` reads every file but parses and embeds only the ones whose
bytes changed (the store in turn reuses a stored vector for equal content, so
touching ``last_seen`` never re-embeds). A note whose file is gone is
forgotten; a superseded or expired one stays, marked by ``status``. Dropping
every mirrored memory and syncing again (``rebuild=True``) gives the same
mirror: nothing in it comes from anywhere but the files.

:class:`MirrorHook` keeps the mirror current on every vault write (the vault
calls it in the same operation, under the agent's lock); when it fails, the
vault has already written the note, records ``<agent>/.mirror-stale`` (lint
warns) and the next :func:`sync` repairs the mirror and clears the mark.
"""

from __future__ import annotations

import datetime as dt
import errno
import hashlib
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._io import resolve_inside
from .._text import decode
from ..exceptions import FrontmatterParseError, UnsafePathError, ValidationError
from ..memory import MAX_CONTENT_CHARS, Memory, MemoryStore, Scope
from ..vault import Agent, Issue, Note
from ..vault._agent import MIRROR_STALE
from .._format._frontmatter import parse

__all__ = ["MIRROR_USER", "LazyMirrorHook", "MirrorHook", "NoteHit", "SyncReport", "check", "mirror_scope", "search", "sync",
           "unit_memory"]

#: ``user_id`` of mirrored notes: the vault agent is the ``agent_id``; "vault" tells them from other memories.
MIRROR_USER = "vault"
#: ``metadata["source"]`` of every mirrored memory.
SOURCE = "vault"
_BATCH = 256
UnitType = str


def mirror_scope(agent: Agent) -> Scope:
    """The scope an agent's notes are mirrored under (org/workspace: the environment's, as for any memory)."""
    return Scope.resolve(agent.name, MIRROR_USER)


def _digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def _plain(value: Any) -> Any:
    """A frontmatter value as JSON metadata (dates as ISO text; anything odd as its text)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return str(value)


def status_of(metadata: Mapping[str, Any], today: dt.date) -> str:
    """``superseded``, ``expired`` (``expires_at`` before today) or ``live``: what search leaves out by default."""
    if metadata.get("superseded_by"):
        return "superseded"
    exp = metadata.get("expires_at")
    if isinstance(exp, str):
        try:
            if dt.date.fromisoformat(exp[:10]) < today:
                return "expired"
        except ValueError:
            pass
    return "live"


def unit_memory(note: Note, rel: str, digest: str, today: dt.date) -> tuple[str, dict[str, Any]]:
    """(content, metadata) of one note's memory: name, hook and body are what recall matches."""
    meta = note.meta
    name = meta.get("name")
    desc = meta.get("description")
    text = "\n".join(str(x) for x in (name, desc) if x) + "\n\n" + note.body.strip()
    content = text.strip()[:MAX_CONTENT_CHARS] or rel
    tags = meta.get("tags")
    metadata: dict[str, Any] = {
        "source": SOURCE,
        "path": rel,
        "unit_type": note.unit_type,
        "type": _plain(meta.get("type")),
        "name": _plain(name),
        "description": _plain(desc),
        "confidence": _plain(meta.get("confidence")),
        "pinned": meta.get("pinned") is True,
        "expires_at": _plain(meta.get("expires_at")),
        "superseded_by": _plain(meta.get("superseded_by")),
        "tags": [str(t) for t in tags] if isinstance(tags, list) else [],
        "schema_version": _plain(meta.get("schema_version")),
        "content_hash": digest,
    }
    metadata["status"] = status_of(metadata, today)
    return content, metadata


@dataclass
class SyncReport:
    """What one :func:`sync` did, by note path (``memory/<file>``, ``wiki/<file>``)."""

    agent: str
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    marked: list[str] = field(default_factory=list)  # only ``status`` changed (expired since the last sync)
    removed: list[str] = field(default_factory=list)
    unchanged: int = 0
    #: notes not mirrored: unparseable files, refused content (a secret) -- path and the rule, never the text
    skipped: list[dict[str, str]] = field(default_factory=list)
    embedded: int = 0  # memories whose content was new to the store (the embedder ran for them)

    def to_dict(self) -> dict[str, Any]:
        return {
            "agent": self.agent, "added": self.added, "updated": self.updated, "marked": self.marked,
            "removed": self.removed, "unchanged": self.unchanged, "skipped": self.skipped, "embedded": self.embedded,
        }  # fmt: skip


def _files(agent: Agent) -> list[tuple[str, Path]]:
    """(unit_type, path) of every note and wiki page the vault itself would read (nothing outside the root)."""
    out: list[tuple[str, Path]] = []
    for unit_type in ("memory", "wiki"):
        out.extend((unit_type, p) for p in agent.unit_files(unit_type))
    return out


def _read_bytes(agent: Agent, path: Path, dfds: dict[str, int]) -> bytes:
    """A unit's bytes, opened relative to its folder without following a final symlink (then checked)."""
    folder = str(path.parent)
    if folder not in dfds:
        resolve_inside(agent.agents_root, folder, what="this folder")
        dfds[folder] = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        fd = os.open(path.name, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0), dir_fd=dfds[folder])
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        resolve_inside(agent.agents_root, path, what="this note")  # a symlink that stays inside the root
        fd = os.open(path, os.O_RDONLY)
    with os.fdopen(fd, "rb") as fh:
        return fh.read()


def _parse_unit(path: Path, unit_type: str, data: bytes) -> Note:
    return Note(path, unit_type, parse(decode(data, path=path), path=path))  # type: ignore[arg-type]


def _mirrored(store: MemoryStore, scope: Scope) -> list[Memory]:
    return store.scan(scope.as_filter(), {"source": SOURCE})


def sync(
    agent: Agent,
    store: MemoryStore,
    *,
    rebuild: bool = False,
    today: dt.date | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> SyncReport:
    """Bring the agent's mirror in line with its files; ``rebuild`` drops the mirror first.

    >>> report = sync(Vault("agents").agent("finance"), open_store())  # doctest: +SKIP
    >>> report.added, report.unchanged                                  # doctest: +SKIP
    (['memory/feedback_debt_order.md'], 0)
    """
    agent.require()
    # Under the agent's write lock: a vault write (whose hook mirrors it) cannot land between
    # this sync reading a file and writing its memory, so the mirror never goes back to old text.
    with agent.locked():
        return _sync(agent, store, rebuild=rebuild, today=today or dt.date.today(), progress=progress)


def _sync(agent: Agent, store: MemoryStore, *, rebuild: bool, today: dt.date,
          progress: Callable[[int, int], None] | None) -> SyncReport:
    scope = mirror_scope(agent)
    report = SyncReport(agent.name)
    stale = agent.path / MIRROR_STALE
    stale_before = _stat(stale)
    existing = _mirrored(store, scope)
    if rebuild:
        for mem in existing:
            store.forget(mem.id)
        existing = []
    by_path: dict[str, Memory] = {}
    for mem in existing:
        rel = mem.metadata.get("path")
        if not isinstance(rel, str) or rel in by_path:
            store.forget(mem.id)  # a duplicate (two writers raced) or a memory that names no note
            report.removed.append(str(rel))
            continue
        by_path[rel] = mem
    new: list[tuple[str, tuple[str, dict[str, Any]]]] = []
    dfds: dict[str, int] = {}
    try:
        for unit_type, path in _files(agent):
            rel = f"{unit_type}/{path.name}"
            try:
                data = _read_bytes(agent, path, dfds)
            except FileNotFoundError:
                continue  # removed while we looked: its memory goes below
            except UnsafePathError:
                report.skipped.append({"path": rel, "rule": "outside-root"})
                continue
            digest = _digest(data)
            found = by_path.get(rel)
            if found is not None and found.metadata.get("content_hash") == digest:
                del by_path[rel]
                status = status_of(found.metadata, today)
                if status != found.metadata.get("status"):
                    store.edit(found.id, metadata={**found.metadata, "status": status})
                    report.marked.append(rel)
                else:
                    report.unchanged += 1
                continue
            try:
                item = unit_memory(_parse_unit(path, unit_type, data), rel, digest, today)
            except FrontmatterParseError as exc:
                report.skipped.append({"path": rel, "rule": exc.rule or "unparseable"})
                continue  # an existing memory of it stays out: removed below as if the note were gone
            if found is not None:
                del by_path[rel]
                try:
                    if found.content != item[0]:
                        report.embedded += 1
                    store.edit(found.id, content=item[0], metadata=item[1])
                    report.updated.append(rel)
                except ValidationError as exc:
                    store.forget(found.id)  # the old text must not stand in for a note the store now refuses
                    report.skipped.append({"path": rel, "rule": exc.rule or "refused"})
                continue
            new.append((rel, item))
    finally:
        for fd in dfds.values():
            os.close(fd)
    _add(store, scope, new, report, progress)
    for rel, mem in sorted(by_path.items()):
        store.forget(mem.id)
        report.removed.append(rel)
    if stale_before is not None and _stat(stale) == stale_before:
        try:
            os.unlink(stale)  # repaired; a failure recorded while we ran is newer and stays
        except FileNotFoundError:
            pass
    return report


def _add(store: MemoryStore, scope: Scope, new: list[tuple[str, tuple[str, dict[str, Any]]]],
         report: SyncReport, progress: Callable[[int, int], None] | None) -> None:
    done = 0
    before = len(report.added)
    for start in range(0, len(new), _BATCH):
        chunk = new[start : start + _BATCH]
        try:
            store.remember_many([item for _, item in chunk], scope)
            report.added.extend(rel for rel, _ in chunk)
        except ValidationError:
            for rel, item in chunk:  # all-or-nothing batch: find the one the store refuses
                try:
                    store.remember(item[0], item[1], scope)
                    report.added.append(rel)
                except ValidationError as exc:
                    report.skipped.append({"path": rel, "rule": exc.rule or "refused"})
        done += len(chunk)
        if progress is not None:
            progress(done, len(new))
    report.embedded += len(report.added) - before


def _stat(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def check(agent: Agent, store: MemoryStore, *, today: dt.date | None = None) -> list[Issue]:
    """Lint warnings for every mirror entry that lags the files, by path: stale, missing, orphaned.

    The files are compared with the mirror the way :func:`sync` would (each
    file's digest against the ``content_hash`` stored under its path), from one
    scan of the mirror and one read of each file: nothing is parsed or embedded.
    Hand edits, deletions and additions made outside the API show up here; after
    ``vault sync`` the list is empty. An agent with no mirror at all (never
    synced) gives nothing: there is nothing to lag.

    >>> [i.rule for i in check(agent, store)]  # doctest: +SKIP
    ['mirror-stale', 'mirror-orphan']
    """
    today = today or dt.date.today()
    by_path: dict[str, list[Memory]] = {}
    for mem in _mirrored(store, mirror_scope(agent)):
        rel = mem.metadata.get("path")
        by_path.setdefault(rel if isinstance(rel, str) else "", []).append(mem)
    if not by_path:
        return []
    sync_cmd = f"run: atomic-agents vault sync {agent.name}"
    issues: list[Issue] = []
    dfds: dict[str, int] = {}
    try:
        for unit_type, path in _files(agent):
            rel = f"{unit_type}/{path.name}"
            where = f"{agent.name}/{rel}"
            try:
                data = _read_bytes(agent, path, dfds)
            except (FileNotFoundError, UnsafePathError):
                continue  # gone while we looked (its entry shows as orphaned), or reported by lint itself
            found = by_path.pop(rel, None)
            if not found:
                issues.append(Issue(where, "mirror", "mirror-missing",
                                    f"not in the memory mirror (added outside the vault API); {sync_cmd}", "warning"))
                continue
            if len(found) > 1:
                issues.append(Issue(where, "mirror", "mirror-duplicate",
                                    f"{len(found)} mirror entries for one note; {sync_cmd}", "warning"))
            md = found[0].metadata
            if md.get("content_hash") != _digest(data):
                issues.append(Issue(where, "mirror", "mirror-stale",
                                    f"the memory mirror holds an older version (edited outside the vault API); {sync_cmd}",
                                    "warning"))
            elif status_of(md, today) != md.get("status"):
                issues.append(Issue(where, "mirror", "mirror-stale",
                                    f"{status_of(md, today)} since the last sync, still {md.get('status')} in the mirror; "
                                    f"{sync_cmd}", "warning"))
    finally:
        for fd in dfds.values():
            os.close(fd)
    for rel in sorted(by_path):
        shown = f"{agent.name}/{rel}" if rel else None
        issues.append(Issue(shown, "mirror", "mirror-orphan",
                            f"{len(by_path[rel])} mirror entr{'y' if len(by_path[rel]) == 1 else 'ies'} for a note "
                            f"that is gone (deleted outside the vault API); {sync_cmd}", "warning"))
    return issues


class MirrorHook:
    """A vault write hook that mirrors each written note into ``store`` (see :mod:`atomic_agents.vault`).

    >>> vault = Vault("agents", write_hooks=[MirrorHook(store)])  # doctest: +SKIP
    >>> vault.agent("finance").new_note(draft)   # the note is recallable at once  # doctest: +SKIP
    """

    def __init__(self, store: MemoryStore, *, today: Callable[[], dt.date] = dt.date.today) -> None:
        self.store = store
        self._today = today

    def __call__(self, agent: Agent, unit_type: str, paths: list[Path]) -> None:
        scope = mirror_scope(agent)
        today = self._today()
        dfds: dict[str, int] = {}
        try:
            for path in paths:
                rel = f"{unit_type}/{path.name}"
                found = self.store.list_memories(scope, {"source": SOURCE, "path": rel}, limit=10)
                try:
                    data = _read_bytes(agent, path, dfds)
                except FileNotFoundError:
                    for mem in found:
                        self.store.forget(mem.id)
                    continue
                content, metadata = unit_memory(_parse_unit(path, unit_type, data), rel, _digest(data), today)
                if not found:
                    self.store.remember(content, metadata, scope)
                    continue
                self.store.edit(found[0].id, content=content, metadata=metadata)
                for extra in found[1:]:
                    self.store.forget(extra.id)
        finally:
            for fd in dfds.values():
                os.close(fd)


@dataclass(frozen=True)
class NoteHit:
    """One note found by :func:`search`: where it is, its title and hook, and the hybrid score in [0, 1]."""

    path: str
    name: str
    hook: str
    score: float
    type: str | None
    status: str
    memory_id: str

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "name": self.name, "hook": self.hook, "score": round(self.score, 4),
                "type": self.type, "status": self.status, "memory_id": self.memory_id}


def search(
    agent: Agent,
    store: MemoryStore,
    query: str,
    *,
    type: str | None = None,
    include_superseded: bool = False,
    limit: int = 10,
    today: dt.date | None = None,
) -> list[NoteHit]:
    """Hybrid search over the agent's mirrored notes; superseded and expired notes only if asked for.

    ``type`` is a note type, or ``wiki_page`` for wiki pages.

    >>> [h.path for h in search(agent, store, "debt order")]  # doctest: +SKIP
    ['memory/feedback_debt_order.md']
    """
    today = today or dt.date.today()
    filters: dict[str, Any] = {"source": SOURCE}
    if type is not None:
        filters["type"] = type
    if not include_superseded:
        filters["status"] = "live"
    # a note may have expired since the last sync: ask for a few more and check the date here too
    # (and, if that many expired, ask again for more: never fewer hits than there are live notes)
    want = min(limit + 10, 1000)
    while True:
        hits = store.search_hybrid(query, mirror_scope(agent), filters, want)
        out = []
        for h in hits:
            md = h.memory.metadata
            status = status_of(md, today)
            if not include_superseded and status != "live":
                continue
            out.append(NoteHit(str(md.get("path")), str(md.get("name") or ""), str(md.get("description") or ""),
                               h.score, md.get("type") if isinstance(md.get("type"), str) else None, status, h.memory.id))
        if len(out) >= limit or len(hits) < want or want >= 1000:
            break
        want = min(want * 4, 1000)
    out.sort(key=lambda n: (-n.score, n.path))
    return out[:limit]


def attach(agents: Iterable[Agent], store: MemoryStore) -> MirrorHook:
    """Give each agent a :class:`MirrorHook` over ``store`` (for agents made without a :class:`Vault`)."""
    hook = MirrorHook(store)
    for a in agents:
        a.write_hooks.append(hook)
    return hook


class LazyMirrorHook:
    """A :class:`MirrorHook` that opens its store only when a write lands, and closes it after.

    For one-shot callers (the CLI): a refused write never opens the store, and
    a store that cannot be opened fails the hook (so the vault marks the mirror
    stale), never the write.
    """

    def __init__(self, open_store: Callable[[], MemoryStore]) -> None:
        self._open = open_store

    def __call__(self, agent: Agent, unit_type: str, paths: list[Path]) -> None:
        store = self._open()
        try:
            MirrorHook(store)(agent, unit_type, paths)
        finally:
            store.close()
