"""Export and import memories as JSONL: one memory per line, every field, any backend.

A backup includes forgotten and expired memories (they are part of the store's
history); vectors are not exported, since the importing store embeds with its own model.

>>> n = export_jsonl(store, "backup.jsonl")            # doctest: +SKIP
>>> imported, skipped = import_jsonl(other, "backup.jsonl")  # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from .._text import decode_lines, parse_json
from ..exceptions import EncodingError, NotFoundError, SecretRejectedError, ValidationError
from ._base import check_scope_filter
from ._models import Memory, ScopeFilter
from ._store import MemoryStore, Progress

__all__ = ["export_jsonl", "import_jsonl"]


def export_jsonl(
    store: MemoryStore, target: str | os.PathLike[str] | IO[str], scope: ScopeFilter | None = None
) -> int:
    """Write every memory in ``scope`` to ``target`` (path or text file); returns the count.

    A path is written to a temporary file and renamed, so a crash never leaves half a backup.
    """
    sf = check_scope_filter(scope)
    if hasattr(target, "write"):
        return _write(store, target, sf)  # type: ignore[arg-type]
    path = Path(target)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            n = _write(store, fh, sf)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return n


def _write(store: MemoryStore, fh: IO[str], scope: ScopeFilter) -> int:
    n = 0
    for mem in store.dump(scope):
        fh.write(json.dumps(mem.to_dict(), ensure_ascii=False) + "\n")
        n += 1
    return n


def _records(fh: IO[str] | IO[bytes], source: str) -> Iterator[tuple[int, Memory]]:
    """(line number, memory) for every non-blank line; the first bad line raises, naming it."""
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
        yield lineno, mem


def import_jsonl(
    store: MemoryStore, source: str | os.PathLike[str] | IO[str], *, progress: Progress | None = None
) -> tuple[int, int]:
    """Load an export into ``store``; ids already present are skipped. Returns ``(imported, skipped)``.

    All or nothing: the whole file is read and every record checked (JSON, field
    types, finite non-negative times, secrets, scope ids) before anything is
    written; the first bad record raises :class:`ValidationError` naming its line.
    """
    from ._secrets import check_no_secrets

    if hasattr(source, "read"):
        name = "<stream>"
        records = list(_records(source, name))  # type: ignore[arg-type]
    else:
        name = str(source)
        try:
            with open(source, "rb") as fh:
                records = list(_records(fh, name))
        except FileNotFoundError:
            raise NotFoundError(f"no such file: {name}", path=name) from None
        except OSError as exc:
            raise ValidationError(f"cannot read the file ({exc.strerror})", path=name, rule="io") from None
    for lineno, mem in records:
        try:
            check_no_secrets(mem.content, mem.metadata, record=mem.id, scope=mem)
        except SecretRejectedError as exc:
            raise SecretRejectedError(exc.pattern, field=exc.field or "content", record=mem.id, path=f"{name}:{lineno}") from None
    total = len(records)
    return store.load([m for _, m in records], progress=(lambda n, _t: progress(n, total)) if progress else None)
