"""The public names of atomic_agents.memory are pinned; the package imports no vault/ATP code."""

from __future__ import annotations

import ast
from pathlib import Path

import atomic_agents.memory as memory

EXPECTED = [
    "MAX_CONTENT_CHARS", "MAX_LEASE_MS", "MAX_LIMIT", "MAX_METADATA_BYTES", "RELEVANCE_FLOOR",
    "SCHEMA_VERSION", "UNSET", "BaseEmbedder", "Embedder", "Fence", "HashingEmbedder", "Health", "Hit",
    "InMemoryMemoryStore", "Lease", "LeaseHeldError", "Memory", "MemoryStore", "MiniLMEmbedder", "PruneReport",
    "SQLiteMemoryStore", "Scope", "ScopeFilter", "StaleFenceError", "check_no_secrets", "content_hash", "default_db_path", "default_embedder",
    "embedder_from_name", "export_jsonl", "find_secret", "import_jsonl", "open_store",
]  # fmt: skip


def test_exported_names_are_pinned_and_sorted() -> None:
    assert memory.__all__ == EXPECTED
    assert memory.__all__ == sorted(memory.__all__, key=lambda n: (not n.isupper(), n))
    for name in memory.__all__:
        obj = getattr(memory, name)
        if callable(obj) and not name.isupper():
            assert obj.__doc__, f"{name} has no docstring"


def test_memory_imports_nothing_from_vault_migration_or_atp() -> None:
    # Checked on the source: the top-level package may import every part, memory/ must not.
    for path in Path(memory.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                names = [("." * node.level) + (node.module or "")]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
                assert not any(part in name for part in ("vault", "migration", "atp")), f"{path.name} imports {name}"


def test_both_backends_satisfy_the_protocol(tmp_path) -> None:  # type: ignore[no-untyped-def]
    fake = memory.InMemoryMemoryStore(embedder=memory.HashingEmbedder())
    real = memory.SQLiteMemoryStore(tmp_path / "m.db", embedder=memory.HashingEmbedder())
    assert isinstance(fake, memory.MemoryStore) and isinstance(real, memory.MemoryStore)
    assert isinstance(memory.MiniLMEmbedder(), memory.Embedder)
    real.close()
