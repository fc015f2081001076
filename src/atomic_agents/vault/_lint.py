"""``vault lint``: everything that is wrong or getting old in an agent's vault.

Errors (non-zero exit): invalid notes and wiki pages (file, field, rule),
unparseable frontmatter, broken supersede links, INDEX entries naming no file,
notes with no INDEX entry, an interrupted write not yet rolled forward, bad
``tools.md`` / ``model.md``.
Warnings: stale (``last_seen`` older than ``stale_days``), expired
(``expires_at`` passed: an archive candidate), one-sided supersede links,
over-long name/description, a large pinned set, a stale memory mirror (a write
whose mirror update failed; with a store given, also each mirror entry that is
stale, missing or orphaned after hand edits; ``vault sync`` repairs it). Hints: time-bounded types with
undated filenames, notes promoted to a persona file.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._io import inside_root, resolve_inside
from .._schema import CURRENT_SCHEMA_VERSION
from ..exceptions import FrontmatterParseError, UnsafePathError, ValidationError
from ._cache import ParseCache
from ._index import PROMOTED, is_persona_ref, norm_title
from ._units import Note, UnitType
from .._format._validate import NOTE_FILENAME, Issue, validate_note_meta, validate_wiki_meta

if TYPE_CHECKING:
    from ._agent import Agent

__all__ = ["LintReport", "check_units", "dated_filename", "guess_titles", "lint_agent"]

STALE_DAYS = 90
PINNED_BUDGET = 10  # spec: "every pinned memory is a tax on the always-loaded budget"


@dataclass
class LintReport:
    """Findings for one agent, plus the figures lint computes."""

    agent: str
    issues: list[Issue] = field(default_factory=list)
    notes: int = 0
    wiki_pages: int = 0
    pinned: list[str] = field(default_factory=list)

    @property
    def errors(self) -> list[Issue]:
        return [i for i in self.issues if i.severity == "error"]

    def to_dict(self) -> dict[str, Any]:
        counts = {s: sum(1 for i in self.issues if i.severity == s) for s in ("error", "warning", "hint")}
        return {
            "agent": self.agent,
            "notes": self.notes,
            "wiki_pages": self.wiki_pages,
            "pinned": {"count": len(self.pinned), "files": self.pinned, "budget": PINNED_BUDGET},
            "counts": counts,
            "issues": [i.__dict__ for i in self.issues],
        }


Scanned = dict[str, tuple[list[Note], list[ValidationError]]]


def scan_all(agent: Agent, cache: ParseCache | None = None) -> Scanned:
    """Both kinds of unit, through the agent's parse cache when one is given."""
    return {"memory": agent.scan("memory", cache=cache), "wiki": agent.scan("wiki", cache=cache)}


def check_units(agent: Agent, *, strict_index: bool = True, scanned: Scanned | None = None,
                cache: ParseCache | None = None) -> list[Issue]:
    """Spec checks 1-6 on every note and wiki page, with supersede links and INDEX coverage.

    Without ``scanned``, the units are read through the agent's parse cache
    (unchanged files are neither parsed nor validated again) and the cache is saved.
    """
    issues: list[Issue] = []
    own_cache = scanned is None and cache is None
    if own_cache:
        cache = agent.parse_cache()
    if scanned is None:
        scanned = scan_all(agent, cache)
    unit_type: UnitType
    for unit_type in ("memory", "wiki"):
        units, errors = scanned[unit_type]
        for err in errors:
            rel = os.path.relpath(err.path, agent.agents_root) if err.path else None
            line = getattr(err, "line", None)
            where = f"{rel}:{line}" if rel and line else rel
            # unparseable frontmatter (yaml), or a unit symlinked out of the root (outside-root)
            issues.append(Issue(where, err.field or "file", err.rule or "unreadable", err.message))
        validator = validate_note_meta if unit_type == "memory" else validate_wiki_meta
        names = {u.filename for u in units} | {e.path.rsplit("/", 1)[-1] for e in errors if e.path}
        prefix = f"{agent.name}/{agent.folder(unit_type).name}/"
        issues.extend(_pending_write(agent, unit_type))
        by_name = {u.filename: u for u in units}
        for u in units:
            rel = prefix + u.filename
            key = f"{unit_type}/{u.filename}"
            found = cache.issues(key) if cache is not None else None
            if found is not None:
                issues.extend(Issue(rel, *row) for row in found)
            else:
                # Reading accepts any version up to current (target None); lint hints at old ones.
                fresh = validator(u.meta, filename=u.filename, path=rel, target_version=None)
                if cache is not None:
                    cache.set_issues(key, [[i.field, i.rule, i.message, i.severity] for i in fresh])
                issues.extend(fresh)
            issues.extend(_links(agent, u, names, by_name, rel))
        if strict_index and inside_root(agent.agents_root, agent.folder(unit_type)):
            # an INDEX in a folder leading out of the root is never read (its notes are errors above)
            unreadable = {os.path.basename(e.path): ({os.path.basename(e.path)} if isinstance(e, UnsafePathError)
                                                     else guess_titles(e.path)) for e in errors if e.path}
            issues.extend(_index_coverage(agent, unit_type, units, names, unreadable))
    if own_cache and cache is not None:
        cache.save()
    return issues


_NAME_LINE = re.compile(r"^name:[ \t]*(?P<v>.*?)[ \t]*$", re.M)


def guess_titles(path: str) -> set[str]:
    """Titles an unparseable unit may be listed under: its filename, and a ``name:`` line if one is there."""
    out = {os.path.basename(path)}
    with contextlib.suppress(OSError):
        with open(path, "rb") as fh:
            head = fh.read(65536).decode("utf-8", "replace")
        for m in _NAME_LINE.finditer(head):
            value = m.group("v")
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            if value:
                out.add(value)
    return out


def _pending_write(agent: Agent, unit_type: UnitType) -> list[Issue]:
    """A non-empty intent record: a writer died between its renames and nobody has rolled it forward yet."""
    marker = agent.folder(unit_type) / ".index-pending.json"
    try:
        size = os.stat(marker).st_size
    except OSError:
        return []
    if size == 0:
        return []
    rel = str(marker.relative_to(agent.agents_root))
    return [Issue(rel, None, "interrupted-write",
                  "a write was interrupted between its files; run `vault validate` (or any write) to roll it forward")]


def _links(agent: Agent, u: Note, names: set[str], by_name: dict[str, Note], rel: str) -> list[Issue]:
    out = []
    for key, back in (("supersedes", "superseded_by"), ("superseded_by", "supersedes")):
        target = u.meta.get(key)
        if not isinstance(target, str) or not target:
            continue
        if target in names:
            other = by_name.get(target)
            if other is not None and other.meta.get(back) != u.filename:
                has = other.meta.get(back)
                now = f"it has {back}: {has}" if isinstance(has, str) and has else f"it has no {back}"
                out.append(Issue(rel, key, "supersede-one-sided",
                                 f"points to {target}, but {now} (link both: vault supersede)", "warning"))
            continue
        if key == "superseded_by" and u.unit_type == "memory" and is_persona_ref(target):
            persona = target.split("#", 1)[0].strip().removeprefix("./")
            path = agent.path / (persona if "/" in persona else f"persona/{persona}")
            if path.is_file():
                out.append(Issue(rel, key, "promoted", f"points to {target}: promoted to a persona file, not a note", "hint"))
            else:
                out.append(Issue(rel, key, "supersede-link",
                                 f"points to {target}, a persona section, not a note; and {persona} is missing"))
            continue
        what = "not a note (a note is a file in this folder)" if "/" in target or "#" in target else "which does not exist"
        out.append(Issue(rel, key, "supersede-link", f"points to {target}, {what}"))
    return out


def _index_coverage(agent: Agent, unit_type: UnitType, units: list[Note], names: set[str],
                    unreadable: dict[str, set[str]]) -> list[Issue]:
    folder = agent.folder(unit_type)
    if not units and not (folder / "INDEX.md").exists():
        return []
    rel_index = str((folder / "INDEX.md").relative_to(agent.agents_root))
    try:
        idx = agent.index(unit_type)
    except FrontmatterParseError as exc:  # an INDEX file that is not UTF-8 (EncodingError)
        rel = os.path.relpath(exc.path, agent.agents_root) if exc.path else rel_index
        return [Issue(f"{rel}:{exc.line}" if exc.line else rel, "INDEX.md", exc.rule or "utf-8", exc.message)]
    titles: dict[str, list[str]] = {}
    for u in units:
        titles.setdefault(norm_title(u.name), []).append(u.filename)
    unread_titles = {norm_title(t) for ts in unreadable.values() for t in ts}
    covered: set[str] = set()
    out: list[Issue] = []
    for section, e in idx.entries():
        if e.filename is None and norm_title(e.title) in unread_titles:
            continue  # the line of a unit that does not parse (reported as such)
        if section == PROMOTED:
            # the operator's record of a promotion: it covers its note, and may name none (the persona holds it)
            named = e.filename or e.source
            if named is not None:
                covered.add(named)
            covered.update(titles.get(norm_title(e.title), []))
            continue
        if e.filename is not None:
            if e.filename in names:
                covered.add(e.filename)
                continue
            if e.points_elsewhere:
                continue  # a link into another folder (raw/, persona/): not a unit's entry
        elif norm_title(e.title) in titles or e.title in names:
            covered.update(titles.get(norm_title(e.title), [e.title]))
            continue
        out.append(Issue(rel_index, section, "index-orphan", f"entry {e.title!r} names no file"))
    for u in units:
        if u.filename not in covered:
            rel = str(u.path.relative_to(agent.agents_root))
            out.append(Issue(rel, "INDEX.md", "index-missing", "has no INDEX entry (run: vault index rebuild)"))
    return out


def lint_agent(
    agent: Agent, *, today: dt.date | None = None, stale_days: int = STALE_DAYS, pinned_budget: int = PINNED_BUDGET,
    store: Any = None,
) -> LintReport:
    """Lint one agent's vault; with ``store`` (a memory store), also each mirror entry that lags the files.

    The vault imports nothing above it: the mirror check lives in the memory
    bridge and is reached through the ``vault.mirror_check`` extension point.
    """
    from ._persona import check_operational_files

    today = today or dt.date.today()
    resolve_inside(agent.agents_root, agent.path, what="agent folder")  # nothing outside the root is linted
    report = LintReport(agent.name)
    cache = agent.parse_cache()
    scanned = scan_all(agent, cache)
    report.issues.extend(check_units(agent, scanned=scanned, cache=cache))
    cache.save()
    report.issues.extend(check_operational_files(agent))
    notes, wiki = scanned["memory"][0], scanned["wiki"][0]
    report.notes, report.wiki_pages = len(notes), len(wiki)
    for u in notes + wiki:
        rel = f"{agent.name}/{agent.folder(u.unit_type).name}/{u.filename}"
        if u.superseded_by:
            continue
        seen = u.last_seen
        if seen is not None and (today - seen).days > stale_days:
            report.issues.append(
                Issue(rel, "last_seen", "stale", f"not confirmed for {(today - seen).days} days (> {stale_days})", "warning")
            )
        if u.is_expired(today):
            report.issues.append(
                Issue(rel, "expires_at", "expired", f"expired {u.expires_at}; archive candidate (supersede or archive it)", "warning")
            )
        if u.pinned:
            report.pinned.append(u.filename)
        version = u.schema_version
        if version is not None and version < CURRENT_SCHEMA_VERSION:
            report.issues.append(
                Issue(rel, "schema_version", "old-schema", f"at v{version}; migrate with python -m atomic_agents.migrate", "hint")
            )
        if u.unit_type == "memory":
            report.issues.extend(_date_hints(u, rel))
    stale = agent.path / ".mirror-stale"  # _agent.MIRROR_STALE: a write hook (the memory mirror) failed
    if os.path.lexists(stale):
        report.issues.append(
            Issue(f"{agent.name}/.mirror-stale", None, "mirror-stale",
                  "the memory mirror lags the notes (a store write failed); run: atomic-agents vault sync "
                  f"{agent.name}", "warning")
        )
    if store is not None:
        from .._extensions import resolve

        report.issues.extend(resolve("vault.mirror_check")(agent, store, today=today))
    if len(report.pinned) > pinned_budget:
        report.issues.append(
            Issue(str(agent.memory_dir.relative_to(agent.agents_root)), "pinned", "pinned-budget",
                  f"{len(report.pinned)} pinned notes (budget {pinned_budget}); pin sparingly", "warning")
        )
    return report


_QUARTER = re.compile(r"^q[1-4]$")
_YEAR = re.compile(r"^(?:19|20|21)\d{2}$")


def _date_hints(u: Note, rel: str) -> list[Issue]:
    m = NOTE_FILENAME.match(u.filename)
    if m is None:
        return []
    kind, period, topic = m.group("type"), m.group("period"), m.group("topic")
    if kind in ("decision", "project") and not period and u.expires_at is not None:
        return [Issue(rel, "filename", "undated-time-bounded",
                      f"time-bounded {kind} (expires {u.expires_at}) with an undated filename; "
                      f"consider {dated_filename(kind, topic, u.expires_at.year)}", "hint")]
    if kind in ("decision", "project") and period and "-" not in period and topic.split("_", 1)[0] in ("q1", "q2", "q3", "q4"):
        quarter, rest = topic.split("_", 1) if "_" in topic else (topic, "")
        if rest:
            return [Issue(rel, "filename", "dated-form",
                          f"a quarter is written into the date: consider {kind}_{period}-{quarter}_{rest}.md", "hint")]
    if kind in ("feedback", "user", "reference") and period:
        return [Issue(rel, "filename", "dated-evergreen", f"{kind} notes are evergreen; the date in the filename is unusual", "hint")]
    return []


def dated_filename(kind: str, topic: str, year: int) -> str:
    """The spec's ``{type}_{YYYY[-q#]}_{topic}.md`` for an undated topic: a year or quarter in the topic moves into the date.

    >>> dated_filename("decision", "q3_income_target", 2026)
    'decision_2026-q3_income_target.md'
    >>> dated_filename("project", "launch", 2027)
    'project_2027_launch.md'
    """
    words = topic.split("_")
    quarter = next((w for w in words if _QUARTER.match(w)), None)
    named_year = next((w for w in words if _YEAR.match(w)), None)
    rest = [w for w in words if w not in (quarter, named_year)] or ["topic"]
    period = named_year or str(year)
    if quarter:
        period += f"-{quarter}"
    return f"{kind}_{period}_{'_'.join(rest)}.md"
