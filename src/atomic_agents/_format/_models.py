"""Typed frontmatter of atomic notes and wiki pages, exactly as the spec defines it.

The models keep unknown keys (``extra="allow"``): users add their own fields
(``priority``, ``tag_color``) and every write preserves them.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictBool, StrictInt, StrictStr
from pydantic_core import PydanticCustomError

__all__ = [
    "CONFIDENCE_LEVELS",
    "INDEX_SECTIONS",
    "KEY_ORDER",
    "NOTE_TYPES",
    "NoteMeta",
    "WikiMeta",
    "parse_date",
]

from ._vocab import CONFIDENCE_LEVELS, INDEX_SECTIONS, KEY_ORDER, NOTE_TYPES

_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def parse_date(value: Any) -> dt.date:
    """Accept a ``date`` or a ``YYYY-MM-DD`` string naming a real calendar date.

    >>> parse_date("2026-05-06")
    datetime.date(2026, 5, 6)
    """
    if isinstance(value, dt.datetime):
        raise PydanticCustomError("date_format", "must be a date YYYY-MM-DD, not a timestamp")
    if isinstance(value, dt.date):
        return value
    if isinstance(value, str) and _ISO_DATE.match(value):
        try:
            return dt.date.fromisoformat(value)
        except ValueError:
            raise PydanticCustomError("date_calendar", "{value} is not a real calendar date", {"value": value}) from None
    # pydantic fills "{value}" with str(); the repr is made here (clipped: a 5,000-digit int stays readable).
    shown = repr(value)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    raise PydanticCustomError("date_format", "must be a date in YYYY-MM-DD form, got {value}", {"value": shown})


Date = Annotated[dt.date, BeforeValidator(parse_date)]
NonEmptyStr = Annotated[StrictStr, Field(min_length=1)]


class _Meta(BaseModel):
    model_config = ConfigDict(extra="allow", validate_assignment=False, populate_by_name=True)

    schema_version: StrictInt
    name: NonEmptyStr
    description: NonEmptyStr
    captured: Date
    last_seen: Date
    sources: list[StrictStr]
    confidence: Literal["high", "medium", "low"]
    pinned: StrictBool = False
    expires_at: Date | None = None
    supersedes: StrictStr | None = None
    superseded_by: StrictStr | None = None
    tags: list[StrictStr] = Field(default_factory=list)

    def to_meta(self) -> dict[str, Any]:
        """Frontmatter mapping in the spec's key order, unknown keys after."""
        data = self.model_dump(exclude_none=False)
        ordered = {key: data[key] for key in KEY_ORDER if key in data}
        ordered.update((k, v) for k, v in data.items() if k not in ordered)
        return ordered


class NoteMeta(_Meta):
    """Frontmatter of an atomic note.

    >>> NoteMeta(schema_version=1, name="Debt order", description="When paying debts",
    ...          type="feedback", captured="2026-05-06", last_seen="2026-05-06",
    ...          sources=["conversation_2026-05-06"], confidence="high").type
    'feedback'
    """

    type: Literal["user", "feedback", "project", "decision", "reference"]


class WikiMeta(_Meta):
    """Frontmatter of a wiki page: ``type`` is always ``wiki_page``, ``provenance`` always ``distilled``."""

    type: Literal["wiki_page"] = "wiki_page"
    provenance: Literal["distilled"] = "distilled"
    related: list[StrictStr] = Field(default_factory=list)
