"""Property: migrate then restore gives back every captured byte, whatever the vault holds."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from atomic_agents.migration import FilesystemMigrationBackend

from ._vault import V0_TO_V1, tree, write_script

_names = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="/\\\0."),
                 min_size=1, max_size=12)
_bodies = st.text(max_size=200).map(lambda s: s.replace("\r", "\r\n"))
_files = st.dictionaries(_names, st.binary(max_size=300), max_size=4)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(bodies=st.lists(_bodies, min_size=1, max_size=4), raw=_files, crlf=st.booleans())
def test_must4_migrate_then_restore_is_byte_identical(bodies: list[str], raw: dict[str, bytes], crlf: bool) -> None:
    root = Path(tempfile.mkdtemp(prefix="aa-prop-")) / "agents"
    try:
        nl = "\r\n" if crlf else "\n"
        for i, body in enumerate(bodies):
            path = root / "a" / "memory" / f"feedback_topic_{i}.md"
            path.parent.mkdir(parents=True, exist_ok=True)
            head = nl.join(["---", f"name: Note {i}", "description: d", "type: feedback", "captured: 2026-05-06",
                            "last_seen: 2026-05-06", "sources:", "  - conversation_x", "confidence: high", "---", ""])
            path.write_bytes((head + body).encode("utf-8"))
        for name, data in raw.items():
            p = root / "a" / "raw" / f"{name} x"
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)
        write_script(root, "v0_to_v1.py", V0_TO_V1)
        before = tree(root)
        backend = FilesystemMigrationBackend(root)
        result = backend.run_migration(1, dry_run=False, announce=lambda *a: None)
        assert result.ok, result.error
        for i, body in enumerate(bodies):  # the body survives the migration byte for byte
            assert (root / "a" / "memory" / f"feedback_topic_{i}.md").read_bytes().endswith(body.encode("utf-8"))
        backend.restore_and_audit(result.snapshot_ref)
        assert tree(root) == before
    finally:
        shutil.rmtree(root.parent, ignore_errors=True)
