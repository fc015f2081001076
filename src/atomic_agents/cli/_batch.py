"""``memory remember --jsonl`` and ``memory recall --jsonl``: many records, one process, one model load.

Input: one JSON object per line (blank lines skipped), from a file or ``-`` (stdin).
Every line is read and checked (JSON, known fields, content, metadata, scope,
TTL, secrets; query, limit, filters) before the store is opened, each as it is
read: the first bad line raises a typed error naming the line and the field
(without reading further), and nothing is stored or answered. A refused secret
is named by its pattern, never echoed.

Output: JSON lines in input order, each the shape of the single command's answer.
``remember``'s lines go in as one transaction with one embedding pass over all
contents (the store's bulk ``load``, which takes a scope and TTL per memory);
``recall`` answers each query in turn from one open store.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from typing import IO, Any

from .._json import to_jsonable
from .._text import decode_lines, open_input, parse_json
from ..exceptions import EncodingError, SecretRejectedError, ValidationError
from ..memory._secrets import find_secret

__all__ = ["read_jsonl", "recall_requests", "remember_records", "write_jsonl"]

SCOPE_FIELDS = ("agent_id", "user_id", "org_id", "workspace_id")
REMEMBER_FIELDS = frozenset({"content", "fact", "metadata", "ttl_ms", *SCOPE_FIELDS})
RECALL_FIELDS = frozenset({"query", "topic", "limit", "top_k", "filters", *SCOPE_FIELDS})
_NAMEABLE = re.compile(r"[a-z_][a-z0-9_]{0,31}")  # a misspelt field name; anything else may be pasted text


def _source_name(source: str) -> str:
    return "<stdin>" if source == "-" else source


def _lines(source: str) -> Iterator[tuple[int, str | EncodingError]]:
    if source == "-":
        stream: IO[Any] = getattr(sys.stdin, "buffer", sys.stdin)
        yield from decode_lines(stream, path="<stdin>")
        return
    with open_input(source) as fh:
        yield from decode_lines(fh, path=source)


def read_jsonl(source: str, allowed: frozenset[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for every non-blank line, as it is read; the first bad line raises, naming it.

    A generator: the callers check each line's fields before the next is read, so a bad first
    line is refused at once, not after the whole input (an endless ``yes`` pipe) has been read.
    """
    name = _source_name(source)
    for lineno, line in _lines(source):
        if isinstance(line, EncodingError):
            raise line  # names the file and the line
        if not line.strip():
            continue
        data = parse_json(line, path=name, prefix=f"line {lineno}: ", rule="jsonl")
        if not isinstance(data, dict):
            raise ValidationError(f"line {lineno}: not a JSON object", path=name, rule="jsonl")
        for key in data:
            if key not in allowed:  # a key is named only if it looks like a field name, not like pasted text
                shown = key if _NAMEABLE.fullmatch(key) and find_secret(key) is None else None
                raise ValidationError(
                    f"line {lineno}: unknown field {shown!r}" if shown else f"line {lineno}: an unknown field",
                    path=name, field=shown, rule="jsonl",
                )
        yield lineno, data


def _at_line(exc: ValidationError, name: str, lineno: int) -> ValidationError:
    """The same refusal, naming the input line (a secret by its pattern only)."""
    if isinstance(exc, SecretRejectedError):
        return SecretRejectedError(exc.pattern, field=exc.field or "content", path=f"{name}:{lineno}")
    return ValidationError(f"line {lineno}: {exc.message}", path=name, field=exc.field, rule=exc.rule, record=exc.record)


def _pick(data: dict[str, Any], lineno: int, name: str, *keys: str) -> Any:
    """The value of a field that has two spellings (``content`` / eden's ``fact``); a line giving both is refused."""
    given = [k for k in keys if k in data]
    if len(given) > 1:
        raise ValidationError(f"line {lineno}: give {given[0]} or {given[1]}, not both", path=name, field=given[0], rule="jsonl")
    return data[given[0]] if given else None


def _scope_args(data: dict[str, Any], defaults: dict[str, str | None], lineno: int, name: str) -> list[Any]:
    values = []
    for f in SCOPE_FIELDS:
        v = data.get(f, defaults.get(f))
        if v is None and f in ("agent_id", "user_id"):
            raise ValidationError(f"line {lineno}: no {f} (give it on the line or with --{f.replace('_', '-')})",
                                  path=name, field=f, rule="required")
        values.append(v)
    return values


def remember_records(source: str, defaults: dict[str, Any]) -> list[Any]:
    """The checked, not yet stored memories of a ``remember --jsonl`` input, in input order."""
    import time

    from ..memory._base import prepare_new
    from ..memory._models import Scope

    name, now = _source_name(source), time.time()
    mems = []
    for lineno, data in read_jsonl(source, REMEMBER_FIELDS):
        content = _pick(data, lineno, name, "content", "fact")
        if content is None:
            raise ValidationError(f"line {lineno}: no content", path=name, field="content", rule="required")
        try:
            meta = data.get("metadata")
            if meta is not None and not isinstance(meta, dict):
                raise ValidationError("must be a JSON object", field="metadata", rule="json")
            ttl = data.get("ttl_ms", defaults.get("ttl_ms"))
            scope = Scope.resolve(*_scope_args(data, defaults, lineno, name))
            mems.append(prepare_new(content, meta, scope, ttl, now=now))
        except ValidationError as exc:
            raise (exc if exc.message.startswith(f"line {lineno}:") else _at_line(exc, name, lineno)) from None
    return mems


def recall_requests(source: str, defaults: dict[str, Any]) -> list[tuple[str, Any, int, dict[str, Any] | None]]:
    """``(query, scope, limit, filters)`` per line of a ``recall --jsonl`` input, every one checked."""
    from ..memory._base import check_scope
    from ..memory._models import Scope, check_filters, check_limit, check_query

    name = _source_name(source)
    out = []
    for lineno, data in read_jsonl(source, RECALL_FIELDS):
        query = _pick(data, lineno, name, "query", "topic")
        if query is None:
            raise ValidationError(f"line {lineno}: no query", path=name, field="query", rule="required")
        try:
            limit = _pick(data, lineno, name, "limit", "top_k")
            filters = data.get("filters", defaults.get("filters"))
            if filters is not None and not isinstance(filters, dict):
                raise ValidationError("must be a JSON object", field="filters", rule="json")
            scope = check_scope(Scope.resolve(*_scope_args(data, defaults, lineno, name)))
            out.append((check_query(query), scope, check_limit(defaults["limit"] if limit is None else limit),
                        check_filters(filters) or None))
        except ValidationError as exc:
            raise (exc if exc.message.startswith(f"line {lineno}:") else _at_line(exc, name, lineno)) from None
    return out


def write_jsonl(rows: list[Any]) -> None:
    """One compact JSON object per line (also at a terminal: these are records, not a report)."""
    sys.stdout.write("".join(json.dumps(to_jsonable(r), ensure_ascii=False) + "\n" for r in rows))
    sys.stdout.flush()
