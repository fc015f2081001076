"""SQL fragments and row helpers shared by the SQLite store's modules."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


_COLS = (
    "m.seq, m.id, m.content, m.metadata, m.agent_id, m.user_id, m.org_id, m.workspace_id, "
    "m.created_at, m.updated_at, m.expires_at, m.deleted_at"
)
_LIVE = "m.deleted_at = 0 AND (m.expires_at IS NULL OR m.expires_at > ?)"
_SCOPE = "m.agent_id = ? AND m.user_id = ? AND m.org_id = ? AND m.workspace_id = ?"
_BY_ROWID_SCOPE = (_SCOPE + " AND " + _LIVE).replace("m.", "+m.")


def _tag_clause(filters: Mapping[str, Any]) -> tuple[str, list[Any]]:
    """Equality on scalar metadata keys via the ``memory_tags`` index."""
    sql, params = [], []
    for key, value in filters.items():
        if isinstance(value, (dict, list)):
            continue  # not indexable; checked in Python afterwards
        sql.append(" AND m.seq IN (SELECT seq FROM memory_tags WHERE key = ? AND value IS ? AND kind = ?)")
        params += [key, _bind(value), _json_kind(value)]
    return "".join(sql), params


def _filtered_source(filters: Mapping[str, Any]) -> tuple[str, str, list[Any]]:
    """FROM clause + extra WHERE for equality filters, *driven by* the tag index.

    CROSS JOIN fixes the join order: start from the (few) rows carrying the first
    filter's key/value, then check scope. Left to itself the planner walks every row
    of the scope index and probes the filter, which is linear in the scope's size.
    """
    scalars = [(k, v) for k, v in filters.items() if not isinstance(v, (dict, list))]
    if not scalars:
        return "memories m", "", []
    frm = "memory_tags t0"
    where, params = "", []
    for i, (key, value) in enumerate(scalars):
        if i:
            frm += f" CROSS JOIN memory_tags t{i} ON t{i}.seq = t0.seq"
        where += f" AND t{i}.key = ? AND t{i}.value IS ? AND t{i}.kind = ?"
        params += [key, _bind(value), _json_kind(value)]
    return frm + " CROSS JOIN memories m ON m.seq = t0.seq", where, params


def _bind(value: Any) -> Any:
    """The ``memory_tags.value`` a filter value is stored as (a JSON null is ``''`` of kind null)."""
    if value is None:
        return ""
    return int(value) if isinstance(value, bool) else value


def _json_kind(value: Any) -> str:
    """The ``json_each`` type name SQLite gives this (JSON-normalised) Python value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "real"
    return "text"


def _needs_python_check(filters: Mapping[str, Any]) -> bool:
    return any(isinstance(v, (dict, list)) for v in filters.values())
