"""Input preparation every backend shares, so all apply one rule set (one conformance suite)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
else:  # bound on first use (see _lazy): keyword search and listing never import numpy
    from ._lazy import lazy_module

    np = lazy_module("numpy", globals(), "np")

from ..exceptions import ValidationError
from ._embed import Embedder
from ._models import Hit, Memory, Scope, ScopeFilter, check_content, check_id, check_metadata, check_ttl
from ._scoring import Calibration, held_signals, keyword_score, semantic_score

__all__ = ["check_no_secrets", "check_prune_target", "memory_from_row", "check_scope", "check_scope_filter", "embed_texts",
           "keyword_hits", "prepare_edit", "prepare_new", "semantic_hits"]


def check_no_secrets(content: str | None, metadata: Mapping[str, Any] | None, *, record: str | None = None,
                     scope: object | None = None) -> None:
    """:func:`._secrets.check_no_secrets`, whose ~40 patterns compile on the first write, not in every read."""
    from ._secrets import check_no_secrets as check

    check(content, metadata, record=record, scope=scope)


def check_scope(scope: object) -> Scope:
    if not isinstance(scope, Scope):
        raise ValidationError("scope must be a Scope(agent_id, user_id, ...)", field="scope", rule="scope")
    return scope


def check_scope_filter(scope: object) -> ScopeFilter:
    if scope is None:
        return ScopeFilter()
    if isinstance(scope, Scope):
        return scope.as_filter()
    if not isinstance(scope, ScopeFilter):
        raise ValidationError("scope must be a ScopeFilter", field="scope", rule="scope")
    return scope


def check_prune_target(scope: object, keywords: str | None, expired_only: bool) -> ScopeFilter:
    """The scope filter of a prune, refusing one that would empty the whole store."""
    sf = check_scope_filter(scope)
    if not sf.items() and not keywords and not expired_only:
        raise ValidationError(
            "prune needs a scope field, keywords or expired_only; it never empties the whole store",
            field="scope",
            rule="prune-target",
        )
    return sf


def prepare_new(
    content: object,
    metadata: object,
    scope: object,
    ttl_ms: object,
    *,
    now: float | None = None,
    memory_id: object = None,
) -> Memory:
    """Validate and secret-check one new memory; nothing is written if this raises.

    ``memory_id`` lets a caller choose the id (a UUID) before the write, so a record
    can name itself in its own content (ATP's identity line) with no edit round trip.
    """
    mid = None if memory_id is None else check_id(memory_id)
    text = check_content(content)
    meta = check_metadata(metadata)
    sc = check_scope(scope)
    ttl = check_ttl(ttl_ms)
    check_no_secrets(text, meta, scope=sc)
    return Memory.new(text, meta, sc, ttl_ms=ttl, now=time.time() if now is None else now, memory_id=mid)


def prepare_edit(
    current: Memory, content: object, metadata: object, ttl_ms: object, *, unset: object, now: float
) -> Memory:
    """The edited memory (not yet stored). ``metadata`` replaces the old object; ``stored_at`` is kept."""
    new_content = current.content if content is None else check_content(content)
    if metadata is None:
        new_meta = current.metadata
    else:
        new_meta = check_metadata(metadata)
        if "stored_at" in current.metadata:
            new_meta.setdefault("stored_at", current.metadata["stored_at"])
    if ttl_ms is unset:
        expires = current.expires_at
    else:
        ttl = check_ttl(ttl_ms)
        expires = None if ttl is None else now + ttl / 1000.0
    check_no_secrets(new_content if content is not None else None, new_meta if metadata is not None else None, record=current.id)
    return Memory(
        id=current.id,
        content=new_content,
        metadata=new_meta,
        agent_id=current.agent_id,
        user_id=current.user_id,
        org_id=current.org_id,
        workspace_id=current.workspace_id,
        created_at=current.created_at,
        updated_at=now,
        expires_at=expires,
        deleted_at=None,
    )


def embed_texts(embedder: Embedder, texts: Sequence[str], *, progress: Any = None, batch: int = 64) -> np.ndarray:
    """Embed with any :class:`Embedder` (only ``embed_batch`` is assumed), reporting progress."""
    out = np.empty((len(texts), embedder.dimension), dtype=np.float32)
    for start in range(0, len(texts), batch):
        chunk = list(texts[start : start + batch])
        vecs = np.asarray(embedder.embed_batch(chunk), dtype=np.float32)
        if vecs.shape != (len(chunk), embedder.dimension):
            raise ValidationError(
                f"embedder {embedder.model_id} returned shape {vecs.shape}", field="embedder", rule="dimension"
            )
        out[start : start + len(chunk)] = vecs
        if progress is not None:
            progress(len(chunk))
    return out


def metadata_matches(metadata: Mapping[str, Any], filters: Mapping[str, Any]) -> bool:
    """Equality on top-level keys, type-strict (``1`` is not ``True`` is not ``"1"``)."""
    for key, want in filters.items():
        if key not in metadata:
            return False
        have = metadata[key]
        if type(have) is not type(want) or have != want:
            return False
    return True


def given_vectors(
    vectors: Mapping[str, Any] | None, live: Sequence[Memory], dimension: int
) -> dict[str, np.ndarray]:
    """The caller's vectors for ``live`` memories (``load(vectors=...)``), checked: right dimension, finite, unit length.

    The caller vouches that they come from the store's own embedder (``import_jsonl``
    passes only vectors exported under the same model id and for the same content).
    """
    if not vectors:
        return {}
    out: dict[str, np.ndarray] = {}
    for m in live:
        v = vectors.get(m.id)
        if v is None:
            continue
        arr = np.asarray(v, dtype=np.float32).reshape(-1)
        if arr.shape != (dimension,):
            raise ValidationError(f"the vector of {m.id} has {arr.size} values, not {dimension}", field="vector",
                                  rule="dimension", record=m.id)
        norm = float(np.linalg.norm(arr))
        if not np.isfinite(arr).all() or abs(norm - 1.0) > 1e-3:
            raise ValidationError(f"the vector of {m.id} is not a finite unit vector", field="vector",
                                  rule="unit-vector", record=m.id)
        out[m.id] = arr
    return out


def memory_from_row(row: Sequence[Any]) -> Memory:
    """A memory from a SQL row of ``seq, id, content, metadata (JSON text), scope x4, created, updated, expires, deleted``."""
    return Memory(
        id=row[1],
        content=row[2],
        metadata=json.loads(row[3]),
        agent_id=row[4],
        user_id=row[5],
        org_id=row[6],
        workspace_id=row[7],
        created_at=row[8],
        updated_at=row[9],
        expires_at=row[10],
        deleted_at=row[11] or None,
    )


def keyword_hits(query: str, idfs: Mapping[str, float], found: Sequence[tuple[float, Memory]], cal: Calibration) -> list[Hit]:
    """``search``'s hits from ``(keyword evidence, memory)`` in FTS5's order: each scored by
    :func:`~._scoring.keyword_score` of its evidence and of what it holds of the query
    (:func:`~._scoring.held_signals` over the backend's ``idfs``), whatever the other hits are."""
    held = held_signals(query, idfs, [m.content for _, m in found]) if found else []
    return [Hit(m, keyword_score(e, u, n, cal)) for (e, m), (u, n) in zip(found, held, strict=True)]


def semantic_hits(query: str, idfs: Callable[[], Mapping[str, float]], found: Sequence[tuple[float, Memory]],
                  cal: Calibration) -> list[Hit]:  # fmt: skip
    """``recall``'s hits from ``(cosine, memory)``, nearest first: each scored by
    :func:`~._scoring.semantic_score` of its cosine and of what it holds of the query (the hybrid
    score map; ``idfs`` gives the backend's IDFs, asked only when a hit's words are read), whatever
    the other hits are. A clipped cosine for an embedder without fitted constants."""
    if cal.raw_semantic or not found:
        return [Hit(m, semantic_score(c, cal)) for c, m in found]
    held = held_signals(query, idfs(), [m.content for _, m in found])
    return [Hit(m, semantic_score(c, cal, u, n)) for (c, m), (u, n) in zip(found, held, strict=True)]
