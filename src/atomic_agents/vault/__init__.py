"""Atomic Agent vaults: typed notes and wiki pages on disk, validated and atomic."""

from __future__ import annotations

from ._frontmatter import Document, parse, read, render
from ._models import CONFIDENCE_LEVELS, NOTE_TYPES, NoteMeta, WikiMeta
from ._validate import Issue, validate_note_meta, validate_wiki_meta

__all__ = [
    "CONFIDENCE_LEVELS",
    "Document",
    "Issue",
    "NOTE_TYPES",
    "NoteMeta",
    "WikiMeta",
    "parse",
    "read",
    "render",
    "validate_note_meta",
    "validate_wiki_meta",
]
