"""One agent's folder: notes and wiki pages, written validated, atomic and indexed.

Every mutation runs under the agent's lock and follows one path
(:meth:`Agent._commit`): validate everything first (a refused write leaves the
vault exactly as it was), note an intent marker, write each file atomically,
update the INDEX in the same operation (spec check 6), fsync the folder once,
clear the marker. If a crash lands between the note and its INDEX line, the
marker tells the next writer (or ``validate``) which entries to roll forward.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import stat
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._io import (FileLock, atomic_write, atomic_write_many, make_dirs, read_nofollow, resolve_inside,
                  sweep_stale_temps, write_in_place)
from ..exceptions import ConflictError, FrontmatterParseError, NotFoundError, UnsafePathError, ValidationError
from ._cache import ParseCache, stamp_of
from .._format._frontmatter import Document, read, render_document
from ._names import check_agent_name, check_topic, safe_child
from ._units import Note, NoteDraft, UnitType, WikiDraft, order_meta
from ._upgrade import upgrade_for_write
from .._format._validate import Issue, raise_first_error, validate_note_meta, validate_wiki_meta

if TYPE_CHECKING:
    from ._index import Index

__all__ = ["MIRROR_STALE", "Agent", "WriteHook"]

_MARKER = ".index-pending.json"
#: ``<agent>/.mirror-stale``: a write hook failed, so a mirror of this agent lags its files (lint warns).
MIRROR_STALE = ".mirror-stale"
#: ``hook(agent, unit_type, paths)``: called after every committed write of notes or wiki pages,
#: still under the agent's lock. The vault knows nothing of what a hook does (the memory bridge
#: keeps its mirror current with one); a hook that raises never undoes or blocks the write.
WriteHook = Callable[["Agent", str, "list[Path]"], None]


@dataclass
class _Write:
    path: Path
    text: str
    doc: Document
    meta: dict[str, Any]
    old_title: str | None
    refresh_hook: bool
    is_new: bool = False
    links: dict[str, str] | None = None  # supersede fields this operation sets (rolled forward after a crash)


class Agent:
    """An agent folder under a vault root.

    >>> agent = Agent(Path("agents"), "finance")  # doctest: +SKIP
    >>> agent.new_note(NoteDraft(type="feedback", topic="debt_order", ...))  # doctest: +SKIP
    """

    def __init__(self, agents_root: str | os.PathLike[str], name: str, *, index_limit: int = 150,
                 write_hooks: Iterable[WriteHook] = ()) -> None:
        self.agents_root = Path(agents_root)
        self.write_hooks: list[WriteHook] = list(write_hooks)
        self.name = check_agent_name(name)
        self.path = self.agents_root / self.name
        self.memory_dir = self.path / "memory"
        self.wiki_dir = self.path / "wiki"
        self.journal_dir = self.path / "journal"
        self.log_dir = self.path / "log"
        self.persona_dir = self.path / "persona"
        self.raw_dir = self.path / "raw"
        self.index_limit = index_limit
        self._lock = FileLock(self.path / ".agent.lock", root=self.agents_root, timeout=120, what=f"agent {self.name!r}")
        # unit_type -> (index, stamp of INDEX.md + marker, stamp of each INDEX file when last seen)
        self._index_cache: dict[str, tuple[Index, tuple[Any, ...], dict[str, Any]]] = {}

    def __repr__(self) -> str:
        return f"Agent({str(self.agents_root)!r}, {self.name!r})"

    # ------------------------------------------------------------------ basics
    def exists(self) -> bool:
        return self.path.is_dir()

    def require(self) -> None:
        if not self.exists():
            raise NotFoundError(
                f"agent {self.name!r} does not exist under {self.agents_root} (run: atomic-agents vault init {self.name})",
                path=self.path,
            )

    @property
    def title(self) -> str:
        """Display name from IDENTITY.md's heading (``# IDENTITY — Name``), else the folder name."""
        ident = self.persona_dir / "IDENTITY.md"
        if not _inside(self.agents_root, ident):
            return self.name  # never copied into an INDEX header from outside the root
        with contextlib.suppress(OSError, ValueError):  # ValueError: not UTF-8; the folder name will do
            with open(ident, encoding="utf-8") as fh:
                first = fh.readline().strip()
            for sep in ("—", "–", " - "):
                if first.startswith("# IDENTITY") and sep in first:
                    return first.split(sep, 1)[1].strip() or self.name
        return self.name

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the agent's write lock (re-entrant within one object)."""
        self.require()
        with self._lock:
            yield

    def folder(self, unit_type: UnitType) -> Path:
        return self.memory_dir if unit_type == "memory" else self.wiki_dir

    # ----------------------------------------------------------------- reading
    def unit_files(self, unit_type: UnitType) -> list[Path]:
        """Note (or wiki page) files in filename order: ``*.md`` but INDEX files and dot-files."""
        folder = self.folder(unit_type)
        return [folder / n for n in self._unit_names(unit_type)]

    def _unit_names(
        self, unit_type: UnitType, outside: list[UnsafePathError] | None = None, links: set[str] | None = None
    ) -> list[str]:
        """Unit file names; a unit that resolves outside the agents root is never one (it goes to ``outside``).

        ``links`` gets every unit-like name that is a symlink, a unit or not (dangling, a loop, to a
        folder, out of the root): what it leads to can change without any change in this folder.
        """
        folder = self.folder(unit_type)
        try:
            with os.scandir(folder) as it:
                entries = [e for e in it if _unit_like(e.name)]
        except FileNotFoundError:
            return []
        except NotADirectoryError:  # a file (or a link to one) where the folder should be
            raise ValidationError(f"{folder.name}/ is not a folder", path=folder, field="folder", rule="folder") from None
        folder_inside = _inside(self.agents_root, folder)
        names = []
        for e in sorted(entries, key=lambda e: e.name):
            link = e.is_symlink()
            if link and links is not None:
                links.add(e.name)
            if (not folder_inside or link) and not _inside(self.agents_root, e.path):
                if outside is not None:
                    outside.append(_outside_error(self.agents_root, e.path, unit_type))
                continue
            try:
                unit = e.is_file()
            except OSError:  # a symlink loop (ELOOP), a name too long: nothing to read, not a unit
                unit = False
            if unit:
                names.append(e.name)
        return names

    def _unit_name(self, unit_type: UnitType, name: str) -> tuple[bool, bool]:
        """``(is a unit, is a symlink)`` for one name of the folder: the rule of :meth:`_unit_names`, for one entry."""
        if not _unit_like(name):
            return False, False
        path = os.path.join(self.folder(unit_type), name)
        try:
            link = stat.S_ISLNK(os.lstat(path).st_mode)
        except OSError:  # gone, a name too long: not an entry
            return False, False
        try:
            regular = stat.S_ISREG(os.stat(path).st_mode)
        except OSError:  # dangling, a symlink loop: not a unit (yet), still a symlink to look at again
            return False, link
        if (link or not _inside(self.agents_root, self.folder(unit_type))) and not _inside(self.agents_root, path):
            return False, link
        return regular, link

    def _read_unit(self, path: str | Path, unit_type: UnitType) -> Document:
        """Parse one unit, refusing one that resolves outside the agents root (never read, never indexed)."""
        if not _inside(self.agents_root, path):
            raise _outside_error(self.agents_root, path, unit_type)
        return read(path)

    def load(self, filename: str, unit_type: UnitType = "memory") -> Note:
        """Read one note (``unit_type="memory"``) or wiki page; raises NotFoundError / FrontmatterParseError."""
        path = safe_child(self.folder(unit_type), filename)
        if not path.is_file() and not path.is_symlink():
            raise NotFoundError(f"{path}: no such {'note' if unit_type == 'memory' else 'wiki page'}", path=path)
        doc = self._read_unit(path, unit_type)
        return Note(path, unit_type, doc)

    def get_note(self, filename: str) -> Note:
        return self.load(_md(filename), "memory")

    def get_wiki_page(self, filename: str) -> Note:
        return self.load(_md(filename), "wiki")

    def scan(
        self, unit_type: UnitType = "memory", *, cache: ParseCache | None = None
    ) -> tuple[list[Note], list[ValidationError]]:
        """Every unit that parses, and the parse errors of those that do not (never silently dropped).

        With a :class:`ParseCache`, unchanged files are not parsed again; their
        notes read the body only if it is asked for.
        """
        notes: list[Note] = []
        outside: list[UnsafePathError] = []
        errors: list[ValidationError] = []
        folder = str(self.folder(unit_type))
        if cache is not None:
            cache.scanning(unit_type)
        names = self._unit_names(unit_type, outside)
        errors.extend(outside)  # a note symlinked out of the root is an error naming it, never content
        for name in names:
            p = os.path.join(folder, name)
            try:
                if cache is None:
                    notes.append(Note(p, unit_type, read(p)))
                    continue
                rel = f"{unit_type}/{name}"
                stamp = stamp_of(os.stat(p))
                meta = cache.get(rel, stamp, p)
                if meta is not None:
                    notes.append(Note(p, unit_type, Document(meta=meta, body="", lazy=True)))
                    continue
                doc = read(p)
                cache.put(rel, stamp, doc.meta, p)
                notes.append(Note(p, unit_type, doc))
            except FrontmatterParseError as exc:
                errors.append(exc)
            except FileNotFoundError:
                continue  # removed while we looked: not a unit any more
            except OSError as exc:  # chmod 000, an I/O error: named, skipped like a unit that does not parse
                errors.append(ValidationError(f"cannot be read: {exc.strerror or exc}", path=p, field="file",
                                              rule="readable"))
        return notes, errors

    def parse_cache(self) -> ParseCache:
        return ParseCache(self.agents_root, self.name)

    def list_notes(
        self,
        *,
        include_superseded: bool = False,
        type: str | None = None,
        pinned: bool | None = None,
        unit_type: UnitType = "memory",
    ) -> list[Note]:
        """Notes in filename order; superseded ones are skipped unless asked for."""
        return self.list_units(include_superseded=include_superseded, type=type, pinned=pinned, unit_type=unit_type)[0]

    def pinned_notes(self, unit_type: UnitType = "memory") -> list[Note]:
        """``list_notes(pinned=True, unit_type=...)`` without parsing every note (a stat per file; see :mod:`._pinned`)."""
        from ._pinned import pinned_notes  # noqa: PLC0415 - only context assembly needs it

        return pinned_notes(self, unit_type)

    def list_units(
        self,
        *,
        include_superseded: bool = False,
        type: str | None = None,
        pinned: bool | None = None,
        unit_type: UnitType = "memory",
    ) -> tuple[list[Note], list[ValidationError]]:
        """:meth:`list_notes` plus the files that do not parse (or lead out of the root): one scan, through the parse cache."""
        cache = self.parse_cache()
        notes, errors = self.scan(unit_type, cache=cache)
        cache.save()
        kept = [
            n
            for n in notes
            if (include_superseded or n.superseded_by is None)
            and (type is None or n.type == type)
            and (pinned is None or n.pinned == pinned)
        ]
        return kept, errors

    # ----------------------------------------------------------------- writing
    def new_note(self, draft: NoteDraft, *, today: dt.date | None = None) -> Note:
        """Create one note (and its INDEX entry). Refuses if the file exists."""
        return self.create_notes([draft], today=today)[0]

    def create_notes(self, drafts: Iterable[NoteDraft], *, today: dt.date | None = None) -> list[Note]:
        """Create many notes with one INDEX update (the batch API)."""
        return self._create(list(drafts), "memory", today or dt.date.today())

    def new_wiki_page(self, draft: WikiDraft, *, today: dt.date | None = None) -> Note:
        return self._create([draft], "wiki", today or dt.date.today())[0]

    def _create(self, drafts: list[Any], unit_type: UnitType, today: dt.date) -> list[Note]:
        with self.locked():
            folder = self.folder(unit_type)
            make_dirs(folder, root=self.agents_root)
            writes: list[_Write] = []
            seen: set[str] = set()
            supersede_old: list[tuple[str, str]] = []
            for d in drafts:
                check_topic(d.topic)
                path = safe_child(folder, d.filename)
                if path.exists() or d.filename in seen:
                    raise ConflictError(f"{path}: already exists (update it, or supersede it with a new topic)", path=path)
                seen.add(d.filename)
                meta = d.meta(today)
                w = self._prepare(path, unit_type, Document(meta={}, body=""), meta, d.body, None, True)
                w.is_new = True
                writes.append(w)
                if unit_type == "memory" and isinstance(d, NoteDraft) and d.supersedes:
                    supersede_old.append((d.supersedes, d.filename))
            for old_name, new_name in supersede_old:
                writes.append(self._prepare_supersede_old(old_name, new_name, today))  # renamed after the new notes
            self._commit(unit_type, writes, today)
            return [Note(w.path, unit_type, w.doc) for w in writes[: len(drafts)]]

    def update(
        self,
        filename: str,
        changes: dict[str, Any] | None = None,
        *,
        body: str | None = None,
        unit_type: UnitType = "memory",
        today: dt.date | None = None,
    ) -> Note:
        """Change frontmatter keys (``None`` removes an optional key) and/or the body.

        Keys not named keep their exact lines; the body is kept byte-for-byte
        unless given. An old-schema file is upgraded in place first.
        """
        today = today or dt.date.today()
        with self.locked():
            note = self.load(_md(filename), unit_type)
            meta = upgrade_for_write(self.agents_root, note.meta, unit_type=unit_type, path=note.path)
            for key, value in (changes or {}).items():
                if value is None and key not in ("expires_at", "supersedes", "superseded_by"):
                    meta.pop(key, None)
                else:
                    meta[key] = value
            refresh = meta.get("description") != note.meta.get("description") or (
                meta.get("superseded_by") != note.meta.get("superseded_by")
            )
            w = self._prepare(note.path, unit_type, note.doc, meta, body, note.name, refresh)
            self._commit(unit_type, [w], today)
            return Note(note.path, unit_type, w.doc)

    def update_note(self, filename: str, changes: dict[str, Any] | None = None, *, body: str | None = None,
                    today: dt.date | None = None) -> Note:
        return self.update(filename, changes, body=body, unit_type="memory", today=today)

    def touch(self, filename: str, *, today: dt.date | None = None) -> Note:
        """Mark a note as re-confirmed: ``last_seen`` = today (spec: staleness)."""
        today = today or dt.date.today()
        return self.update(filename, {"last_seen": today}, today=today)

    def supersede(self, old: str, new: str, *, today: dt.date | None = None) -> tuple[Note, Note]:
        """Link ``new`` as the replacement of ``old`` (both files stay; old goes to the Archive)."""
        today = today or dt.date.today()
        old, new = _md(old), _md(new)
        if old == new:
            raise ValidationError("a note cannot supersede itself", path=old, field="supersedes", rule="supersede")
        with self.locked():
            new_note = self.get_note(new)
            if new_note.supersedes not in (None, old):
                raise ConflictError(f"{new}: already supersedes {new_note.supersedes}", path=new_note.path)
            w_old = self._prepare_supersede_old(old, new, today)
            meta = upgrade_for_write(self.agents_root, new_note.meta, unit_type="memory", path=new_note.path)
            meta["supersedes"] = old
            w_new = self._prepare(new_note.path, "memory", new_note.doc, meta, None, new_note.name, False)
            w_new.links = {"supersedes": old}
            self._commit("memory", [w_old, w_new], today)
            return (
                Note(w_old.path, "memory", w_old.doc),
                Note(w_new.path, "memory", w_new.doc),
            )

    def _prepare_supersede_old(self, old: str, new: str, today: dt.date) -> _Write:
        note = self.get_note(old)
        if note.superseded_by not in (None, new):
            raise ConflictError(f"{old}: already superseded by {note.superseded_by}", path=note.path)
        meta = upgrade_for_write(self.agents_root, note.meta, unit_type="memory", path=note.path)
        meta["superseded_by"] = new
        w = self._prepare(note.path, "memory", note.doc, meta, None, note.name, True)
        w.links = {"superseded_by": new}
        return w

    def _prepare(
        self,
        path: Path,
        unit_type: UnitType,
        doc: Document,
        meta: dict[str, Any],
        body: str | None,
        old_title: str | None,
        refresh_hook: bool,
    ) -> _Write:
        if not doc.has_frontmatter:
            meta = order_meta(meta)
        validator = validate_note_meta if unit_type == "memory" else validate_wiki_meta
        raise_first_error(validator(meta, filename=path.name, path=path))
        text, new_doc = render_document(doc, meta, body if body is not None else doc.body)
        new_doc.path = path
        return _Write(path, text, new_doc, meta, old_title, refresh_hook)

    # ------------------------------------------------------------------- INDEX
    def index(self, unit_type: UnitType = "memory") -> Index:
        """The agent's INDEX as on disk now (a fresh object the caller may change)."""
        from ._index import ARCHIVE, Index  # the INDEX module loads with the first INDEX read or write

        kind, order = ("Memory", None) if unit_type == "memory" else ("Wiki", ["Pages", ARCHIVE])
        return Index.load(self.folder(unit_type), agent_title=self.title, limit=self.index_limit, kind=kind, order=order)

    def _cached_index(self, unit_type: UnitType, key: tuple[Any, ...]) -> tuple[Index, dict[str, Any] | None]:
        """The INDEX for a write, reusing the one this object last wrote if nothing changed since.

        Parsing a 10,000-entry INDEX costs far more than a note write; a writer
        that writes again (a long-running agent, the batch API) skips it. Every
        INDEX change by this package rewrites the intent marker in place, and
        an atomic replace of INDEX.md makes a new inode, so two stats tell if
        another writer came by. Before writing, :meth:`_commit` also checks
        each file it is about to replace (a hand edit of a sub-index part is
        never overwritten). Returns the index and its per-file stamps (None
        when freshly loaded). Call under the lock.
        """
        cached = self._index_cache.pop(unit_type, None)
        if cached is not None and cached[1] == key:
            return cached[0], cached[2]
        return self.index(unit_type), None

    def _entry_for(self, meta: dict[str, Any], filename: str, unit_type: UnitType, today: dt.date) -> tuple[str, str, str]:
        from ._index import ARCHIVE, PROMOTED, is_persona_ref, section_for

        sup = meta.get("superseded_by")
        name = meta.get("name")
        title = name if isinstance(name, str) and name else filename
        if isinstance(sup, str) and sup:
            if unit_type == "memory" and is_persona_ref(sup):
                return title, f"promoted {today.isoformat()} from {filename}", PROMOTED
            return title, f"superseded by {sup}, {today.isoformat()}", ARCHIVE
        section = section_for(meta.get("type"), False) if unit_type == "memory" else "Pages"
        return title, str(meta.get("description") or ""), section

    def _commit(self, unit_type: UnitType, writes: list[_Write], today: dt.date) -> None:
        folder = self.folder(unit_type)
        key = _key_stamp(folder)
        if key[1] is not None and key[1][1] > 0:  # the intent record is not empty: a writer died
            self._recover(unit_type, today)
            key = _key_stamp(folder)
        idx, stamps = self._cached_index(unit_type, key)
        index_files = self._apply(idx, unit_type, writes, today)
        if stamps is not None and any(_file_stamp(folder / n) != stamps.get(n) for n in index_files):
            # a file we would replace changed since we cached it: start again from disk
            idx, stamps = self.index(unit_type), None
            index_files = self._apply(idx, unit_type, writes, today)
        if index_files or any(w.links for w in writes):
            _set_marker(self.agents_root, folder, _intent(writes))
        # notes first, then the INDEX; all fsynced together before the first rename
        atomic_write_many([(w.path, w.text) for w in writes] + [(folder / n, t) for n, t in index_files.items()],
                          root=self.agents_root)
        if index_files or any(w.links for w in writes):
            _set_marker(self.agents_root, folder, b"")
        idx.mark_saved(index_files)
        if stamps is None:
            stamps = {n: _file_stamp(folder / n) for n in idx.files()}
        else:
            stamps.update((n, _file_stamp(folder / n)) for n in index_files)
        self._index_cache[unit_type] = (idx, _key_stamp(folder), stamps)
        self._notify(unit_type, [w.path for w in writes])

    def _notify(self, unit_type: UnitType, paths: list[Path]) -> None:
        """Run the write hooks; a failing hook leaves the write done and marks the mirror stale."""
        for hook in self.write_hooks:
            try:
                hook(self, unit_type, paths)
            except Exception as exc:  # noqa: BLE001 - any failure of a hook must not lose the vault write
                record = {"hook": getattr(hook, "__qualname__", type(hook).__name__), "error": type(exc).__name__,
                          "files": [f"{unit_type}/{p.name}" for p in paths]}
                # Only the error's class is kept: its text might quote note content (a refused secret).
                with contextlib.suppress(OSError):
                    atomic_write(self.path / MIRROR_STALE, json.dumps(record) + "\n", root=self.agents_root)

    # ------------------------------------------------------------------ context
    def context(self, *args: Any, **kwargs: Any) -> Any:
        """The system prompt this agent runs with: :func:`atomic_agents.bridge.context` for this agent.

        The vault imports no part above it: context assembly (in the bridge,
        above the vault and the memory store) is wired to the ``agent.context``
        extension point by the package root and resolved on first call, so
        ``import atomic_agents.vault`` stays light.

        >>> ctx = agent.context(query="debt order", budget=2000)  # doctest: +SKIP
        >>> print(ctx.text)                                        # doctest: +SKIP
        """
        from .._extensions import resolve  # noqa: PLC0415

        return resolve("agent.context")(self, *args, **kwargs)

    def _apply(self, idx: Index, unit_type: UnitType, writes: list[_Write], today: dt.date) -> dict[str, str]:
        for w in writes:
            title, hook, section = self._entry_for(w.meta, w.path.name, unit_type, today)
            idx.upsert(w.path.name, title=title, hook=hook, section=section, old_title=w.old_title,
                       refresh_hook=w.refresh_hook, is_new=w.is_new)
        return idx.changed_files()

    def _recover(self, unit_type: UnitType, today: dt.date) -> bool:
        """Roll an interrupted write forward after a crash between its renames.

        The intent record lists every file of the operation with a digest of
        the text it was to get. A file whose bytes match has landed. If some
        landed and others did not, the operation is completed: the supersede
        link a missing file was to get is set on it (both sides of a link are
        always written together). Then each entry is put in the INDEX, with
        the new hook for files that landed with a changed description.
        """
        folder = self.folder(unit_type)
        try:
            raw = read_nofollow(folder / _MARKER, root=self.agents_root)
        except FileNotFoundError:
            return False
        if not raw:
            return False  # nothing pending
        items: list[dict[str, Any]]
        try:
            pending = json.loads(raw)
            items = [p for p in pending if isinstance(p, dict) and isinstance(p["file"], str)]
            if len(items) != len(pending):
                raise TypeError
        except (ValueError, KeyError, TypeError):
            items = [{"file": p.name} for p in self.unit_files(unit_type)]  # torn record: reconcile every entry
        landed = [_landed(folder / str(p["file"]), p.get("digest")) for p in items]
        if any(landed):
            for k, p in enumerate(items):
                if not landed[k] and isinstance(p.get("set"), dict) and self._roll_forward_links(folder / p["file"], p["set"]):
                    landed[k] = True
        idx = self.index(unit_type)
        for p, done in zip(items, landed):
            filename, old_title = str(p["file"]), p.get("old_title")
            path = folder / filename
            try:
                doc = self._read_unit(path, unit_type)
            except (FileNotFoundError, FrontmatterParseError, UnsafePathError):
                if not path.exists() and not path.is_symlink():
                    idx.remove(filename, old_title)
                continue
            title, hook, section = self._entry_for(doc.meta, filename, unit_type, today)
            idx.upsert(filename, title=title, hook=hook, section=section, old_title=old_title,
                       refresh_hook=bool(done and p.get("refresh")))
        atomic_write_many([(folder / n, t) for n, t in idx.changed_files().items()], root=self.agents_root)
        _set_marker(self.agents_root, folder, b"")
        return True

    def _roll_forward_links(self, path: Path, links: dict[str, Any]) -> bool:
        """Set the supersede fields an interrupted operation did not get to write; True if the file now has them."""
        try:
            note = Note(path, "memory", self._read_unit(path, "memory"))
        except (FileNotFoundError, FrontmatterParseError, UnsafePathError):
            return False
        meta = dict(note.meta)
        todo = {k: v for k, v in links.items() if k in ("supersedes", "superseded_by") and isinstance(v, str)}
        if all(meta.get(k) == v for k, v in todo.items()):
            return True
        if any(meta.get(k) not in (None, "", v) for k, v in todo.items()):
            return False  # changed by hand since: leave it to lint
        meta.update(todo)
        try:
            meta = upgrade_for_write(self.agents_root, meta, unit_type="memory", path=path)
            w = self._prepare(path, "memory", note.doc, meta, None, note.name, True)
        except ValidationError:
            return False  # lint reports the one-sided link
        atomic_write(path, w.text, root=self.agents_root)
        return True

    def rebuild_index(self, unit_type: UnitType = "memory", *, today: dt.date | None = None) -> dict[str, Any]:
        """Bring the INDEX in line with the files, keeping what the operator wrote.

        Hand-written sections, their order and lines, the preamble, hooks and
        positions of existing entries, and every line under Recently Promoted
        to Persona are kept (see :meth:`Index.reconcile`). A unit that cannot
        be parsed keeps its line and is reported under ``unreadable``;
        ``entries`` counts the INDEX entries of units, ``units`` the files.
        """
        today = today or dt.date.today()
        with self.locked():
            self._recover(unit_type, today)
            idx = self.index(unit_type)
            cache = self.parse_cache()
            notes, errors = self.scan(unit_type, cache=cache)
            cache.save()
            if not idx.loaded:
                idx.preamble = [f"# {self.title} — {idx.kind} Index", ""]
            notes.sort(key=lambda n: (str(n.captured or ""), n.filename))
            from ._index import Wanted

            wanted = [Wanted(n.filename, *self._entry_for(n.meta, n.filename, unit_type, today)) for n in notes]
            from ._lint import guess_titles  # lint's module loads only where a check runs

            unreadable = {os.path.basename(e.path): ({os.path.basename(e.path)} if isinstance(e, UnsafePathError)
                                                     else guess_titles(e.path)) for e in errors if e.path}
            report = idx.reconcile(wanted, unreadable)
            files = idx.changed_files()
            folder = self.folder(unit_type)
            atomic_write_many([(folder / n, t) for n, t in files.items()], root=self.agents_root)
            _set_marker(self.agents_root, folder, b"")  # tells other writers' caches the INDEX changed
            entries = len(wanted) + len(set(report["kept_unreadable"]))
            return {
                "entries": entries,
                "units": len(notes) + len(errors),
                "files_written": sorted(files),
                "unreadable": [str(e) for e in errors],
                **{k: v for k, v in report.items() if v},
            }

    # ---------------------------------------------------------------- validate
    def validate(self, *, today: dt.date | None = None) -> list[Issue]:
        """Errors of every note and wiki page (spec checks 1-6), after any crash roll-forward."""
        if self.exists() and self._needs_repair():
            # Only a crashed writer's leftovers need the write lock; reading takes none, so a
            # read-only vault validates. If the lock cannot be had there, report what is seen.
            with contextlib.suppress(OSError):
                with self.locked():
                    unit_type: UnitType
                    for unit_type in ("memory", "wiki"):
                        self._recover(unit_type, today or dt.date.today())
                        sweep_stale_temps(self.folder(unit_type), root=self.agents_root)
        from ._lint import check_units

        return [i for i in check_units(self, strict_index=True) if i.severity == "error"]


    def _needs_repair(self) -> bool:
        """A non-empty intent record or a temp file left in memory/ or wiki/ (a writer died)."""
        for folder in (self.memory_dir, self.wiki_dir):
            try:
                with os.scandir(folder) as it:
                    for e in it:
                        if e.name == _MARKER and e.stat(follow_symlinks=False).st_size > 0:
                            return True
                        if e.name.startswith(".") and e.name.endswith(".tmp"):
                            return True
            except (FileNotFoundError, NotADirectoryError):
                continue
        return False


def _set_marker(root: Path, folder: Path, payload: bytes) -> None:
    """Overwrite the intent marker in place (empty = nothing pending).

    One ``pwrite`` to a file that stays put: no create, unlink or fsync, so the
    marker costs microseconds. It guards against a writer process dying
    between its note and its INDEX (the page cache survives that). After a
    power loss it may be stale; the worst case then is an INDEX line that lags
    its note, which lint reports and ``index rebuild`` repairs.
    """
    write_in_place(folder / _MARKER, payload, root=root)  # O_NOFOLLOW: a symlinked marker is refused


def _unit_like(name: str) -> bool:
    return name.endswith(".md") and not name.startswith((".", "INDEX"))


def _inside(root: Path, path: str | Path) -> bool:
    try:
        resolve_inside(root, path)
    except UnsafePathError:
        return False
    return True


def _outside_error(root: Path, path: str | Path, unit_type: str) -> UnsafePathError:
    real = os.path.realpath(path)
    what = "note" if unit_type == "memory" else "wiki page"
    return UnsafePathError(
        f"this {what} resolves to {real}, outside the agents root; it is never read, listed or indexed",
        path=path, resolved=real, rule="outside-root",
    )


def _digest(data: bytes) -> str:
    import hashlib  # writes only: a read-only command never loads it (nor OpenSSL)

    return hashlib.blake2b(data, digest_size=16).hexdigest()


def _intent(writes: list[_Write]) -> bytes:
    """The intent record of one operation: per file, the digest of its new text and what to roll forward."""
    rows = []
    for w in writes:
        row: dict[str, Any] = {"file": w.path.name, "old_title": w.old_title, "refresh": w.refresh_hook,
                               "digest": _digest(w.text.encode("utf-8"))}
        if w.links:
            row["set"] = w.links
        rows.append(row)
    return json.dumps(rows).encode("utf-8")


def _landed(path: Path, digest: Any) -> bool:
    """Does ``path`` hold the text the intent record was written for? (unknown digest: no)"""
    if not isinstance(digest, str):
        return False
    try:
        return _digest(path.read_bytes()) == digest
    except OSError:
        return False


def _file_stamp(path: Path) -> tuple[int, int, int, int] | None:
    """What tells a file changed: an atomic replace makes a new inode, an in-place edit sets the ctime."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _key_stamp(folder: Path) -> tuple[Any, ...]:
    return (_file_stamp(folder / "INDEX.md"), _file_stamp(folder / _MARKER))


def _md(filename: str) -> str:
    return filename if filename.endswith(".md") else filename + ".md"
