"""SQL fragments, DSN helpers and row conversions of the PostgreSQL store."""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ._models import ScopeFilter
from ._scoring import keyword_terms

__all__ = ["is_dsn", "redact_dsn"]


_COLS = (
    "m.seq, m.id, m.content, m.metadata, m.agent_id, m.user_id, m.org_id, m.workspace_id, "
    "m.created_at, m.updated_at, m.expires_at, m.deleted_at"
)
_LIVE = "m.deleted_at = 0 AND (m.expires_at IS NULL OR m.expires_at > %s)"
_SCOPE = "m.agent_id = %s AND m.user_id = %s AND m.org_id = %s AND m.workspace_id = %s"
_INSTALL = "install the PostgreSQL extra: pip install 'atomic-agents-vault[postgres]'"


def is_dsn(target: object) -> bool:
    """Whether ``target`` names a PostgreSQL server (``postgresql://`` or ``postgres://``)."""
    from ._store import _is_dsn

    return isinstance(target, str) and _is_dsn(target)


def redact_dsn(dsn: str) -> str:
    """The DSN with any password replaced by ``***`` (safe to print)."""
    try:
        from urllib.parse import urlsplit, urlunsplit

        parts = urlsplit(dsn)
        netloc = parts.netloc
        if "@" in netloc:
            cred, host = netloc.rsplit("@", 1)
            user = cred.split(":", 1)[0]
            netloc = f"{user}:***@{host}" if ":" in cred else f"{user}@{host}"
        query = "&".join("password=***" if q.lower().startswith("password=") else q for q in parts.query.split("&") if q)
        return urlunsplit((parts.scheme, netloc, parts.path, query, ""))
    except ValueError:
        return "postgresql://***"


def _fold(text: str) -> str:
    """Lower case, diacritics removed (``café`` -> ``cafe``): what the tsvector is built from."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch)).lower()


def _tsquery(query: str) -> str | None:
    """A ``to_tsquery`` string matching any of the query's words (``None`` if it has none).

    Words are ``\\w+`` runs (no quotes, no operators), each quoted as one term.
    """
    terms = keyword_terms(_fold(query))
    return " | ".join(f"'{t}'" for t in terms) if terms else None


def _no_nul(value: Any) -> Any:
    """A copy for the JSONB column, which cannot hold ``\\u0000``: NULs become U+FFFD (filters re-check exactly)."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, dict):
        return {_no_nul(k): _no_nul(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_no_nul(v) for v in value]
    return value


def _meta_params(metadata: Mapping[str, Any]) -> tuple[str, str]:
    """(exact JSON text, JSONB text) for one metadata object."""
    text = json.dumps(metadata, ensure_ascii=False)
    return text, (json.dumps(_no_nul(metadata), ensure_ascii=False) if "\\u0000" in text else text)


def _needs_python_check(filters: Mapping[str, Any]) -> bool:
    """JSONB ``@>`` is looser than the shared rule for numbers, nested values and NUL-bearing text."""
    for v in filters.values():
        if isinstance(v, (dict, list, float)) or (isinstance(v, int) and not isinstance(v, bool)):
            return True
        if isinstance(v, str) and "\x00" in v:
            return True
    return False


def _filter_sql(filters: Mapping[str, Any]) -> tuple[str, list[Any]]:
    if not filters:
        return "", []
    return " AND m.meta @> %s::jsonb", [json.dumps(_no_nul(dict(filters)), ensure_ascii=False)]


def _scope_filter_sql(scope: ScopeFilter) -> tuple[str, list[Any]]:
    items = scope.items()  # field names come from ScopeFilter, never from the caller
    return "".join(f" AND m.{k} = %s" for k, _ in items), [v for _, v in items]


def _np(vec: Any) -> np.ndarray:
    """A stored vector as float32 numpy (pgvector's adapter returns ``Vector`` or ndarray by version)."""
    return np.asarray(vec.to_numpy() if hasattr(vec, "to_numpy") else vec, dtype=np.float32)


def _cosine(distance: Any) -> float:
    d = float(distance) if distance is not None else float("nan")
    return 0.0 if d != d else 1.0 - d  # NaN (a zero vector) is "unrelated"


def _lock_in_order(cur: Any, where: str, params: Sequence[Any], mode: str) -> list[int]:
    """Lock the rows of ``memories m`` matching ``where`` in ``seq`` order (``FOR UPDATE`` to delete them,
    ``FOR NO KEY UPDATE`` to change them); returns their seqs.

    Two writers locking overlapping rows each in its own order can each hold a row the other
    waits for. ``ORDER BY`` puts the lock step after the sort, so every writer takes them in one
    order; a row changed meanwhile is re-checked against ``where`` (READ COMMITTED) and one
    erased meanwhile is left out.
    """
    cur.execute(f"SELECT m.seq FROM memories m WHERE {where} ORDER BY m.seq FOR {mode}", list(params))
    return [int(r[0]) for r in cur.fetchall()]
