"""What the vault and the migration framework share about a unit: its version rule and the in-memory handle.

:func:`meta_version` is the one schema-version rule (spec MUST 1).
:class:`MemoryUnit` is the in-memory handle the single-file upgrade
(:func:`atomic_agents.migration.upgrade_meta`) and non-file backends use; it
satisfies :class:`~atomic_agents.migration.MigratableUnit`.
"""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

from .._schema import LEGACY_SCHEMA_VERSION

__all__ = ["MemoryUnit", "copy_meta", "meta_version"]


def meta_version(meta: dict[str, Any]) -> int | None:
    """The unit's schema version (spec MUST 1), the one rule the vault and the migration runner share.

    No ``schema_version`` key at all: a legacy file, version ``0``. The key
    present but not a non-negative integer (``"1"``, ``1.5``, ``null``,
    ``true``, ``-1``): malformed, ``None``, left out of the vault's minimum
    and reported, never read as legacy.

    >>> meta_version({}), meta_version({"schema_version": 1}), meta_version({"schema_version": "1"})
    (0, 1, None)
    """
    if "schema_version" not in meta:
        return LEGACY_SCHEMA_VERSION
    v = meta["schema_version"]
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


def copy_meta(value: Any) -> Any:
    """Deep copy of YAML-shaped data (dicts, lists, immutable scalars and dates); ~10x faster than deepcopy."""
    if isinstance(value, dict):
        return {k: copy_meta(v) for k, v in value.items()}
    if isinstance(value, list):
        return [copy_meta(v) for v in value]
    if isinstance(value, (str, int, float, bool, type(None), dt.date)):
        return value
    return copy.deepcopy(value)


class _Handle:
    """The read-only identity every MigratableUnit handle exposes (set once, in __init__)."""

    _unit_id: str
    _unit_type: str
    _dry_run: bool

    @property
    def unit_id(self) -> str:
        return self._unit_id

    @property
    def unit_type(self) -> str:
        return self._unit_type

    @property
    def dry_run(self) -> bool:
        return self._dry_run


class MemoryUnit(_Handle):
    """A unit held in memory: writes replace the held mapping, nothing touches disk.

    On a dry-run handle a write changes nothing a read returns (spec handle
    table); :meth:`pending_meta` says what it was given.

    >>> u = MemoryUnit("note-1", "memory", {"name": "x"})
    >>> u.write_frontmatter({"name": "y", "schema_version": 1}); u.read_frontmatter()["name"]
    'y'
    >>> d = MemoryUnit("note-2", "memory", {"name": "x"}, dry_run=True)
    >>> d.write_frontmatter({"name": "y"}); d.read_frontmatter()["name"], d.pending_meta()["name"]
    ('x', 'y')
    """

    __slots__ = ("_unit_id", "_unit_type", "_dry_run", "_meta", "_pending", "_original")

    def __init__(self, unit_id: str, unit_type: str, meta: dict[str, Any], *, dry_run: bool = False) -> None:
        self._unit_id = unit_id
        self._unit_type = unit_type
        self._dry_run = dry_run
        self._meta = copy_meta(meta)
        self._original = copy_meta(meta)
        self._pending: dict[str, Any] | None = None

    def read_frontmatter(self) -> dict[str, Any]:
        return copy_meta(self._meta)

    def peek_frontmatter(self) -> dict[str, Any]:
        """The held mapping without a copy (read-only use)."""
        return self._meta

    def write_frontmatter(self, meta: dict[str, Any]) -> None:
        if not isinstance(meta, dict):
            raise TypeError(f"write_frontmatter expects a dict, got {type(meta).__name__}")
        if self._dry_run:
            self._pending = copy_meta(meta)
        else:
            self._meta = copy_meta(meta)

    def original_meta(self) -> dict[str, Any]:
        return self._original

    def pending_meta(self) -> dict[str, Any] | None:
        """What the last dry-run write was given (reads never see it); None if nothing."""
        return self._pending
