"""The schema version of Atomic Agent units (notes and wiki pages).

``CURRENT_SCHEMA_VERSION`` is the single source of truth: readers accept any
version up to it, writers always write it, and the migration runner treats it
as the version an empty vault is at (spec: Schema migration, MUST 1).
"""

from __future__ import annotations

CURRENT_SCHEMA_VERSION: int = 1

#: Files with no ``schema_version`` key at all predate the field: version 0.
LEGACY_SCHEMA_VERSION: int = 0
