"""The spec's vocabularies as plain constants: importable without pydantic (read-only commands need them)."""

from __future__ import annotations

__all__ = ["CONFIDENCE_LEVELS", "INDEX_SECTIONS", "KEY_ORDER", "NOTE_TYPES"]

#: The locked five-type taxonomy (spec: Atomic Note frontmatter schema).
NOTE_TYPES: tuple[str, ...] = ("user", "feedback", "project", "decision", "reference")
CONFIDENCE_LEVELS: tuple[str, ...] = ("high", "medium", "low")

#: INDEX sections in the spec's order, with the note type each one holds.
INDEX_SECTIONS: tuple[tuple[str, str | None], ...] = (
    ("Critical Feedback", "feedback"),
    ("Locked Decisions", "decision"),
    ("User Profile", "user"),
    ("Active Projects", "project"),
    ("Reference", "reference"),
    ("Recently Promoted to Persona", None),
    ("Archive (superseded)", None),
)

#: Frontmatter key order of new files, as the spec lists the schema.
KEY_ORDER: tuple[str, ...] = (
    "schema_version", "name", "description", "type", "captured", "last_seen", "sources",
    "provenance", "confidence", "pinned", "related", "expires_at", "supersedes", "superseded_by", "tags",
)
