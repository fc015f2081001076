"""Builders for migration tests: valid notes and wiki pages, legacy files, scripts, tree digests."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

NOTE = """\
---
{version}name: {name}
description: "When {topic} matters"
type: {type}
captured: 2026-05-06
last_seen: 2026-05-06
sources:
  - conversation_2026-05-06  # where it came from
confidence: high
tags: [money, {topic}]
---
# {name}

Body of {topic}: kept byte-for-byte.
"""

WIKI = """\
---
{version}name: {name}
description: How {topic} works
type: wiki_page
captured: 2026-05-06
last_seen: 2026-05-07
sources:
  - raw/{topic}.md
provenance: distilled
confidence: medium
related:
  - feedback_{topic}.md
---
Wiki text about {topic}.
"""


def write_note(root: Path, agent: str, topic: str, *, version: int | None = 1, type: str = "feedback") -> Path:
    path = root / agent / "memory" / f"{type}_{topic}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    v = "" if version is None else f"schema_version: {version}\n"
    path.write_text(NOTE.format(version=v, name=f"Note {topic}", topic=topic, type=type), encoding="utf-8")
    return path


def write_wiki(root: Path, agent: str, topic: str, *, version: int | None = 1) -> Path:
    path = root / agent / "wiki" / f"{topic}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    v = "" if version is None else f"schema_version: {version}\n"
    path.write_text(WIKI.format(version=v, name=f"Wiki {topic}", topic=topic), encoding="utf-8")
    return path


def make_vault(root: Path, *, notes: int = 4, wiki: int = 2, version: int | None = 1, agents: tuple[str, ...] = ("caldwell", "nova")) -> list[Path]:
    """Notes and wiki pages for each agent, plus INDEX files, persona, a log and a journal."""
    paths = []
    for agent in agents:
        for i in range(notes):
            paths.append(write_note(root, agent, f"topic_{i}", version=version))
        for i in range(wiki):
            paths.append(write_wiki(root, agent, f"concept_{i}", version=version))
        (root / agent / "memory" / "INDEX.md").write_text(f"# {agent} — Memory Index\n", encoding="utf-8")
        (root / agent / "memory" / "INDEX_decisions.md").write_text("# decisions\n", encoding="utf-8")
        (root / agent / "persona").mkdir(parents=True, exist_ok=True)
        (root / agent / "persona" / "IDENTITY.md").write_text(f"# IDENTITY — {agent}\n", encoding="utf-8")
        (root / agent / "journal" / "2026-05").mkdir(parents=True, exist_ok=True)
        (root / agent / "journal" / "2026-05" / "2026-05-06.md").write_text("# journal\n", encoding="utf-8")
        (root / agent / "log" / "2026-05").mkdir(parents=True, exist_ok=True)
        (root / agent / "log" / "2026-05" / "2026-05-06.jsonl").write_text('{"ts": "x"}\n', encoding="utf-8")
    return paths


V0_TO_V1 = '''
from atomic_agents.migration import MigratableUnit

FROM_VERSION = 0
TO_VERSION = 1


def applies_to(unit: MigratableUnit) -> bool:
    return "schema_version" not in unit.read_frontmatter()


def migrate(unit: MigratableUnit) -> dict:
    meta = unit.read_frontmatter()
    meta["schema_version"] = 1
    unit.write_frontmatter(meta)
    return {"changes": ["added schema_version: 1"]}
'''

# The spec's own example script.
V1_TO_V2_SPEC = '''
from atomic_agents.migration import MigratableUnit

FROM_VERSION = 1
TO_VERSION = 2


def applies_to(unit: MigratableUnit) -> bool:
    return unit.read_frontmatter().get("schema_version") == FROM_VERSION


def migrate(unit: MigratableUnit) -> dict:
    meta = unit.read_frontmatter()
    changes = []
    meta["schema_version"] = TO_VERSION
    changes.append("schema_version 1 -> 2")
    if "sources" in meta:
        meta["evidence"] = meta.pop("sources")
        changes.append("renamed sources -> evidence")
    if "provenance" not in meta:
        meta["provenance"] = "v1_migrated"
        changes.append("added provenance: v1_migrated")
    unit.write_frontmatter(meta)
    return {"unit_id": unit.unit_id, "changes": changes}
'''

# A v1 -> v2 that stays valid under the note/wiki validators (only an optional key added).
V1_TO_V2_GENTLE = '''
FROM_VERSION = 1
TO_VERSION = 2


def applies_to(unit):
    return unit.read_frontmatter().get("schema_version") == 1


def migrate(unit):
    meta = unit.read_frontmatter()
    meta["schema_version"] = 2
    meta["reviewed"] = False
    unit.write_frontmatter(meta)
    return {"changes": ["added reviewed"]}
'''


def write_script(root: Path, name: str, source: str) -> Path:
    path = root / "_migrations" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return path


def tree(root: Path) -> dict[str, bytes | str]:
    """Every file under ``root`` (dot-files included) except ``_migrations/`` and the lock: bytes or link target."""
    out: dict[str, bytes | str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        if rel_dir == "_migrations" or rel_dir.startswith("_migrations" + os.sep):
            dirnames[:] = []
            continue
        for d in list(dirnames):
            full = os.path.join(dirpath, d)
            if os.path.islink(full):
                out[os.path.normpath(os.path.join(rel_dir, d))] = "-> " + os.readlink(full)
        for f in filenames:
            rel = os.path.normpath(os.path.join(rel_dir, f))
            # lock files, created on demand; the plan file is the lock's companion (a kill may leave it,
            # and it is trusted only while its writer's pid is alive)
            if rel in (".migration.lock", ".migration.lock.plan") or f == ".agent.lock":
                continue
            full = os.path.join(dirpath, f)
            out[rel] = ("-> " + os.readlink(full)) if os.path.islink(full) else Path(full).read_bytes()
    return out
