from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from atomic_agents.memory import HashingEmbedder, SQLiteMemoryStore
from atomic_agents.vault import Agent, NoteDraft, Vault

TODAY = dt.date(2026, 5, 6)


class CountingEmbedder(HashingEmbedder):
    """The fake embedder, counting the texts it is asked to embed (what 'never re-embedded' means)."""

    def __init__(self) -> None:
        super().__init__()
        self.texts = 0

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        self.texts += len(texts)
        return super().embed_batch(texts)


@pytest.fixture
def embedder() -> CountingEmbedder:
    return CountingEmbedder()


@pytest.fixture
def store(tmp_path: Path, embedder: CountingEmbedder) -> Iterator[SQLiteMemoryStore]:
    s = SQLiteMemoryStore(tmp_path / "memory.db", embedder=embedder, durable=False)
    yield s
    s.close()


@pytest.fixture
def agent(agents_root: Path) -> Agent:
    ag, _ = Vault(agents_root).init_agent("finance", title="Finance Coach")
    return ag


def draft(topic: str, type: str = "feedback", **kw: object) -> NoteDraft:
    base: dict[str, object] = dict(
        type=type, topic=topic, name=f"Note {topic}", description=f"When {topic.replace('_', ' ')} matters",
        sources=["conversation_2026-05-06"], confidence="high", body=f"Body of {topic}.\n", captured=TODAY,
    )
    base.update(kw)
    return NoteDraft(**base)  # type: ignore[arg-type]


def write_raw_notes(agent: Agent, n: int) -> None:
    """``n`` valid note files written straight to disk (as a hand or another tool would)."""
    agent.memory_dir.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (agent.memory_dir / f"reference_topic_{i:05d}.md").write_text(
            "---\nschema_version: 1\n"
            f"name: Topic {i}\ndescription: Where topic {i} lives\ntype: reference\ncaptured: 2026-05-06\n"
            "last_seen: 2026-05-06\nsources: [observation]\nconfidence: low\n---\n"
            f"Topic {i} is documented in system {i % 97}.\n",
            encoding="utf-8",
        )
