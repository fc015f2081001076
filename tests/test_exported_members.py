"""The public names are a contract (users' scripts import them): pin them."""

from __future__ import annotations

import atomic_agents
import atomic_agents.exceptions
import atomic_agents.vault
from atomic_agents import _io, _schema


def test_top_level_exports() -> None:
    assert atomic_agents.__all__ == sorted(atomic_agents.__all__, key=lambda n: (n.startswith("_"), n))
    for name in atomic_agents.__all__:
        assert hasattr(atomic_agents, name), name
    assert atomic_agents.AtomicAgentsError is atomic_agents.exceptions.AtomicAgentsError


def test_vault_exports_sorted_and_present() -> None:
    names = atomic_agents.vault.__all__
    assert names == sorted(names)
    for name in names:
        assert hasattr(atomic_agents.vault, name), name


def test_every_exception_derives_from_the_root() -> None:
    for name in atomic_agents.exceptions.__all__:
        cls = getattr(atomic_agents.exceptions, name)
        assert issubclass(cls, atomic_agents.exceptions.AtomicAgentsError), name
        assert name in (atomic_agents.exceptions.__doc__ or ""), f"{name} missing from the drawn tree"


def test_spec_names() -> None:
    assert _schema.CURRENT_SCHEMA_VERSION == 1
    assert callable(_io.atomic_write)
