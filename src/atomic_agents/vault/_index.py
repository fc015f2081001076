"""INDEX.md: the agent's sectioned, hand-editable view of its memory.

The index is read as lines, and only the line of the entry being written
changes: headings, hand-written notes and hand-shortened hooks elsewhere are
kept verbatim. Past ``limit`` lines, the biggest sections move to
``INDEX_<slice>.md`` sub-indexes, each leaving one pointer line in INDEX.md.

Entries are read in the spec's form (``- `Title` — hook``) and in the
reference implementation's link form (``- [Title](file.md) — hook``).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from .._format._vocab import INDEX_SECTIONS
from .._format._validate import title_problem
from .._text import read_text

__all__ = [
    "ARCHIVE", "PROMOTED", "Entry", "Index", "Wanted", "is_persona_ref", "norm_title", "parse_entry",
    "section_for", "title_problem",
]

ARCHIVE = "Archive (superseded)"
PROMOTED = "Recently Promoted to Persona"
SECTION_OF_TYPE = {t: s for s, t in INDEX_SECTIONS if t}
SLICE_OF_SECTION = {
    "Critical Feedback": "feedback",
    "Locked Decisions": "decisions",
    "User Profile": "user",
    "Active Projects": "projects",
    "Reference": "reference",
    PROMOTED: "promoted",
    ARCHIVE: "archive",
}
SECTION_ORDER = [s for s, _ in INDEX_SECTIONS]
DEFAULT_LIMIT = 150  # spec: "Stay under ~150 lines total before splitting into sub-indexes"

# between an entry's head and its hook: a dash (the spec's ``—``); after a link also the
# reference implementation's ``, promoted to ...`` and ``: hook`` forms
_SEP = r"\s+(?:—|–|--|-)\s*"
_LINK_SEP = r"(?:\s+(?:—|–|--|-)\s*|\s*[,:;]\s*)"
# a code span as CommonMark reads it: a run of N backticks, the title, a run of exactly N
_TICK = re.compile(r"^\s*[-*]\s+(?P<ticks>`+)(?!`)(?P<title>.+?)(?<!`)(?P=ticks)(?!`)(?:" + _SEP + r"(?P<hook>.*))?$")
# link text with ``\[``, ``\]`` and ``\\`` escaped
_LINK_TEXT = r"(?:[^\]\\]|\\.)+"
_LINK = re.compile(r"^\s*[-*]\s+\[(?P<title>" + _LINK_TEXT + r")\]\((?P<file>[^)\s]+)\)(?:" + _LINK_SEP + r"(?P<hook>.*))?$")
_UNESCAPE = re.compile(r"\\([\[\]\\])")
_WIKILINK = re.compile(r"^\s*[-*]\s+\[\[(?P<file>[^\]|]+)(?:\|(?P<title>[^\]]+))?\]\](?:" + _LINK_SEP + r"(?P<hook>.*))?$")
_SUBINDEX = re.compile(r"^INDEX_[a-z0-9_]+\.md$")


def norm_title(title: str) -> str:
    """A title as an INDEX line holds it: words joined by single spaces (what :func:`format_entry` writes)."""
    return " ".join(title.split())


_PERSONA_FILE = re.compile(r"^(?:persona/)?(?:[A-Z][A-Z0-9_]*)\.md$")


def is_persona_ref(target: str) -> bool:
    """True for a persona file or section (``persona/USER.md#prefs``, ``SOUL.md``): a promotion, not a note.

    >>> is_persona_ref("persona/USER.md#communication"), is_persona_ref("feedback_x.md")
    (True, False)
    """
    path = target.split("#", 1)[0].strip().removeprefix("./")
    if path.startswith("INDEX"):
        return False
    return bool(_PERSONA_FILE.match(path)) or path.startswith("persona/")


_FROM_FILE = re.compile(r"\bfrom\s+\[?`?(?P<file>[A-Za-z0-9_.\-]+\.md)")


@dataclass(frozen=True)
class Wanted:
    """The entry a unit should have: what a rebuild reconciles the INDEX against."""

    filename: str
    title: str
    hook: str
    section: str


@dataclass(frozen=True)
class Entry:
    """One parsed index line."""

    title: str
    hook: str
    filename: str | None = None  # only the link forms carry it
    target: str | None = field(default=None, repr=False, compare=False)  # the link as written, without #anchor

    @property
    def points_elsewhere(self) -> bool:
        """A link into another folder (``../raw/x.pdf``, ``persona/USER.md``): the operator's pointer, not a unit's entry."""
        return self.target is not None and "/" in self.target.removeprefix("./")

    @property
    def is_pointer(self) -> bool:
        return self.filename is not None and bool(_SUBINDEX.match(self.filename))

    @property
    def source(self) -> str | None:
        """The note file a "Recently Promoted to Persona" line names (``promoted ... from feedback_x.md``)."""
        m = _FROM_FILE.search(self.hook)
        return os.path.basename(m.group("file")) if m else None


def parse_entry(line: str) -> Entry | None:
    """Parse an index line, or ``None`` if it is not an entry.

    >>> parse_entry("- `Debt order` — when paying debts")
    Entry(title='Debt order', hook='when paying debts', filename=None)
    >>> parse_entry("- [Debt order](feedback_debt.md) — when paying debts").filename
    'feedback_debt.md'
    """
    if not line.lstrip().startswith(("-", "*")):
        return None
    m = _TICK.match(line)
    if m:
        return Entry(m.group("title").strip(), (m.group("hook") or "").strip())
    m = _LINK.match(line)
    if m:
        target = m.group("file").split("#", 1)[0]
        return Entry(_UNESCAPE.sub(r"\1", m.group("title")).strip(), (m.group("hook") or "").strip(), os.path.basename(target),
                     target=target)
    m = _WIKILINK.match(line)
    if m:
        target = m.group("file").strip()
        fname = target if target.endswith(".md") else target + ".md"
        return Entry((m.group("title") or target).strip(), (m.group("hook") or "").strip(), os.path.basename(fname))
    return None


def format_entry(title: str, hook: str, filename: str | None = None) -> str:
    """An entry in the spec's form ``- `Title` — hook``, or the link form when a filename is given.

    Any title round-trips through :func:`parse_entry` up to whitespace (see
    :func:`title_problem` for the characters a write refuses): a title with
    backticks is a longer code span (CommonMark), link text escapes brackets.

    >>> format_entry("Run `make test` first", "before a release")
    '- ``Run `make test` first`` — before a release'
    >>> parse_entry(format_entry("Run `make test` first", "h")).title
    'Run `make test` first'
    """
    hook = " ".join(hook.split())
    title = norm_title(title)
    if filename is not None:
        text = title.replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]")
        head = f"- [{text}]({filename})"
    else:
        runs = [len(r) for r in re.findall("`+", title)]
        ticks = "`" * (max(runs) + 1 if runs else 1)
        pad = " " if title.startswith("`") or title.endswith("`") else ""
        head = f"- {ticks}{pad}{title}{pad}{ticks}"
    return f"{head} — {hook}" if hook else head


def section_for(note_type: str | None, superseded: bool) -> str:
    """Which section a note belongs in."""
    if superseded:
        return ARCHIVE
    return SECTION_OF_TYPE.get(note_type or "", "Reference")


@dataclass(eq=False)
class _Section:
    heading: str
    lines: list[str] = field(default_factory=list)  # body lines (entries, hand notes, blanks)
    external: str | None = None  # INDEX_<slice>.md holding the entries, if split
    parts: list[str] = field(default_factory=list)  # sub-index files on disk (INDEX_<slice>[_N].md)
    planned: list[str] = field(default_factory=list)  # sub-index files of the last render
    dirty: bool = False  # changed since load: its file must be re-rendered
    dirty_from: int = 0  # first line index changed (parts before it are unchanged)

    def touch(self, i: int) -> None:
        self.dirty_from = min(self.dirty_from, i) if self.dirty else i
        self.dirty = True


_ANY_TITLE = re.compile(r"^\s*[-*]\s+(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.M)
_ANY_LINK = re.compile(r"^\s*[-*]\s+\[" + _LINK_TEXT + r"\]\(([^)\s]+)\)", re.M)
_ANY_WIKILINK = re.compile(r"^\s*[-*]\s+\[\[([^\]|]+)", re.M)


class Index:
    """The INDEX of one agent's ``memory/`` folder (INDEX.md plus any sub-indexes).

    Load, change entries, write :meth:`changed_files`; only files holding a
    changed section are rendered, and only those whose text changed are written.
    """

    def __init__(self, folder: Path, *, title: str = "Memory", limit: int = DEFAULT_LIMIT,
                 kind: str = "Memory", order: list[str] | None = None) -> None:
        self.folder = folder
        self.kind = kind
        self.order = order if order is not None else SECTION_ORDER
        self.limit = limit
        self.preamble: list[str] = []
        self.sections: list[_Section] = []
        self.loaded: dict[str, str] = {}  # filename -> text as read
        self._title = title
        self._titles: set[str] | None = None  # bare titles listed (for new-note checks)
        self._files: set[str] | None = None  # filenames listed in the link forms

    # ---------------------------------------------------------------- loading
    @classmethod
    def load(cls, folder: Path, *, agent_title: str, limit: int = DEFAULT_LIMIT, kind: str = "Memory",
             order: list[str] | None = None) -> Index:
        idx = cls(folder, title=agent_title, limit=limit, kind=kind, order=order)
        main = folder / "INDEX.md"
        if not main.exists():
            idx.preamble = [f"# {agent_title} — {kind} Index", ""]
            idx.sections = [_Section(h, [""], dirty=True) for h in idx.order]
            return idx
        text = read_text(main, universal_newlines=True)
        idx.loaded["INDEX.md"] = text
        idx.preamble, idx.sections = _split_sections(text)
        for sec in idx.sections:
            pointers: list[str] = []
            own: list[str] = []
            for line in sec.lines:
                e = parse_entry(line) if "](INDEX_" in line else None
                if e is not None and e.is_pointer and (folder / e.filename).exists():  # type: ignore[operator]
                    pointers.append(e.filename)  # type: ignore[arg-type]
                else:
                    own.append(line)
            if not pointers:
                continue
            body: list[str] = []
            for name in pointers:
                sub_text = read_text(folder / name, universal_newlines=True)
                idx.loaded[name] = sub_text
                for s in _split_sections(sub_text)[1]:
                    body.extend(_trim(s.lines))
            sec.lines = own + body
            sec.external = pointers[0]
            sec.parts = pointers
        return idx

    def files(self) -> list[str]:
        """INDEX.md and the sub-index files this index is made of."""
        return ["INDEX.md", *(p for s in self.sections for p in s.parts)]

    # ---------------------------------------------------------------- queries
    def entries(self) -> list[tuple[str, Entry]]:
        """Every (section, entry), pointers excluded."""
        out = []
        for sec in self.sections:
            for line in sec.lines:
                e = parse_entry(line)
                if e is not None and not e.is_pointer:
                    out.append((sec.heading, e))
        return out

    def find(self, filename: str, title: str | None) -> tuple[_Section, int] | None:
        """Locate the entry of a note: by link filename first (or the note a promoted line names), else by bare title."""
        stem = filename[:-3] if filename.endswith(".md") else filename
        want = norm_title(title) if title else None
        # a bare title is a code span: `title`, or padded (`` `title` ``) when it starts or ends with a backtick
        needles = [filename, f"[[{stem}"] + ([f"`{want}`", f" {want} `"] if want else [])
        by_title = None
        for sec in self.sections:
            for i, line in enumerate(sec.lines):
                # cheap substring test first: parsing every line of a 10,000-entry index is the slow part
                if not any(n in line for n in needles):
                    continue
                e = parse_entry(line)
                if e is None or e.is_pointer:
                    continue
                if e.filename == filename or (sec.heading == PROMOTED and e.filename is None and e.source == filename):
                    return sec, i
                # a link-form entry belongs to the file it links; only bare titles match by title
                if by_title is None and e.filename is None and (e.title == filename or norm_title(e.title) == want):
                    by_title = (sec, i)
        return by_title

    def placement_ok(self, heading: str, section: str) -> bool:
        """May an entry that belongs in ``section`` stay under ``heading``?

        Yes in its own section and in any hand-written section (one the spec's
        order does not name), unless it must be in the Archive (superseded) or
        under Recently Promoted to Persona. An entry under Recently Promoted to
        Persona is the operator's record and always stays.
        """
        if heading == section or heading == PROMOTED:
            return True
        return section not in (ARCHIVE, PROMOTED) and heading not in self.order

    def _known(self) -> tuple[set[str], set[str]]:
        """Bare titles and linked filenames listed anywhere (built once, kept in step)."""
        if self._titles is None or self._files is None:
            text = "\n".join(line for sec in self.sections for line in sec.lines)
            self._titles = {norm_title(t) for _, t in _ANY_TITLE.findall(text)}
            files = {os.path.basename(f.split("#", 1)[0]) for f in _ANY_LINK.findall(text)}
            files |= {f.strip() if f.strip().endswith(".md") else f.strip() + ".md" for f in _ANY_WIKILINK.findall(text)}
            self._files = files
        return self._titles, self._files

    # -------------------------------------------------------------- mutations
    def upsert(self, filename: str, *, title: str, hook: str, section: str, old_title: str | None = None,
               refresh_hook: bool = True, is_new: bool = False) -> bool:
        """Put the note's entry in ``section``; return True if anything changed.

        An existing entry keeps its (possibly hand-shortened) hook unless
        ``refresh_hook`` says the description changed, and keeps the link form
        it was written in. A new note (``is_new``) never takes over another
        note's entry by title; if its title is already listed, its entry is
        written in the link form so the two stay apart.
        """
        if is_new:
            titles, files = self._known()
            found = self.find(filename, None) if filename in files or filename in titles else None
        else:
            found = self.find(filename, old_title if old_title is not None else title)
            if found is None and old_title is not None and old_title != title:
                found = self.find(filename, title)
        new_line: str
        if found is not None:
            sec, i = found
            old_line = sec.lines[i]
            old = parse_entry(old_line)
            assert old is not None
            if sec.heading == PROMOTED:
                return False  # the operator's record of a promotion: never rewritten or moved
            stays = self.placement_ok(sec.heading, section)
            keep_hook = not refresh_hook and norm_title(old.title) == norm_title(title) and stays
            use_hook = old.hook if keep_hook else hook
            # keep the form the entry was written in (the reference implementation's link form too)
            new_line = format_entry(title, use_hook, old.filename)
            if stays:
                if old_line == new_line:
                    return False
                sec.lines[i] = new_line
                sec.touch(i)
                self._note(new_line)
                return True
            del sec.lines[i]
            sec.touch(i)
        elif is_new and norm_title(title) in self._known()[0]:
            new_line = format_entry(title, hook, filename)
        else:
            new_line = format_entry(title, hook)
        target = self._section(section)
        target.touch(_insert(target, new_line))
        self._note(new_line)
        return True

    def _note(self, line: str) -> None:
        """Keep the known titles/files in step with a line just written."""
        if self._titles is None or self._files is None:
            return
        e = parse_entry(line)
        if e is not None:
            if e.filename:
                self._files.add(e.filename)
            else:
                self._titles.add(e.title)

    def remove(self, filename: str, title: str | None) -> bool:
        found = self.find(filename, title)
        if found is None:
            return False
        sec, i = found
        del sec.lines[i]
        sec.touch(i)
        return True

    def reconcile(self, wanted: list[Wanted], unreadable: dict[str, set[str]] | None = None) -> dict[str, list[str]]:
        """Bring the INDEX in line with the units while keeping what the operator wrote (``index rebuild``).

        ``wanted`` is every readable unit's entry, in the order new entries are
        appended; ``unreadable`` maps each unit file that could not be parsed
        to the titles it may be listed under. Kept as they are: the preamble,
        every section in its order, every line that is not an entry, every
        entry's position and hook, and every line under Recently Promoted to
        Persona (which counts as its note's entry). Changed: a link-form
        title that no longer matches its note; an entry in a section it cannot
        stay in (:meth:`placement_ok`) moves; a second entry for one note is
        dropped; an entry naming no file is dropped, unless a unit is
        unreadable and the entry may be its own; a unit with no entry gets one.

        Returns what changed: ``added``, ``moved``, ``retitled``, ``dropped``
        (orphan and duplicate lines), ``kept_unreadable`` (files whose line
        was kept unparsed), ``kept_unmatched`` (lines kept because an
        unreadable unit's line could not be told apart) and ``kept_orphans``
        (entries naming no file in a hand-written section, left to the
        operator). Links into other folders (``../raw/...``) are never touched.
        """
        unreadable = unreadable or {}
        by_file = {w.filename: w for w in wanted}
        by_title: dict[str, list[str]] = {}
        for w in wanted:
            by_title.setdefault(norm_title(w.title), []).append(w.filename)
        unread_titles = {norm_title(t): f for f, ts in unreadable.items() for t in ts}

        covered: set[str] = set()  # units whose entry stays where it is
        claimed: set[str] = set()  # units a line was found for (a later line for one is a duplicate)
        moving: dict[str, tuple[Entry, str]] = {}
        report: dict[str, list[str]] = {k: [] for k in ("added", "moved", "retitled", "dropped", "kept_unreadable", "kept_unmatched", "kept_orphans")}
        orphans: list[tuple[_Section, str]] = []

        def identify(e: Entry, heading: str) -> str | None:
            if e.filename is not None:
                return e.filename
            if heading == PROMOTED and e.source is not None:
                return e.source
            if e.title in by_file or e.title in unreadable:
                return e.title  # an entry titled by its filename (a note without a name)
            for fname in by_title.get(norm_title(e.title), []):
                if fname not in claimed:
                    return fname
            return None

        for sec in self.sections:
            out: list[str] = []
            for line in sec.lines:
                e = parse_entry(line)
                if e is None or e.is_pointer:
                    out.append(line)
                    continue
                fname = identify(e, sec.heading)
                if fname is None or fname not in by_file:
                    owner = fname if fname in unreadable else unread_titles.get(norm_title(e.title))
                    if owner is not None:
                        report["kept_unreadable"].append(owner)
                    elif sec.heading == PROMOTED or e.points_elsewhere:
                        pass  # a promotion whose note is gone (the persona holds it), or a link to another folder
                    elif sec.heading not in self.order:
                        report["kept_orphans"].append(line.strip())  # the operator's own section: theirs to remove
                    else:
                        orphans.append((sec, line))
                    out.append(line)
                    continue
                if sec.heading == PROMOTED:
                    covered.add(fname)  # counts as its entry, wherever the section is
                    out.append(line)
                    continue
                if fname in claimed:
                    report["dropped"].append(line.strip())  # a second entry for the same note
                    continue
                claimed.add(fname)
                w = by_file[fname]
                if not self.placement_ok(sec.heading, w.section):
                    moving[fname] = (e, line)
                    continue
                covered.add(fname)
                hook = e.hook
                if w.section == ARCHIVE and hook.startswith("superseded by"):
                    replacement = w.hook.removeprefix("superseded by ").rsplit(",", 1)[0]
                    if replacement not in hook:
                        hook = w.hook  # the line names an older replacement
                if hook != e.hook or (e.filename is not None and e.title != norm_title(w.title)):
                    if e.title != norm_title(w.title):
                        report["retitled"].append(fname)
                    line = format_entry(w.title, hook, e.filename)
                out.append(line)
            sec.lines = out
        # an entry naming no file goes, unless an unreadable unit's line could not be found
        unplaced = set(unreadable) - set(report["kept_unreadable"])
        for sec, line in orphans:
            if unplaced:
                report["kept_unmatched"].append(line.strip())
            else:
                sec.lines.remove(line)
                report["dropped"].append(line.strip())
        self._titles = self._files = None
        for w in wanted:
            if w.filename in covered:
                if w.filename in moving:  # listed as promoted too: that line is its entry
                    report["dropped"].append(moving[w.filename][1].strip())
                continue
            prior = moving[w.filename][0] if w.filename in moving else None
            if prior is not None:
                same_kind = (w.section == ARCHIVE) == prior.hook.startswith("superseded by")
                line = format_entry(w.title, prior.hook if same_kind and w.section != PROMOTED else w.hook, prior.filename)
                report["moved"].append(w.filename)
            else:
                link = w.filename if norm_title(w.title) in self._known()[0] else None
                line = format_entry(w.title, w.hook, link)
                report["added"].append(w.filename)
            target = self._section(w.section)
            _insert(target, line)
            self._note(line)
            covered.add(w.filename)
        for sec in self.sections:
            sec.touch(0)  # re-render every file; changed_files() still writes only those whose text changed
        return report

    def _section(self, heading: str) -> _Section:
        for sec in self.sections:
            if sec.heading == heading:
                return sec
        new = _Section(heading, [""], dirty=True)
        # keep the spec's order: insert before the first known section that comes later
        order = self.order
        rank = order.index(heading) if heading in order else len(order)
        pos = len(self.sections)
        for j, sec in enumerate(self.sections):
            if sec.heading in order and order.index(sec.heading) > rank:
                pos = j
                break
        self.sections.insert(pos, new)
        return new

    # ----------------------------------------------------------------- output
    def render(self, only_dirty: bool = False) -> dict[str, str]:
        """Texts of INDEX.md and each sub-index, after deciding the split.

        With ``only_dirty``, files holding no changed section are left out.
        """
        split_before = {id(s): s.external for s in self.sections}
        self._decide_split()
        newly_split = any(split_before[id(s)] != s.external for s in self.sections)
        files: dict[str, str] = {}
        main: list[str] = list(self.preamble)
        main_dirty = newly_split or "INDEX.md" not in self.loaded
        per_file = max(self.limit - 3, 10)  # each sub-index stays loadable: ~limit lines with its header
        for sec in self.sections:
            main.append(f"## {sec.heading}")
            if sec.external:
                # Fixed-size parts: an appended entry rewrites only the last part, not the whole slice.
                lo, hi = _trimmed_bounds(sec.lines)
                count = max(1, -(-(hi - lo) // per_file))
                stem = sec.external[: -len(".md")]
                names = [sec.external] + [f"{stem}_{k}.md" for k in range(2, count + 1)]
                sec.planned = names
                for k, name in enumerate(names, 1):
                    part = f", part {k} of {len(names)}" if len(names) > 1 else ""
                    main.append(f"- [{name}]({name}) — sub-index of {sec.heading}{part}")
                main.append("")
                if names != sec.parts:
                    main_dirty = True
                if not only_dirty or sec.dirty or names != sec.parts:
                    every = not only_dirty or names != sec.parts
                    starts = list(range(lo, hi, per_file)) or [lo]
                    for k, (name, start) in enumerate(zip(names, starts), 1):
                        if not every and start + per_file <= sec.dirty_from:
                            continue  # this part ends before the first changed line
                        chunk = sec.lines[start : min(start + per_file, hi)]
                        part = f" (part {k})" if len(names) > 1 else ""
                        files[name] = "\n".join(
                            [f"# {self._title} — {self.kind} Index: {sec.heading}{part}", "", f"## {sec.heading}", *chunk, ""]
                        )
            else:
                main.extend(sec.lines)
                main_dirty = main_dirty or sec.dirty
        if not only_dirty or main_dirty:
            text = "\n".join(main)
            files["INDEX.md"] = text if text.endswith("\n") else text + "\n"
        return files

    def changed_files(self) -> dict[str, str]:
        """Files to write: those holding a changed section whose text differs from what was read."""
        return {name: text for name, text in self.render(only_dirty=True).items() if self.loaded.get(name) != text}

    def mark_saved(self, written: dict[str, str]) -> None:
        """After the caller wrote ``written``: this object again mirrors the files on disk."""
        self.loaded.update(written)
        for sec in self.sections:
            sec.dirty = False
            if sec.external:
                sec.parts = list(sec.planned)

    def _decide_split(self) -> None:
        def main_lines() -> int:
            n = len(self.preamble)
            for s in self.sections:
                n += 1 + (1 + max(len(s.parts), 1) if s.external else len(s.lines))
            return n

        if main_lines() <= self.limit:
            return
        for sec in sorted((s for s in self.sections if not s.external), key=lambda s: -len(s.lines)):
            if main_lines() <= self.limit:
                break
            if len(sec.lines) <= 2:
                break
            sec.external = f"INDEX_{SLICE_OF_SECTION.get(sec.heading, _slug(sec.heading))}.md"


def _slug(heading: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", heading.lower()).strip("_") or "misc"


def _trimmed_bounds(lines: list[str]) -> tuple[int, int]:
    """``lines[lo:hi]`` is ``lines`` without leading and trailing blank lines (no copy)."""
    lo, hi = 0, len(lines)
    while hi > lo and not lines[hi - 1].strip():
        hi -= 1
    while lo < hi and not lines[lo].strip():
        lo += 1
    return lo, hi


def _trim(lines: list[str]) -> list[str]:
    out = list(lines)
    while out and not out[-1].strip():
        out.pop()
    while out and not out[0].strip():
        out.pop(0)
    return out


def _insert(sec: _Section, line: str) -> int:
    """Put a new entry after the section's last entry (else its last non-blank line); return its index.

    Hand-written lines after the entries (a rule ``---``, a note) stay after them,
    and the section's trailing blank lines stay.
    """
    end = len(sec.lines)
    while end > 0 and not sec.lines[end - 1].strip():
        end -= 1
    i = end
    while i > 0:
        prev = sec.lines[i - 1]
        if prev.lstrip().startswith(("-", "*")) and parse_entry(prev) is not None:
            break
        i -= 1
    if i == 0:
        i = end  # no entry yet: after the section's text
    sec.lines.insert(i, line)
    if i == len(sec.lines) - 1:
        sec.lines.append("")
    return i


def _split_sections(text: str) -> tuple[list[str], list[_Section]]:
    preamble: list[str] = []
    sections: list[_Section] = []
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for line in lines:
        if line.startswith("## "):
            sections.append(_Section(line[3:].strip()))
        elif sections:
            sections[-1].lines.append(line)
        else:
            preamble.append(line)
    return preamble, sections
