from __future__ import annotations

import datetime as dt
import hashlib
from pathlib import Path

import pytest

from atomic_agents.vault import Agent, NoteDraft, Vault

TODAY = dt.date(2026, 5, 6)


@pytest.fixture
def vault(agents_root: Path) -> Vault:
    return Vault(agents_root)


@pytest.fixture
def agent(vault: Vault) -> Agent:
    ag, _ = vault.init_agent("finance", title="Finance Coach")
    return ag


def draft(topic: str = "debt_priority_order", type: str = "feedback", **kw: object) -> NoteDraft:
    base: dict[str, object] = dict(
        type=type,
        topic=topic,
        name=f"Note {topic}",
        description=f"When {topic.replace('_', ' ')} matters",
        sources=["conversation_2026-05-06"],
        confidence="high",
        body=f"Body of {topic}.\n",
        captured=TODAY,
    )
    base.update(kw)
    return NoteDraft(**base)  # type: ignore[arg-type]


def tree_digest(root: Path) -> dict[str, str]:
    """Every file under root with its content hash (for 'left exactly as it was')."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.name.endswith(".lock")
    }
