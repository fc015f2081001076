"""The spec's write-time checks, as plain functions returning :class:`Issue` lists.

Checks 1-5 of the spec (required fields, taxonomy, confidence set, real dates,
filename pattern) live here; check 6 (INDEX updated in the same operation) is
guaranteed by the writer, which updates the INDEX under the same agent lock.
Errors block a write; warnings and hints are for ``vault lint``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from .._schema import CURRENT_SCHEMA_VERSION
from ..exceptions import ValidationError
from ._vocab import NOTE_TYPES

if TYPE_CHECKING:
    from pydantic import ValidationError as PydanticValidationError

__all__ = [
    "Issue",
    "NOTE_FILENAME",
    "WIKI_FILENAME",
    "raise_first_error",
    "validate_note_meta",
    "validate_wiki_meta",
]

Severity = Literal["error", "warning", "hint"]

NAME_MAX = 80  # spec: "~80 chars max" -> a lint warning, not a write error
DESCRIPTION_MAX = 150  # spec: "~150 chars max"

#: ``{type}_{topic}.md`` or ``{type}_{YYYY[-qN]}_{topic}.md``
NOTE_FILENAME = re.compile(
    r"^(?P<type>[a-z]+)_(?:(?P<period>\d{4}(?:-[qQ][1-4])?)_)?(?P<topic>[a-z0-9]+(?:_[a-z0-9]+)*)\.md$"
)
#: ``{topic}.md`` or ``{topic}_{YYYY}.md``
WIKI_FILENAME = re.compile(r"^(?P<topic>[a-z0-9]+(?:_[a-z0-9]+)*?)(?:_(?P<year>\d{4}))?\.md$")


@dataclass(frozen=True)
class Issue:
    """One finding: where (path, field), which rule, what to do, and how bad."""

    path: str | None
    field: str | None
    rule: str
    message: str
    severity: Severity = "error"

    def __str__(self) -> str:
        where = f"{self.path}: " if self.path else ""
        field = f"{self.field}: " if self.field else ""
        return f"{where}{field}{self.message} [{self.rule}]"


_REQUIRED = ("schema_version", "name", "description", "type", "captured", "last_seen", "sources", "confidence")


def title_problem(title: str) -> str | None:
    """Why ``title`` cannot be an INDEX title, or ``None`` if it can.

    An entry is one line: a title cannot hold a line break (newline, carriage
    return, U+2028 ...) or another control character (tab included). Every
    other character round-trips: backticks and brackets are escaped by
    :func:`format_entry`, and runs of spaces are compared as one space.

    >>> title_problem("Run `make test` first") is None
    True
    >>> title_problem("two\\nlines")
    'contains a newline; an INDEX entry is one line'
    """
    import unicodedata

    if not title.strip():
        return "is blank"
    for ch in title:
        if unicodedata.category(ch) in ("Cc", "Zl", "Zp"):
            what = {"\n": "a newline", "\r": "a carriage return", "\t": "a tab"}.get(ch, f"the control character U+{ord(ch):04X}")
            return f"contains {what}; an INDEX entry is one line"
    return None


def _map_pydantic(exc: PydanticValidationError, meta: dict[str, Any], path: str | None) -> list[Issue]:
    issues: list[Issue] = []
    seen: set[str] = set()
    for err in exc.errors():
        loc = err.get("loc") or ()
        field = str(loc[0]) if loc else None
        if field in seen:
            continue
        kind = err.get("type", "")
        if kind == "missing" or (field in meta and meta[field] is None and field in _REQUIRED):
            rule, msg = "required", "required field is missing or empty"
        elif field == "type" and kind == "literal_error":
            rule, msg = "taxonomy", f"{meta.get('type')!r} is not in the taxonomy {err.get('ctx', {}).get('expected', '')}"
        elif field == "confidence" and kind == "literal_error":
            rule, msg = "confidence", f"{meta.get('confidence')!r} is not one of 'high', 'medium', 'low'"
        elif kind.startswith("date_"):
            rule, msg = "date", err["msg"]
        elif kind == "string_too_short":
            rule, msg = "required", "required field is empty"
        else:
            rule, msg = "field-type", err["msg"]
            if len(loc) > 1:
                msg = f"item {loc[1]}: {msg}"
        if field is not None:
            seen.add(field)
        issues.append(Issue(path, field, rule, msg))
    return issues


def _check_version(meta: dict[str, Any], path: str | None, target_version: int | None) -> list[Issue]:
    version = meta.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        return []  # reported by the model check
    if target_version is not None and version != target_version:
        return [Issue(path, "schema_version", "schema_version", f"is {version}, expected {target_version}")]
    if version > CURRENT_SCHEMA_VERSION or version < 0:
        return [
            Issue(path, "schema_version", "schema_version", f"{version} is not a version this package reads (0..{CURRENT_SCHEMA_VERSION})")
        ]
    return []


def _index_title(meta: dict[str, Any], path: str | None) -> list[Issue]:
    """``name`` is the INDEX title: refuse what one INDEX line cannot hold, so the entry round-trips."""
    name = meta.get("name")
    problem = title_problem(name) if isinstance(name, str) and name else None
    return [Issue(path, "name", "index-title", f"{name!r} {problem}")] if problem else []


def _length_warnings(meta: dict[str, Any], path: str | None) -> list[Issue]:
    out = []
    name, desc = meta.get("name"), meta.get("description")
    if isinstance(name, str) and len(name) > NAME_MAX:
        out.append(Issue(path, "name", "name-length", f"{len(name)} chars; keep it near {NAME_MAX}", "warning"))
    if isinstance(desc, str) and len(desc) > DESCRIPTION_MAX:
        out.append(
            Issue(path, "description", "description-length", f"{len(desc)} chars; keep it near {DESCRIPTION_MAX}", "warning")
        )
    return out


def validate_note_meta(
    meta: dict[str, Any],
    *,
    filename: str | None = None,
    path: str | Path | None = None,
    target_version: int | None = CURRENT_SCHEMA_VERSION,
) -> list[Issue]:
    """Check an atomic note's frontmatter (and filename, if given).

    ``target_version=None`` accepts any readable version (for reading old files).

    >>> [i.rule for i in validate_note_meta({"type": "feedback"}, filename="feedback_x.md")][:1]
    ['required']
    """
    where = str(path) if path is not None else filename
    issues: list[Issue] = []
    from pydantic import ValidationError as PydanticValidationError  # noqa: PLC0415 - writes and lint only

    from ._models import NoteMeta  # noqa: PLC0415

    try:
        NoteMeta.model_validate(meta)
    except PydanticValidationError as exc:
        issues.extend(_map_pydantic(exc, meta, where))
    issues.extend(_check_version(meta, where, target_version))
    issues.extend(_index_title(meta, where))
    if filename is not None:
        issues.extend(_check_note_filename(filename, meta, where))
    issues.extend(_length_warnings(meta, where))
    return issues


def _check_note_filename(filename: str, meta: dict[str, Any], where: str | None) -> list[Issue]:
    m = NOTE_FILENAME.match(filename)
    if m is None:
        return [
            Issue(where, "filename", "filename", "must match {type}_{topic}.md or {type}_{YYYY[-qN]}_{topic}.md (lowercase snake_case)")
        ]
    if m.group("type") not in NOTE_TYPES:
        return [Issue(where, "filename", "filename", f"filename type {m.group('type')!r} is not in the taxonomy")]
    declared = meta.get("type")
    if isinstance(declared, str) and declared in NOTE_TYPES and declared != m.group("type"):
        return [
            Issue(where, "type", "filename-type", f"filename says {m.group('type')!r} but frontmatter type is {declared!r}")
        ]
    return []


def validate_wiki_meta(
    meta: dict[str, Any],
    *,
    filename: str | None = None,
    path: str | Path | None = None,
    target_version: int | None = CURRENT_SCHEMA_VERSION,
) -> list[Issue]:
    """Check a wiki page's frontmatter (and filename, if given)."""
    where = str(path) if path is not None else filename
    issues: list[Issue] = []
    from pydantic import ValidationError as PydanticValidationError  # noqa: PLC0415 - writes and lint only

    from ._models import WikiMeta  # noqa: PLC0415

    try:
        WikiMeta.model_validate(meta)
    except PydanticValidationError as exc:
        issues.extend(_map_pydantic(exc, meta, where))
    if "type" not in meta:
        issues.append(Issue(where, "type", "required", "required field is missing (always wiki_page)"))
    issues.extend(_check_version(meta, where, target_version))
    issues.extend(_index_title(meta, where))
    if filename is not None and (filename.startswith("INDEX") or not WIKI_FILENAME.match(filename)):
        issues.append(Issue(where, "filename", "filename", "must match {topic}.md or {topic}_{YYYY}.md (lowercase snake_case)"))
    sources = meta.get("sources")
    if isinstance(sources, list):
        for s in sources:
            if isinstance(s, str) and not s.startswith("raw/"):
                issues.append(Issue(where, "sources", "wiki-sources", f"{s!r} does not point to raw/", "warning"))
    issues.extend(_length_warnings(meta, where))
    return issues


def raise_first_error(issues: list[Issue]) -> None:
    """Raise the first error-severity issue as a :class:`ValidationError`."""
    for issue in issues:
        if issue.severity == "error":
            raise ValidationError(issue.message, path=issue.path, field=issue.field, rule=issue.rule)
