"""The single-file upgrade hook the vault calls when it writes to an older file."""

from __future__ import annotations

from pathlib import Path

import pytest

from atomic_agents.exceptions import MigrationError
from atomic_agents.migration import MemoryUnit, MigratableUnit, upgrade_meta

from ._vault import V0_TO_V1, V1_TO_V2_GENTLE, write_script

LEGACY = {"name": "Debt order", "description": "d", "type": "feedback", "sources": ["x"], "confidence": "high"}


def test_upgrade_meta_runs_the_chain_in_memory(agents_root: Path) -> None:
    write_script(agents_root, "v0_to_v1.py", V0_TO_V1)
    write_script(agents_root, "v1_to_v2.py", V1_TO_V2_GENTLE)
    meta = dict(LEGACY)
    out = upgrade_meta(agents_root, meta, unit_type="memory", unit_id="a/memory/feedback_x.md", to_version=2)
    assert out["schema_version"] == 2 and out["reviewed"] is False and out["name"] == "Debt order"
    assert meta == LEGACY  # the caller's mapping is not mutated
    assert list(agents_root.rglob("*.md")) == []  # nothing written to disk


def test_upgrade_meta_defaults_to_the_current_version(agents_root: Path) -> None:
    write_script(agents_root, "v0_to_v1.py", V0_TO_V1)
    assert upgrade_meta(agents_root, LEGACY, unit_type="wiki", unit_id="w")["schema_version"] == 1


def test_upgrade_meta_at_target_returns_a_copy(agents_root: Path) -> None:
    meta = {**LEGACY, "schema_version": 1}
    out = upgrade_meta(agents_root, meta, unit_type="memory", unit_id="x", to_version=1)
    assert out == meta and out is not meta


@pytest.mark.parametrize(
    ("scripts", "meta", "match"),
    [
        ({}, LEGACY, "missing migration script"),
        ({"v0_to_v1.py": V0_TO_V1.replace('meta["schema_version"] = 1', 'meta["schema_version"] = 0')}, LEGACY,
         "did not bring"),
        ({"v0_to_v1.py": V0_TO_V1.replace("meta = unit.read_frontmatter()", "raise KeyError('sources')")}, LEGACY,
         "KeyError"),
        ({}, {**LEGACY, "schema_version": "1"}, "not a schema version"),
        ({}, {**LEGACY, "schema_version": 5}, "forward only"),
    ],
    ids=["missing", "no-bump", "raises", "bad-version", "newer"],
)
def test_upgrade_meta_refuses_a_missing_or_broken_chain(agents_root: Path, scripts: dict, meta: dict, match: str) -> None:
    for name, src in scripts.items():
        write_script(agents_root, name, src)
    with pytest.raises(MigrationError, match=match):
        upgrade_meta(agents_root, meta, unit_type="memory", unit_id="x")


def test_memory_unit_is_a_migratable_unit() -> None:
    unit = MemoryUnit("id-1", "memory", {"a": 1}, dry_run=True)
    assert isinstance(unit, MigratableUnit)
    unit.write_frontmatter({"a": 2})
    # A dry-run write is a no-op for the handle's reads too (spec handle table).
    assert unit.read_frontmatter() == {"a": 1} and unit.pending_meta() == {"a": 2}
    real = MemoryUnit("id-2", "memory", {"a": 1})
    real.write_frontmatter({"a": 2})
    assert real.read_frontmatter() == {"a": 2} and real.original_meta() == {"a": 1}
