"""The rooms form a one-way stack, checked on the source (lazy imports inside functions included).

    _format  (frontmatter, models, validators, the script chain)  <- vault, migration
    vault    <- bridge -> memory                                 (atp, mcp, cli above)

A part never imports one above it or beside it; a dotted module name in a
string (``importlib.import_module("atomic_agents.bridge")``) counts as an import.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import atomic_agents

PKG = Path(atomic_agents.__file__).parent
ROOMS = ("_format", "vault", "migration", "memory", "atp", "bridge", "mcp", "cli")

FORBIDDEN = {
    "_format": {"vault", "migration", "memory", "atp", "bridge", "mcp", "cli"},
    "vault": {"memory", "atp", "bridge", "migration", "mcp", "cli"},
    "memory": {"vault", "atp", "bridge", "migration", "_format", "mcp", "cli"},
    "migration": {"vault", "memory", "atp", "bridge", "mcp", "cli"},
}


def imported_rooms(path: Path) -> set[tuple[str, int]]:
    """(room, line) of every ``atomic_agents.<room>`` the file imports, relative or absolute."""
    package = ["atomic_agents", *path.parent.relative_to(PKG).parts]
    out: set[tuple[str, int]] = set()

    def add(dotted: str, line: int) -> None:
        parts = dotted.split(".")
        if len(parts) > 1 and parts[0] == "atomic_agents" and parts[1] in ROOMS:
            out.add((parts[1], line))

    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for a in node.names:
                add(a.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *(node.module.split(".") if node.module else [])])
            add(module, node.lineno)
            if node.module is None:  # from .. import vault
                for a in node.names:
                    add(f"{module}.{a.name}", node.lineno)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("atomic_agents."):
            add(node.value.split(":")[0], node.lineno)
    return out


@pytest.mark.parametrize("room", sorted(FORBIDDEN))
def test_a_room_never_imports_one_above_or_beside_it(room: str) -> None:
    files = sorted((PKG / room).rglob("*.py"))
    assert files, room
    bad = [f"{p.relative_to(PKG)}:{line} imports {other}/"
           for p in files for other, line in sorted(imported_rooms(p)) if other in FORBIDDEN[room]]
    assert bad == []


def test_the_checker_sees_relative_lazy_and_string_imports(tmp_path: Path) -> None:
    probe = PKG / "vault" / "_layout_probe_tmp.py"
    probe.write_text("def f():\n    from ..bridge import context\n    from .. import memory\n"
                     "    import importlib\n    importlib.import_module('atomic_agents.atp')\n")
    try:
        assert {r for r, _ in imported_rooms(probe)} == {"bridge", "memory", "atp"}
    finally:
        probe.unlink()


def test_public_names_stay_where_users_import_them() -> None:
    import atomic_agents.migrate
    from atomic_agents import AtomicAgentsError, _io, _schema
    from atomic_agents.migration import LoadedScript, MemoryUnit, MigratableUnit, MigrationPlan, upgrade_meta
    from atomic_agents.vault import NoteMeta, parse, read, validate_note_meta, validate_wiki_meta

    assert callable(atomic_agents.migrate.main)
    assert isinstance(_schema.CURRENT_SCHEMA_VERSION, int) and callable(_io.atomic_write)
    assert issubclass(AtomicAgentsError, Exception) and MigratableUnit and NoteMeta
    assert MemoryUnit("u", "memory", {"name": "x"}).read_frontmatter() == {"name": "x"}
    assert all(callable(f) for f in (upgrade_meta, parse, read, validate_note_meta, validate_wiki_meta))
    assert LoadedScript.__module__ == MigrationPlan.__module__ == "atomic_agents._format._types"
