"""Unit handles: a file on disk, or a frontmatter mapping in memory.

:class:`FileUnit` is what the filesystem backend hands to scripts;
:class:`MemoryUnit` is the in-memory handle the single-file upgrade hook
(:func:`atomic_agents.migration.upgrade_meta`) and non-file backends use. Both
satisfy :class:`~atomic_agents.migration.MigratableUnit`.
"""

from __future__ import annotations

import os
import datetime as dt
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from .._io import atomic_write
from .._text import read_text
from .._format import _frontmatter as fm
from .._format._units import MemoryUnit, _Handle, copy_meta, meta_version
from ._types import UnitChange

__all__ = ["FileUnit", "MemoryUnit", "ParseCache", "copy_meta", "diff_meta", "peek", "version_of"]


def version_of(meta: dict[str, Any]) -> int | None:
    """The unit's schema version (MUST 1): ``0`` when the key is absent (legacy), None when malformed.

    The one rule, shared with the vault (:func:`atomic_agents._format._units.meta_version`).
    """
    return meta_version(meta)


class ParseCache:
    """Parsed documents keyed by path and exact text.

    A run reads each file several times (the version probe, the locked
    enumeration, validation); a file whose bytes did not change is not parsed
    again. Documents are never mutated (handles hand out copies), so sharing is safe.
    """

    def __init__(self) -> None:
        self._docs: dict[str, tuple[str, fm.Document]] = {}

    def parse(self, path: str, text: str) -> fm.Document:
        hit = self._docs.get(path)
        if hit is not None and hit[0] == text:
            return hit[1]
        doc = fm.parse(text, path=path)
        self._docs[path] = (text, doc)
        return doc

    def clear(self) -> None:
        self._docs.clear()


class FileUnit(_Handle):
    """A note or wiki page file. ``unit_id`` is its resolved absolute path.

    Reads are cached (one parse per unit per run). On a dry-run handle
    ``write_frontmatter`` is a no-op (spec handle table): the file is never
    touched and a later ``read_frontmatter`` returns the frontmatter unchanged.
    A dry run previews a chain of scripts in the runner, not through this handle.

    ``writer`` lets the backend group-commit a run's writes (see ``_commit``):
    each write is still temp + fsync + rename (MUST 3), the fsync and rename
    run on a pool, and reads of this handle see the new text at once.
    """

    __slots__ = ("_unit_id", "_unit_type", "_dry_run", "_doc", "_text", "_writer", "_cache", "_inflight", "_root")

    def __init__(
        self,
        path: str | Path,
        unit_type: str,
        *,
        dry_run: bool = True,
        writer: Callable[[str, bytes], Future[None]] | None = None,
        cache: ParseCache | None = None,
        root: str | os.PathLike[str] | None = None,
    ) -> None:
        self._unit_id = os.fspath(path)
        # Writes stay inside the agents root (the unit's own folder when no root is given).
        self._root = os.path.dirname(self._unit_id) if root is None else root
        self._unit_type = unit_type
        self._dry_run = dry_run
        self._doc: fm.Document | None = None
        self._text: str | None = None
        self._writer = writer
        self._inflight: Future[None] | None = None
        self._cache = cache

    @property
    def path(self) -> Path:
        return Path(self._unit_id)

    def _document(self) -> fm.Document:
        if self._doc is None:
            if self._text is None:
                self._text = read_text(self._unit_id)  # not UTF-8: EncodingError, an unparseable unit
            if self._cache is not None:
                self._doc = self._cache.parse(self._unit_id, self._text)
            else:
                self._doc = fm.parse(self._text, path=self._unit_id)
        return self._doc

    def read_frontmatter(self) -> dict[str, Any]:
        """A deep copy of the frontmatter (raises ``FrontmatterParseError`` with the line)."""
        return copy_meta(self._document().meta)

    def peek_frontmatter(self) -> dict[str, Any]:
        """The frontmatter without a copy, for the runner's own read-only checks. Never mutate it."""
        return self._document().meta

    def write_frontmatter(self, meta: dict[str, Any]) -> None:
        """Smallest-diff render + atomic write (MUST 3); a no-op on a dry-run handle."""
        if not isinstance(meta, dict):
            raise TypeError(f"write_frontmatter expects a dict, got {type(meta).__name__}")
        if self._dry_run:
            return
        doc = self._document()
        text = fm.render(doc, meta)
        if self._writer is None:
            atomic_write(self._unit_id, text, root=self._root)
        else:
            if self._inflight is not None:
                self._inflight.result()  # two writes to one file land in order
            self._inflight = self._writer(self._unit_id, text.encode("utf-8"))
        # The next read parses exactly the bytes written, so MUST 7 checks what the file holds.
        self._text, self._doc = text, None


def peek(unit: Any) -> dict[str, Any]:
    """A unit's frontmatter for read-only checks: no copy when the handle offers ``peek_frontmatter``."""
    fast = getattr(unit, "peek_frontmatter", None)
    return fast() if fast is not None else unit.read_frontmatter()


def diff_meta(
    unit_id: str, unit_type: str, before: dict[str, Any], after: dict[str, Any], scripts: tuple[str, ...] = ()
) -> UnitChange:
    """Keys added, removed, renamed (a removed key whose value reappears under a new key) and changed."""
    removed = [k for k in before if k not in after]
    added = [k for k in after if k not in before]
    renamed: list[tuple[str, str]] = []
    for old in list(removed):
        for new in added:
            if before[old] == after[new]:
                renamed.append((str(old), str(new)))
                removed.remove(old)
                added.remove(new)
                break
    changed = [k for k in before if k in after and not _same(before[k], after[k])]
    return UnitChange(
        unit_id=unit_id,
        unit_type=unit_type,
        added=tuple(map(str, added)),
        removed=tuple(map(str, removed)),
        renamed=tuple(renamed),
        changed=tuple(map(str, changed)),
        scripts=scripts,
    )


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b
