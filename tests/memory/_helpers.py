"""Test helpers shared by the memory tests."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from atomic_agents.memory import HashingEmbedder


class CountingEmbedder(HashingEmbedder):
    """The fake embedder, counting the texts it was asked to embed."""

    def __init__(self, dimension: int = 256) -> None:
        super().__init__(dimension)
        self.calls: list[str] = []

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.extend(texts)
        return super().embed_batch(texts)
