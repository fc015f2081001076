"""Notes and wiki pages as loaded from disk, and the drafts that create them."""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from .._format._frontmatter import Document, read
from .._format._vocab import KEY_ORDER
from .._format._units import meta_version
from .._schema import CURRENT_SCHEMA_VERSION

__all__ = ["Note", "NoteDraft", "UnitType", "WikiDraft", "meta_version", "order_meta"]

UnitType = Literal["memory", "wiki"]


def order_meta(meta: dict[str, Any]) -> dict[str, Any]:
    ordered = {k: meta[k] for k in KEY_ORDER if k in meta}
    ordered.update((k, v) for k, v in meta.items() if k not in ordered)
    return ordered


def _as_date(value: Any) -> dt.date | None:
    """A date, or ``None`` for anything the validator would refuse (it reports those)."""
    if isinstance(value, dt.datetime):
        return None
    if isinstance(value, dt.date):
        return value
    if isinstance(value, str) and len(value) == 10 and value[4] == "-" and value[7] == "-" and value.replace("-", "").isascii():
        try:
            return dt.date.fromisoformat(value)
        except ValueError:
            return None
    return None


class Note:
    """An atomic note or wiki page read from disk.

    ``meta`` is the frontmatter exactly as parsed (unknown keys included); the
    typed accessors below give defaults for missing optional fields.
    """

    __slots__ = ("_path", "doc", "filename", "unit_type")

    def __init__(self, path: Path | str, unit_type: UnitType, doc: Document) -> None:
        # Scanning 10,000 notes: a plain string is much cheaper than a Path until one is needed.
        self._path = path
        self.filename: str = os.path.basename(path)
        self.unit_type: UnitType = unit_type
        self.doc = doc

    @property
    def path(self) -> Path:
        if not isinstance(self._path, Path):
            self._path = Path(self._path)
        return self._path

    def __repr__(self) -> str:
        return f"Note({str(self._path)!r}, {self.unit_type!r})"

    @property
    def meta(self) -> dict[str, Any]:
        return self.doc.meta

    @property
    def body(self) -> str:
        if self.doc.lazy:  # came from the parse cache: read the file now
            self.doc = read(self.path)
        return self.doc.body

    @property
    def name(self) -> str:
        v = self.meta.get("name")
        return v if isinstance(v, str) and v else self.path.stem

    @property
    def description(self) -> str:
        v = self.meta.get("description")
        return v if isinstance(v, str) else ""

    @property
    def type(self) -> str | None:
        v = self.meta.get("type")
        return v if isinstance(v, str) else None

    @property
    def superseded_by(self) -> str | None:
        v = self.meta.get("superseded_by")
        return v if isinstance(v, str) and v else None

    @property
    def supersedes(self) -> str | None:
        v = self.meta.get("supersedes")
        return v if isinstance(v, str) and v else None

    @property
    def pinned(self) -> bool:
        return self.meta.get("pinned") is True

    @property
    def expires_at(self) -> dt.date | None:
        return _as_date(self.meta.get("expires_at"))

    @property
    def last_seen(self) -> dt.date | None:
        return _as_date(self.meta.get("last_seen"))

    @property
    def captured(self) -> dt.date | None:
        return _as_date(self.meta.get("captured"))

    @property
    def schema_version(self) -> int | None:
        return meta_version(self.meta)

    def is_expired(self, today: dt.date | None = None) -> bool:
        exp = self.expires_at
        return exp is not None and exp < (today or dt.date.today())

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.filename, "path": str(self.path), "unit_type": self.unit_type, "meta": self.meta, "body": self.body}


@dataclass
class NoteDraft:
    """Everything needed to create one atomic note.

    >>> NoteDraft(type="feedback", topic="debt_priority_order", name="Debt order",
    ...           description="When paying debts, avalanche first", sources=["conversation_2026-05-06"],
    ...           confidence="high").filename
    'feedback_debt_priority_order.md'
    """

    type: str
    topic: str
    name: str
    description: str
    sources: list[str]
    confidence: str
    body: str = ""
    period: str | None = None  # YYYY or YYYY-qN for time-bounded notes
    captured: dt.date | str | None = None
    last_seen: dt.date | str | None = None
    pinned: bool = False
    expires_at: dt.date | str | None = None
    supersedes: str | None = None
    tags: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def filename(self) -> str:
        period = f"{self.period.lower()}_" if self.period else ""
        return f"{self.type}_{period}{self.topic}.md"

    def meta(self, today: dt.date) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "schema_version": CURRENT_SCHEMA_VERSION,
            "name": self.name,
            "description": self.description,
            "type": self.type,
            "captured": _coerce(self.captured) or today,
            "last_seen": _coerce(self.last_seen) or _coerce(self.captured) or today,
            "sources": _listed(self.sources),
            "confidence": self.confidence,
            "pinned": self.pinned,
            "expires_at": _coerce(self.expires_at),
            "supersedes": self.supersedes,
            "superseded_by": None,
            "tags": _listed(self.tags),
        }
        meta.update(self.extra)
        return meta


@dataclass
class WikiDraft:
    """Everything needed to create one wiki page (``{topic}.md`` or ``{topic}_{YYYY}.md``)."""

    topic: str
    name: str
    description: str
    sources: list[str]
    confidence: str
    body: str = ""
    year: int | None = None
    related: list[str] = field(default_factory=list)
    captured: dt.date | str | None = None
    last_seen: dt.date | str | None = None
    pinned: bool = False
    expires_at: dt.date | str | None = None
    tags: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def filename(self) -> str:
        return f"{self.topic}_{self.year}.md" if self.year else f"{self.topic}.md"

    def meta(self, today: dt.date) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "schema_version": CURRENT_SCHEMA_VERSION,
            "name": self.name,
            "description": self.description,
            "type": "wiki_page",
            "captured": _coerce(self.captured) or today,
            "last_seen": _coerce(self.last_seen) or _coerce(self.captured) or today,
            "sources": _listed(self.sources),
            "provenance": "distilled",
            "confidence": self.confidence,
            "pinned": self.pinned,
            "related": _listed(self.related),
            "expires_at": _coerce(self.expires_at),
            "supersedes": None,
            "superseded_by": None,
            "tags": _listed(self.tags),
        }
        meta.update(self.extra)
        return meta


def _coerce(value: dt.date | str | None) -> dt.date | str | None:
    """Turn a valid ISO string into a date; leave anything else for the validator to name."""
    if isinstance(value, str):
        return _as_date(value) or value
    return value


def _listed(value: Any) -> Any:
    """Copy a list; anything else goes to the validator as it is (a string is not a list of one)."""
    return list(value) if isinstance(value, (list, tuple)) else value
