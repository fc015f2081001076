"""The values that cross the :class:`MemoryStore` seam: scopes, memories, hits, reports.

All are frozen dataclasses; backends take and return these and nothing of
their own. Input checks that every backend must apply identically (types,
caps, limits, legacy aliases) live here too, so the conformance suite tests
one rule set.
"""

from __future__ import annotations

import math
import os
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..exceptions import ValidationError

__all__ = [
    "MAX_CONTENT_CHARS",
    "MAX_LIMIT",
    "MAX_METADATA_BYTES",
    "Health",
    "Hit",
    "Memory",
    "PruneReport",
    "Scope",
    "ScopeFilter",
]

#: Largest ``content`` accepted, in characters. A memory is a note, not a file dump
#: (the spec's "raw command output" is what not to store); 32k chars is ~8k tokens.
MAX_CONTENT_CHARS = 32_000
#: Largest metadata object accepted, as UTF-8 JSON bytes.
MAX_METADATA_BYTES = 64_000
#: Largest ``limit`` a search accepts; beyond it a caller wants an export, not a search.
MAX_LIMIT = 1_000
# Metadata shape: JSON nested at most this deep, integers in SQLite's 64-bit range (they are
# indexed and filtered there). Past either, a ValidationError, never a RecursionError/OverflowError.
MAX_METADATA_DEPTH = 32
_INT64 = (-(2**63), 2**63 - 1)
#: Largest ``ttl_ms``: 100 years. Bigger values are almost certainly a unit mistake.
MAX_TTL_MS = 100 * 365 * 24 * 3600 * 1000
_MAX_SCOPE_CHARS = 512

_DEFAULT_ORG = "default"
_DEFAULT_WORKSPACE = "default"


def _check_utf8(value: str, name: str) -> str:
    """Refuse a string that is not text: a lone surrogate (``"\\ud800"`` in JSON) cannot be stored or indexed."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValidationError(
            f"{name} holds a lone surrogate (U+{ord(value[exc.start]):04X}) at character {exc.start}: not UTF-8 text",
            field=name, rule="encoding",
        ) from None  # fmt: skip
    return value


def _scope_value(name: str, value: object, *, required: bool) -> str | None:
    if value is None:
        if required:
            raise ValidationError(f"{name} is required", field=name, rule="scope")
        return None
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(f"{name} must be a non-empty string", field=name, rule="scope")
    if len(value) > _MAX_SCOPE_CHARS or "\x00" in value:
        raise ValidationError(f"{name} is too long or has a NUL byte", field=name, rule="scope")
    return _check_utf8(value, name)


@dataclass(frozen=True)
class Scope:
    """Who a memory belongs to. Reads and writes always carry a full scope.

    ``org_id`` / ``workspace_id`` default to ``EDEN_ORG_ID`` / ``EDEN_WORKSPACE_ID``
    (then ``"default"``), as eden-memory does. Workspace ids may contain ``/``.

    >>> Scope("builder", "alice", org_id="acme", workspace_id="acme/web").workspace_id
    'acme/web'
    """

    agent_id: str
    user_id: str
    org_id: str = None  # type: ignore[assignment]  # resolved from the environment
    workspace_id: str = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        _scope_value("agent_id", self.agent_id, required=True)
        _scope_value("user_id", self.user_id, required=True)
        org = self.org_id if self.org_id is not None else os.environ.get("EDEN_ORG_ID") or _DEFAULT_ORG
        ws = (
            self.workspace_id
            if self.workspace_id is not None
            else os.environ.get("EDEN_WORKSPACE_ID") or _DEFAULT_WORKSPACE
        )
        object.__setattr__(self, "org_id", _scope_value("org_id", org, required=True))
        object.__setattr__(self, "workspace_id", _scope_value("workspace_id", ws, required=True))

    @classmethod
    def resolve(
        cls, agent_id: str, user_id: str, org_id: str | None = None, workspace_id: str | None = None
    ) -> Scope:
        """Like the constructor, typed for optional org/workspace (``None`` = environment default)."""
        return cls(agent_id, user_id, org_id, workspace_id)  # type: ignore[arg-type]

    def key(self) -> tuple[str, str, str, str]:
        return (self.agent_id, self.user_id, self.org_id, self.workspace_id)

    def as_filter(self) -> ScopeFilter:
        return ScopeFilter(self.agent_id, self.user_id, self.org_id, self.workspace_id)


@dataclass(frozen=True)
class ScopeFilter:
    """A partial scope for housekeeping (``forget_expired``, ``prune``): ``None`` matches any.

    >>> ScopeFilter(agent_id="builder").matches(("builder", "u", "o", "w"))
    True
    """

    agent_id: str | None = None
    user_id: str | None = None
    org_id: str | None = None
    workspace_id: str | None = None

    def __post_init__(self) -> None:
        for name in ("agent_id", "user_id", "org_id", "workspace_id"):
            _scope_value(name, getattr(self, name), required=False)

    def items(self) -> list[tuple[str, str]]:
        return [
            (name, getattr(self, name))
            for name in ("agent_id", "user_id", "org_id", "workspace_id")
            if getattr(self, name) is not None
        ]

    def matches(self, key: tuple[str, str, str, str]) -> bool:
        want = (self.agent_id, self.user_id, self.org_id, self.workspace_id)
        return all(w is None or w == k for w, k in zip(want, key, strict=True))


@dataclass(frozen=True)
class Memory:
    """One stored memory. Times are unix seconds; ``deleted_at``/``expires_at`` ``None`` = not.

    >>> m = Memory.new("Deploy went green", {"goal_id": "g1"}, Scope("a", "u"), now=0.0)
    >>> m.to_dict()["metadata"]["goal_id"]
    'g1'
    """

    id: str
    content: str
    metadata: dict[str, Any]
    agent_id: str
    user_id: str
    org_id: str
    workspace_id: str
    created_at: float
    updated_at: float
    expires_at: float | None = None
    deleted_at: float | None = None

    @classmethod
    def new(
        cls,
        content: str,
        metadata: Mapping[str, Any] | None,
        scope: Scope,
        *,
        ttl_ms: int | None = None,
        now: float | None = None,
        memory_id: str | None = None,
    ) -> Memory:
        now = time.time() if now is None else now
        meta = dict(metadata or {})
        # eden-memory stamps stored_at into metadata; ATP's readers rely on it.
        meta.setdefault("stored_at", _iso(now))
        return cls(
            id=memory_id if memory_id is not None else str(uuid.uuid4()),
            content=content,
            metadata=meta,
            agent_id=scope.agent_id,
            user_id=scope.user_id,
            org_id=scope.org_id,
            workspace_id=scope.workspace_id,
            created_at=now,
            updated_at=now,
            expires_at=expiry(ttl_ms, now),
        )

    @property
    def scope(self) -> Scope:
        return Scope(self.agent_id, self.user_id, self.org_id, self.workspace_id)

    def scope_key(self) -> tuple[str, str, str, str]:
        return (self.agent_id, self.user_id, self.org_id, self.workspace_id)

    def is_live(self, now: float | None = None) -> bool:
        """Not soft-deleted and not expired: what get/recall/search may show."""
        now = time.time() if now is None else now
        return self.deleted_at is None and (self.expires_at is None or self.expires_at > now)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "content": self.content,
            "metadata": self.metadata,
            "agent_id": self.agent_id,
            "user_id": self.user_id,
            "org_id": self.org_id,
            "workspace_id": self.workspace_id,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "expires_at": self.expires_at,
            "deleted_at": self.deleted_at,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Memory:
        """Read an exported record back (used by ``import``); checks every field's type and range.

        Times must be finite, non-negative numbers (``updated_at``, ``expires_at`` and
        ``deleted_at`` may be null). Errors name the field, never echo its value.
        """
        if not isinstance(data, Mapping):
            raise ValidationError("not a JSON object", rule="import")
        for name in ("id", "content", "created_at"):
            if name not in data:
                raise ValidationError(f"{name} is missing", field=name, rule="import")
        raw_id = data["id"]
        try:
            if not isinstance(raw_id, str):
                raise ValueError
            mem_id = str(uuid.UUID(raw_id))
        except ValueError:
            raise ValidationError("id is not a UUID string", field="id", rule="import") from None
        created = _time(data, "created_at", required=True)
        assert created is not None
        updated = _time(data, "updated_at", required=False)
        deleted = _time(data, "deleted_at", required=False)
        return cls(
            id=mem_id,
            content=check_content(data["content"]),
            metadata=check_metadata(data.get("metadata")),
            agent_id=str(_scope_value("agent_id", data.get("agent_id"), required=True)),
            user_id=str(_scope_value("user_id", data.get("user_id"), required=True)),
            org_id=str(_scope_value("org_id", data.get("org_id"), required=True)),
            workspace_id=str(_scope_value("workspace_id", data.get("workspace_id"), required=True)),
            created_at=created,
            updated_at=updated if updated is not None else created,
            expires_at=_time(data, "expires_at", required=False),
            deleted_at=deleted or None,  # 0 is the store's "live", as in the SQL column
        )


def _time(data: Mapping[str, Any], name: str, *, required: bool) -> float | None:
    """A unix-seconds field of an import record: a finite number >= 0 (null if not required)."""
    value = data.get(name)
    if value is None:
        if required:
            raise ValidationError(f"{name} is missing", field=name, rule="import")
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValidationError(f"{name} must be a number (unix seconds)", field=name, rule="import")
    try:
        out = float(value)
    except OverflowError:  # an integer with hundreds of digits
        out = math.inf
    if not math.isfinite(out) or out < 0:
        raise ValidationError(f"{name} must be a finite, non-negative number (unix seconds)", field=name, rule="import")
    return out


@dataclass(frozen=True)
class Hit:
    """A search result: the memory and its score in [0, 1] (higher is closer).

    ``to_dict()`` is eden-memory's result shape ``{"id", "content", "metadata", "score"}``.
    """

    memory: Memory
    score: float

    @property
    def id(self) -> str:
        return self.memory.id

    @property
    def content(self) -> str:
        return self.memory.content

    @property
    def metadata(self) -> dict[str, Any]:
        return self.memory.metadata

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.memory.id,
            "content": self.memory.content,
            "metadata": self.memory.metadata,
            "score": round(self.score, 6),
        }


@dataclass(frozen=True)
class PruneReport:
    """What ``prune`` removed, or would remove on a dry run (the default)."""

    matched: int
    removed: int
    dry_run: bool
    hard: bool
    sample_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class Health:
    """``health()``: eden's ``status``/``total`` plus our counts, size and embedder."""

    status: str
    total: int
    live: int
    deleted: int
    expired: int
    backend: str
    path: str | None
    size_bytes: int
    schema_version: int
    embedder: str | None
    dimension: int | None
    stored_embedder: str | None
    needs_reindex: bool
    extra: dict[str, Any] = field(default_factory=dict)


# -- checks every backend applies --------------------------------------------------------


def check_content(content: object) -> str:
    if not isinstance(content, str):
        raise ValidationError("content must be a string", field="content", rule="type")
    if not content.strip():
        raise ValidationError("content is empty", field="content", rule="required")
    if len(content) > MAX_CONTENT_CHARS:
        raise ValidationError(
            f"content is {len(content)} characters; the cap is {MAX_CONTENT_CHARS}",
            field="content",
            rule="max-size",
        )
    if "\x00" in content:
        raise ValidationError("content has a NUL byte", field="content", rule="type")
    return _check_utf8(content, "content")


def check_metadata(metadata: object, *, field: str = "metadata") -> dict[str, Any]:
    """A JSON-normalised copy of ``metadata``; errors name ``field`` (``filters`` when it checks those)."""
    import json

    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise ValidationError(f"{field} must be a JSON object", field=field, rule="type")
    _check_shape(metadata, field)
    try:
        text = json.dumps(metadata, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValidationError(f"{field} is not plain JSON: {exc}", field=field, rule="type") from exc
    if len(_check_utf8(text, field).encode("utf-8")) > MAX_METADATA_BYTES:
        raise ValidationError(f"{field} is over {MAX_METADATA_BYTES} bytes as JSON", field=field, rule="max-size")
    return json.loads(text)  # a deep, JSON-normalised copy: the caller's dict stays theirs


def _check_shape(value: object, field: str = "metadata") -> None:
    """Depth and integer range, walked without recursion (a 100,000-deep list is refused, not a crash)."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, Mapping) or isinstance(v, (list, tuple)):
            if depth > MAX_METADATA_DEPTH:
                raise ValidationError(f"nested deeper than {MAX_METADATA_DEPTH} levels", field=field, rule="max-depth")
            children = v.values() if isinstance(v, Mapping) else v
            stack.extend((c, depth + 1) for c in children)
        elif isinstance(v, int) and not isinstance(v, bool) and not _INT64[0] <= v <= _INT64[1]:
            raise ValidationError("an integer outside the 64-bit range (-2**63 .. 2**63-1)", field=field, rule="range")


def check_limit(limit: object, *, name: str = "limit") -> int:
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise ValidationError(f"{name} must be an integer", field=name, rule="type")
    if not 1 <= limit <= MAX_LIMIT:
        raise ValidationError(f"{name} must be between 1 and {MAX_LIMIT}", field=name, rule="range")
    return limit


def check_flag(value: object, *, name: str) -> bool:
    """A switch such as ``rerank``: exactly ``True`` or ``False`` (``"false"`` would be truthy)."""
    if not isinstance(value, bool):
        raise ValidationError(f"{name} must be true or false, not {type(value).__name__}", field=name, rule="type")
    return value


def check_query(query: object) -> str:
    if not isinstance(query, str):
        raise ValidationError("query must be a string", field="query", rule="type")
    if not query.strip():
        raise ValidationError("query is empty", field="query", rule="required")
    if len(query) > MAX_CONTENT_CHARS:
        raise ValidationError("query is too long", field="query", rule="max-size")
    return _check_utf8(query, "query")


def check_ttl(ttl_ms: object) -> int | None:
    if ttl_ms is None:
        return None
    if isinstance(ttl_ms, bool) or not isinstance(ttl_ms, int):
        raise ValidationError("ttl_ms must be null or a positive integer", field="ttl_ms", rule="type")
    if not 0 < ttl_ms <= MAX_TTL_MS:
        raise ValidationError("ttl_ms must be positive (milliseconds) and under 100 years", field="ttl_ms", rule="range")
    return ttl_ms


def check_filters(filters: object) -> dict[str, Any]:
    if filters is None:
        return {}
    if not isinstance(filters, Mapping) or not all(isinstance(k, str) and k for k in filters):
        raise ValidationError("filters must map metadata keys to values", field="filters", rule="type")
    return check_metadata(filters, field="filters")


def check_id(memory_id: object) -> str:
    try:
        return str(uuid.UUID(str(memory_id)))
    except ValueError:
        raise ValidationError("id is not a UUID", field="id", rule="type") from None


def expiry(ttl_ms: int | None, now: float) -> float | None:
    return None if ttl_ms is None else now + ttl_ms / 1000.0


def _iso(ts: float) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
