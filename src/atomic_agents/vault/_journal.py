"""The episodic journal: ``journal/YYYY-MM/YYYY-MM-DD.md`` in the spec's light format.

Items are appended under their section; "Captured to memory" links the notes
made from the day, which is the bridge from the journal to semantic memory.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .._io import atomic_write, make_dirs, resolve_inside
from .._text import read_text
from ..exceptions import NotFoundError, ValidationError

if TYPE_CHECKING:
    from ._agent import Agent

__all__ = ["JOURNAL_SECTIONS", "JournalItem", "append_journal", "journal_items", "journal_path", "link_capture"]

JOURNAL_SECTIONS = {
    "happened": "What happened",
    "decisions": "Decisions made",
    "captured": "Captured to memory",
    "questions": "Open questions",
}


def journal_path(agent: Agent, day: dt.date) -> Path:
    return agent.journal_dir / f"{day:%Y-%m}" / f"{day:%Y-%m-%d}.md"


def _template(agent: Agent, day: dt.date) -> str:
    parts = [f"# {day:%Y-%m-%d} — {agent.title} journal", ""]
    for heading in JOURNAL_SECTIONS.values():
        parts += [f"## {heading}", ""]
    return "\n".join(parts)


def _add_to_section(text: str, heading: str, lines: list[str]) -> str:
    rows = text.split("\n")
    try:
        start = next(i for i, r in enumerate(rows) if r.strip() == f"## {heading}")
    except StopIteration:
        if rows and rows[-1] == "":
            rows.pop()
        rows += ["", f"## {heading}", *lines, ""]
        return "\n".join(rows)
    end = next((i for i in range(start + 1, len(rows)) if rows[i].startswith("## ")), len(rows))
    insert_at = end
    while insert_at > start + 1 and not rows[insert_at - 1].strip():
        insert_at -= 1
    # drop the empty "- —" placeholder bullet of the template, if present
    if insert_at > start + 1 and rows[insert_at - 1].strip() in ("-", "- —"):
        del rows[insert_at - 1]
        insert_at -= 1
    rows[insert_at:insert_at] = lines
    if insert_at + len(lines) >= len(rows) or rows[insert_at + len(lines)].startswith("## "):
        rows.insert(insert_at + len(lines), "")
    return "\n".join(rows)


def append_journal(
    agent: Agent,
    *,
    day: dt.date | None = None,
    happened: list[str] | None = None,
    decisions: list[str] | None = None,
    questions: list[str] | None = None,
) -> Path:
    """Append bullet items to the day's journal (created from the template if new)."""
    day = day or dt.date.today()
    with agent.locked():
        path = journal_path(agent, day)
        text = read_text(path, universal_newlines=True) if path.exists() else _template(agent, day)
        for key, items in (("happened", happened), ("decisions", decisions), ("questions", questions)):
            clean = [" ".join(str(i).split()) for i in items or [] if str(i).strip()]
            if clean:
                text = _add_to_section(text, JOURNAL_SECTIONS[key], [f"- {i}" for i in clean])
        make_dirs(path.parent, root=agent.agents_root)
        atomic_write(path, text, root=agent.agents_root)
        return path


@dataclass(frozen=True)
class JournalItem:
    """A bullet of a journal day, numbered from 1 in file order."""

    number: int
    section: str
    text: str


def journal_items(agent: Agent, day: dt.date) -> list[JournalItem]:
    path = journal_path(agent, day)
    if not path.exists():
        raise NotFoundError(f"{path}: no journal for {day}", path=path)
    resolve_inside(agent.agents_root, path, what="this journal")  # never read from outside the root
    items: list[JournalItem] = []
    section = ""
    for line in read_text(path, universal_newlines=True).splitlines():
        if line.startswith("## "):
            section = line[3:].strip()
            continue
        m = re.match(r"^\s*[-*]\s+(.*\S)\s*$", line)
        if m and section != JOURNAL_SECTIONS["captured"] and m.group(1) != "—":
            items.append(JournalItem(len(items) + 1, section, m.group(1)))
    return items


def pick_item(agent: Agent, day: dt.date, item: int | str) -> JournalItem:
    """An item by number, or the one item whose text contains ``item``."""
    items = journal_items(agent, day)
    if isinstance(item, int) or (isinstance(item, str) and item.isdigit()):
        n = int(item)
        for it in items:
            if it.number == n:
                return it
        raise ValidationError(f"journal {day} has {len(items)} items; no item {n}", field="item", rule="exists")
    matches = [it for it in items if str(item).lower() in it.text.lower()]
    if len(matches) != 1:
        raise ValidationError(
            f"{len(matches)} journal items of {day} contain {item!r}; give the item number", field="item", rule="unique"
        )
    return matches[0]


def link_capture(agent: Agent, day: dt.date, filename: str, name: str) -> None:
    """Add a note to the day's "Captured to memory" section (spec's bridge)."""
    with agent.locked():
        path = journal_path(agent, day)
        text = read_text(path, universal_newlines=True) if path.exists() else _template(agent, day)
        line = f"- [{filename}](../../memory/{filename}) — {' '.join(name.split())}"
        if line not in text:
            text = _add_to_section(text, JOURNAL_SECTIONS["captured"], [line])
            make_dirs(path.parent, root=agent.agents_root)
            atomic_write(path, text, root=agent.agents_root)
