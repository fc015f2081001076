"""Export and import memories as JSONL: one memory per line, every field, any backend.

A backup includes forgotten and expired memories (they are part of the store's
history). By default vectors are not exported: the importing store embeds with its
own model. ``with_vectors=True`` adds each memory's vector, labelled with the model
id, the dimension and the hash of the content it was computed from::

    "vector": {"model": "all-MiniLM-L6-v2-onnx-int8", "dimension": 384,
               "content_hash": "...", "f32": "<base64 of little-endian float32>"}

An import into a store with the same model (and dimension) uses them and embeds
nothing; under another model, or where the content no longer has that hash, the
memory is re-embedded and the import says how many (``details``).

>>> n = export_jsonl(store, "backup.jsonl", with_vectors=True)  # doctest: +SKIP
>>> imported, skipped = import_jsonl(other, "backup.jsonl")     # doctest: +SKIP
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from .._text import decode_lines, open_input, parse_json
from ..exceptions import EmbedderMismatchError, EncodingError, SecretRejectedError, StoreError, ValidationError
from ._base import check_scope_filter
from ._embed import content_hash
from ._models import Memory, ScopeFilter
from ._store import MemoryStore, Progress

if TYPE_CHECKING:
    import numpy as np
else:  # bound on first use (see _lazy): an export without vectors never imports numpy
    from ._lazy import lazy_module

    np = lazy_module("numpy", globals(), "np")

__all__ = ["export_jsonl", "import_jsonl"]


def export_jsonl(
    store: MemoryStore,
    target: str | os.PathLike[str] | IO[str],
    scope: ScopeFilter | None = None,
    *,
    with_vectors: bool = False,
    details: dict[str, Any] | None = None,
) -> int:
    """Write every memory in ``scope`` to ``target`` (path or text file); returns the count.

    A path is written to a temporary file beside it and renamed, so a crash never leaves half
    a backup; a path that is a folder, or whose folder does not exist, is a ``ValidationError``
    naming it, and a failed write a ``StoreError`` naming it (not the temporary file).
    ``with_vectors``: add each memory's vector (see the module doc). Vectors are those of
    the store's model, so a store whose vectors come from another model than its embedder's
    is refused (``EmbedderMismatchError``): the backup would carry none and silently re-embed
    everything on restore. ``details`` (a dict) gets ``vectors``: how many lines carry one.
    """
    sf = check_scope_filter(scope)
    if with_vectors:
        stored = store.health().stored_embedder
        if stored is not None and stored != store.embedder.model_id:
            raise EmbedderMismatchError(
                f"this store's vectors come from {stored!r}, not {store.embedder.model_id!r}: export them with "
                f"--embedder naming that model, or run `atomic-agents memory reindex` first",
                stored=stored, current=store.embedder.model_id,
            )  # fmt: skip
    out = details if details is not None else {}
    if hasattr(target, "write"):
        return _write(store, target, sf, with_vectors, out)  # type: ignore[arg-type]
    path = Path(target)
    if path.is_dir():
        raise ValidationError(f"{path}: is a folder; name the file to write", field="output", rule="path")
    if not path.parent.is_dir():
        raise ValidationError(f"{path}: its folder {path.parent} does not exist", field="output", rule="path")
    if _is_store_file(store, path):
        raise ValidationError(f"{path}: is one of this store's own files; name another file to write",
                              field="output", rule="path")  # fmt: skip
    # A fresh name, created (O_EXCL) and never through a symlink planted there (O_NOFOLLOW).
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{time.monotonic_ns()}.tmp")
    created = False
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o666)
        created = True
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            n = _write(store, fh, sf, with_vectors, out)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        created = False
    except OSError as exc:
        raise StoreError(f"cannot write {path}: {exc.strerror or exc}") from exc
    finally:
        if created:
            with contextlib.suppress(OSError):
                tmp.unlink()
    return n


def _is_store_file(store: MemoryStore, path: Path) -> bool:
    """Whether ``path`` is one of the store's own files (``own_files``: its database, journals,
    snapshot, graph): an export there would replace the store, or part of it, with its backup."""
    own = getattr(store, "own_files", None)
    if own is None:
        return False  # a server store (PostgreSQL) has no file here
    try:
        real = path.resolve()
        for f in own():
            if f.resolve() == real or (real.exists() and f.exists() and os.path.samefile(real, f)):
                return True  # that file, another spelling of it, or a hard link to it
    except (OSError, RuntimeError):
        return False
    return False


def _write(store: MemoryStore, fh: IO[str], scope: ScopeFilter, with_vectors: bool, details: dict[str, Any]) -> int:
    n = 0
    details["vectors"] = 0
    if not with_vectors:
        for mem in store.dump(scope):
            fh.write(json.dumps(mem.to_dict(), ensure_ascii=False) + "\n")
            n += 1
        return n
    model, dim = store.embedder.model_id, store.embedder.dimension
    batch: list[Memory] = []

    def flush() -> None:
        # Only a vector whose row still holds the content read here: an edit between the two reads
        # must not pair this content with the vector of the new one (the line goes without a vector).
        hashes = {m.id: content_hash(m.content) for m in batch}
        vecs = store.stored_vectors(list(hashes), hashes=hashes)
        for mem in batch:
            row: dict[str, Any] = mem.to_dict()
            vec = vecs.get(mem.id)
            if vec is not None:
                details["vectors"] += 1
                row["vector"] = {"model": model, "dimension": dim, "content_hash": hashes[mem.id],
                                 "f32": base64.b64encode(np.asarray(vec, dtype="<f4").tobytes()).decode("ascii")}
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
        batch.clear()

    for mem in store.dump(scope):
        batch.append(mem)
        n += 1
        if len(batch) >= 500:
            flush()
    flush()
    return n


def _vector(data: object, lineno: int, source: str) -> tuple[str, int, str, bytes] | None:
    """``(model, dimension, content hash, float32 bytes)`` of a record's ``vector`` field, checked for form."""
    if data is None:
        return None

    def bad(why: str) -> ValidationError:
        return ValidationError(f"line {lineno}: vector {why}", path=source, field="vector", rule="jsonl")

    if not isinstance(data, dict):
        raise bad("is not a JSON object")
    model, dim, h, f32 = data.get("model"), data.get("dimension"), data.get("content_hash"), data.get("f32")
    if not isinstance(model, str) or not model or len(model) > 200:
        raise bad("has no model id")
    if isinstance(dim, bool) or not isinstance(dim, int) or not 0 < dim <= 65536:
        raise bad("has no valid dimension")
    if not isinstance(h, str) or not isinstance(f32, str):
        raise bad("needs content_hash and f32 strings")
    try:
        raw = base64.b64decode(f32, validate=True)
    except (binascii.Error, ValueError):
        raise bad("f32 is not base64") from None
    if len(raw) != 4 * dim:
        raise bad(f"f32 holds {len(raw) // 4} values, not {dim}")
    arr = np.frombuffer(raw, dtype="<f4")  # every vector, used or not: a backup is checked whole
    if not np.isfinite(arr).all() or abs(float(np.linalg.norm(arr.astype(np.float64))) - 1.0) > 1e-3:
        raise bad("is not a finite unit vector")
    return model, dim, h, raw


def _records(fh: IO[str] | IO[bytes], source: str) -> Iterator[tuple[int, Memory, tuple[str, int, str, bytes] | None]]:
    """(line number, memory, vector) for every non-blank line; the first bad line raises, naming it.

    An id on two lines is refused, naming both: an export holds each memory once, so the file was
    joined or edited, and keeping either line would silently drop the other."""
    first_line: dict[str, int] = {}
    for lineno, line in decode_lines(fh, path=source):
        if isinstance(line, EncodingError):
            raise line  # names the file and the line; nothing has been written yet
        if not line.strip():
            continue
        data = parse_json(line, path=source, prefix=f"line {lineno}: ", rule="jsonl")
        if not isinstance(data, dict):
            raise ValidationError(f"line {lineno}: not a JSON object", path=source, rule="jsonl")
        try:
            mem = Memory.from_dict(data)
        except ValidationError as exc:
            raise ValidationError(f"line {lineno}: {exc.message}", path=source, field=exc.field, rule=exc.rule) from None
        seen = first_line.setdefault(mem.id, lineno)
        if seen != lineno:
            raise ValidationError(f"line {lineno}: the same id as line {seen}", path=source, field="id", rule="unique")
        yield lineno, mem, _vector(data.get("vector"), lineno, source)


def import_jsonl(
    store: MemoryStore,
    source: str | os.PathLike[str] | IO[str],
    *,
    progress: Progress | None = None,
    details: dict[str, Any] | None = None,
    name: str | None = None,
) -> tuple[int, int]:
    """Load an export into ``store``; ids already present are skipped. Returns ``(imported, skipped)``.

    ``source``: a path, or an open file (bytes, read as UTF-8, or text); ``name`` names it in
    errors (default: the path, or ``<stream>``).

    All or nothing: the whole file is read and every record checked (JSON, field
    types, finite non-negative times, secrets, scope ids, vector form) before
    anything is written; the first bad record raises :class:`ValidationError` naming its line.
    Exported vectors of the store's own model are used as they are; the rest is embedded.
    ``details`` (a dict, if given) receives ``with_vectors`` (records that carried one),
    ``vectors_reused``, ``reembedded`` and ``other_models`` (model ids not this store's).
    """
    from ._secrets import check_no_secrets

    if hasattr(source, "read"):
        name = name or "<stream>"
        records = list(_records(source, name))  # type: ignore[arg-type]
    else:
        name = name or str(source)
        with open_input(source) as fh:
            records = list(_records(fh, name))
    for lineno, mem, _ in records:
        try:
            check_no_secrets(mem.content, mem.metadata, record=mem.id, scope=mem)
        except SecretRejectedError as exc:
            raise SecretRejectedError(exc.pattern, field=exc.field or "content", record=mem.id, path=f"{name}:{lineno}") from None
    total = len(records)
    model, dim = store.embedder.model_id, store.embedder.dimension
    reuse: dict[str, np.ndarray] = {}
    carried, others = 0, set()
    for lineno, mem, vec in records:
        if vec is None:
            continue
        carried += 1
        v_model, v_dim, v_hash, raw = vec
        if v_model == model and v_dim != dim:  # this store's model never made it: the line was edited
            raise ValidationError(f"line {lineno}: vector has {v_dim} dimensions, not the {dim} of this store's model",
                                  path=name, field="vector", rule="jsonl")  # fmt: skip
        if v_model != model:
            others.add(v_model)
        elif v_hash == content_hash(mem.content) and mem.deleted_at is None:
            reuse[mem.id] = np.frombuffer(raw, dtype="<f4").astype(np.float32)
    if details is not None:
        live = sum(1 for _, m, _ in records if m.deleted_at is None)
        details.update(with_vectors=carried, vectors_reused=len(reuse), reembedded=max(0, live - len(reuse)),
                       other_models=sorted(others))
    return store.load([m for _, m, _ in records], progress=(lambda n, _t: progress(n, total)) if progress else None,
                      vectors=reuse)
