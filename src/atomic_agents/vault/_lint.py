"""``vault lint``: everything that is wrong or getting old in an agent's vault.

Errors (non-zero exit): invalid notes and wiki pages (file, field, rule),
unparseable frontmatter, broken supersede links, INDEX entries naming no file,
notes with no INDEX entry, bad ``tools.md`` / ``model.md``.
Warnings: stale (``last_seen`` older than ``stale_days``), expired
(``expires_at`` passed: an archive candidate), over-long name/description, a
large pinned set. Hints: time-bounded types with undated filenames.
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._schema import CURRENT_SCHEMA_VERSION
from ..exceptions import FrontmatterParseError
from ._cache import ParseCache
from ._units import Note, UnitType
from ._validate import NOTE_FILENAME, Issue, validate_note_meta, validate_wiki_meta

if TYPE_CHECKING:
    from ._agent import Agent

__all__ = ["LintReport", "check_units", "lint_agent"]

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


Scanned = dict[str, tuple[list[Note], list[FrontmatterParseError]]]


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
            where = f"{rel}:{err.line}" if rel and err.line else rel
            issues.append(Issue(where, "frontmatter", "yaml", err.message))
        validator = validate_note_meta if unit_type == "memory" else validate_wiki_meta
        names = {u.filename for u in units} | {e.path.rsplit("/", 1)[-1] for e in errors if e.path}
        prefix = f"{agent.name}/{agent.folder(unit_type).name}/"
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
            issues.extend(_links(u, names, rel))
        if strict_index:
            issues.extend(_index_coverage(agent, unit_type, units, names))
    if own_cache and cache is not None:
        cache.save()
    return issues


def _links(u: Note, names: set[str], rel: str) -> list[Issue]:
    out = []
    for key in ("supersedes", "superseded_by"):
        target = u.meta.get(key)
        if isinstance(target, str) and target and target not in names:
            out.append(Issue(rel, key, "supersede-link", f"points to {target}, which does not exist"))
    return out


def _index_coverage(agent: Agent, unit_type: UnitType, units: list[Note], names: set[str]) -> list[Issue]:
    folder = agent.folder(unit_type)
    if not units and not (folder / "INDEX.md").exists():
        return []
    idx = agent.index(unit_type)
    rel_index = str((folder / "INDEX.md").relative_to(agent.agents_root))
    titles: dict[str, list[str]] = {}
    for u in units:
        titles.setdefault(u.name, []).append(u.filename)
    covered: set[str] = set()
    out: list[Issue] = []
    for section, e in idx.entries():
        if section == "Recently Promoted to Persona":
            continue  # points at persona files, not notes
        if e.filename is not None:
            if e.filename in names:
                covered.add(e.filename)
                continue
        elif e.title in titles or e.title in names:
            covered.update(titles.get(e.title, [e.title]))
            continue
        out.append(Issue(rel_index, section, "index-orphan", f"entry {e.title!r} names no file"))
    for u in units:
        if u.filename not in covered:
            rel = str(u.path.relative_to(agent.agents_root))
            out.append(Issue(rel, "INDEX.md", "index-missing", "has no INDEX entry (run: vault index rebuild)"))
    return out


def lint_agent(
    agent: Agent, *, today: dt.date | None = None, stale_days: int = STALE_DAYS, pinned_budget: int = PINNED_BUDGET
) -> LintReport:
    """Lint one agent's vault."""
    from ._persona import check_operational_files

    today = today or dt.date.today()
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
    if len(report.pinned) > pinned_budget:
        report.issues.append(
            Issue(str(agent.memory_dir.relative_to(agent.agents_root)), "pinned", "pinned-budget",
                  f"{len(report.pinned)} pinned notes (budget {pinned_budget}); pin sparingly", "warning")
        )
    return report


def _date_hints(u: Note, rel: str) -> list[Issue]:
    m = NOTE_FILENAME.match(u.filename)
    if m is None:
        return []
    kind, period = m.group("type"), m.group("period")
    if kind in ("decision", "project") and not period and u.expires_at is not None:
        return [Issue(rel, "filename", "undated-time-bounded",
                      f"time-bounded {kind} (expires {u.expires_at}) with an undated filename; "
                      f"consider {kind}_{u.expires_at.year}_{m.group('topic')}.md", "hint")]
    if kind in ("feedback", "user", "reference") and period:
        return [Issue(rel, "filename", "dated-evergreen", f"{kind} notes are evergreen; the date in the filename is unusual", "hint")]
    return []
