"""Vault tools and resources: notes written and read through the vault (validated, INDEX kept), lint, INDEX.

Resources (read-only): ``vault://<agent>/INDEX.md`` (the memory INDEX) and
``vault://<agent>/persona/<IDENTITY|SOUL|USER>.md`` for every agent. A file that
is missing, or a symlink that leads out of the agents root, is not served.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from ..exceptions import NotFoundError, ValidationError
from ._tools import Args, ToolSpec, boolean, integer, schema, string, strings

if TYPE_CHECKING:
    from ..vault import Agent
    from ._context import Services

__all__ = ["VAULT_TOOLS", "list_resources", "read_resource"]

_NOTE_TYPES = ("user", "feedback", "project", "decision", "reference")
PERSONA_FILES = ("IDENTITY.md", "SOUL.md", "USER.md")
_URI = re.compile(r"^vault://(?P<agent>[^/]+)/(?P<file>INDEX\.md|persona/(?:IDENTITY|SOUL|USER)\.md)$")


def _agent(s: Services, a: Args) -> Agent:
    agent = s.vault().agent(a.text("agent", required=True))
    agent.require()
    return agent


def _unit(a: Args) -> Any:
    return "wiki" if a.flag("wiki") else "memory"


def write_note(s: Services, a: Args) -> Any:
    from ..vault import NoteDraft, WikiDraft

    ag = _agent(s, a)
    kind = a.text("type", required=True)
    body = a.text("body", default="")
    body = body if not body or body.endswith("\n") else body + "\n"
    common = dict(topic=a.text("topic", required=True), name=a.text("name", required=True),
                  description=a.text("description", required=True), sources=a.texts("sources"),
                  confidence=a.text("confidence", default="medium"), body=body, pinned=a.flag("pinned"),
                  expires_at=a.text("expires_at"), tags=a.texts("tags"))  # fmt: skip
    if kind in ("wiki", "wiki_page"):
        return ag.new_wiki_page(WikiDraft(**common, year=a.integer("year"), related=a.texts("related"))).to_dict()
    if kind not in _NOTE_TYPES:  # the vault would say so too; this names the choices
        raise ValidationError(f"type must be one of {', '.join(_NOTE_TYPES)} or wiki", field="type", rule="taxonomy")
    return ag.new_note(NoteDraft(type=kind, **common, period=a.text("period"), supersedes=a.text("supersedes"))).to_dict()


def read_note(s: Services, a: Args) -> Any:
    file = a.text("file", required=True)
    return _agent(s, a).load(file if file.endswith(".md") else file + ".md", _unit(a)).to_dict()


def list_notes(s: Services, a: Args) -> Any:
    if a.text("agent") is None:
        return {"agents": s.vault().agents()}
    pinned = True if a.flag("pinned") else None
    notes, unreadable = _agent(s, a).list_units(include_superseded=a.flag("all"), type=a.text("type"), pinned=pinned,
                                                unit_type=_unit(a))  # fmt: skip
    rows = [{"file": n.filename, "type": n.type, "name": n.name, "description": n.description,
             "pinned": n.pinned, "superseded_by": n.superseded_by} for n in notes]  # fmt: skip  # = vault list --json
    return {"agent": a.text("agent"), "notes": rows, "unreadable": [str(e) for e in unreadable]}


def read_index(s: Services, a: Args) -> Any:
    idx = _agent(s, a).index(_unit(a))
    return {"files": idx.render(), "entries": [{"section": sec, "title": e.title, "hook": e.hook, "file": e.filename}
                                               for sec, e in idx.entries()]}  # fmt: skip


def lint(s: Services, a: Args) -> Any:
    # the server's store holds the mirror its writes keep: lint reports entries hand edits left behind
    reports = s.vault().lint(a.text("agent"), stale_days=a.integer("stale_days", default=90), store=s.store())
    return {"reports": [r.to_dict() for r in reports]}


# ------------------------------------------------------------------ resources
def list_resources(s: Services) -> list[tuple[str, str, str]]:
    """``(uri, name, description)`` of every agent's INDEX and persona files that exist."""
    vault = s.vault()
    if not vault.root.is_dir():
        return []
    out = []
    for name in vault.agents():
        base = vault.root / name
        for rel in ("memory/INDEX.md", *(f"persona/{p}" for p in PERSONA_FILES)):
            if (base / rel).is_file():
                shown = "INDEX.md" if rel == "memory/INDEX.md" else rel
                out.append((f"vault://{name}/{shown}", f"{name}/{shown}", f"{name}'s {shown} (read-only)"))
    return out


def read_resource(s: Services, uri: str) -> str:
    """The text of one resource; the file must stay inside the agents root."""
    from .._io import resolve_inside
    from .._text import read_text

    m = _URI.match(uri)
    if m is None:
        raise NotFoundError(f"unknown resource {uri[:200]!r}: vault://<agent>/INDEX.md or vault://<agent>/persona/<IDENTITY|SOUL|USER>.md")
    agent = s.vault().agent(m["agent"])  # checks the name (no separators, no '..')
    agent.require()
    rel = "memory/INDEX.md" if m["file"] == "INDEX.md" else m["file"]
    path = agent.path / rel
    if not path.is_file():
        raise NotFoundError(f"{agent.name} has no {m['file']}", path=path)
    resolve_inside(s.vault().root, path, what="the resource")  # a symlink out of the root is refused
    return read_text(path)


_AGENT = {"agent": string("Agent name (snake_case).")}
_WIKI = {"wiki": boolean("Wiki page instead of memory note.")}

VAULT_TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec("vault_write_note", "Create a validated atomic note (or wiki page: type=wiki); adds its INDEX entry.",
             schema({**_AGENT, "type": string("user, feedback, project, decision, reference or wiki."),
                     "topic": string("snake_case, 2-5 words."), "name": string("Title, ~80 chars."),
                     "description": string("One-line hook, ~150 chars."), "sources": strings(),
                     "confidence": string("high, medium or low."), "body": string("Markdown."), "period": string("YYYY or YYYY-qN."),
                     "year": integer("Wiki version year."), "pinned": boolean(), "expires_at": string("YYYY-MM-DD."),
                     "supersedes": string("File it replaces."), "tags": strings(), "related": strings()},
                    ("agent", "type", "topic", "name", "description", "sources")), write_note),
    ToolSpec("vault_read_note", "Read one note or wiki page: frontmatter and body.",
             schema({**_AGENT, "file": string(), **_WIKI}, ("agent", "file")), read_note, read_only=True),
    ToolSpec("vault_list_notes", "List an agent's notes (superseded skipped unless all=true); no agent: list agents.",
             schema({**_AGENT, "type": string(), "pinned": boolean(), "all": boolean(), **_WIKI}), list_notes, read_only=True),
    ToolSpec("vault_read_index", "An agent's INDEX (and sub-indexes): files and parsed entries.",
             schema({**_AGENT, **_WIKI}, ("agent",)), read_index, read_only=True),
    ToolSpec("vault_lint", "Lint an agent (or all): invalid, stale, expired, unindexed, broken links.",
             schema({**_AGENT, "stale_days": integer(minimum=1)}), lint, read_only=True),
)
