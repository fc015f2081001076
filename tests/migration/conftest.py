"""Fixtures of the migration suite: a seeded vault, and a harness per backend."""

from __future__ import annotations

from pathlib import Path

import pytest

from ._backends import FACTORIES, Harness
from ._vault import make_vault


@pytest.fixture
def vault(agents_root: Path) -> Path:
    """A two-agent vault at schema v1 (notes, wiki, INDEX files, persona, journal, logs)."""
    make_vault(agents_root)
    return agents_root


@pytest.fixture(params=sorted(FACTORIES))
def make_harness(request: pytest.FixtureRequest):
    """``make_harness(root)`` -> a :class:`Harness` for each registered backend."""
    factory = FACTORIES[request.param]

    def make(root: Path) -> Harness:
        return factory(root)

    return make
