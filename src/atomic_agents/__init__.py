"""atomic-agents: a local-first memory and coordination substrate for AI agents.

>>> from atomic_agents import Vault, NoteDraft
>>> agent, _ = Vault("agents").init_agent("finance")                # doctest: +SKIP
>>> agent.new_note(NoteDraft(type="user", topic="risk_tolerance", name="Risk tolerance",
...     description="Moderately risk-averse", sources=["conversation_2026-05-06"],
...     confidence="high"))                                          # doctest: +SKIP
"""

from __future__ import annotations

from ._schema import CURRENT_SCHEMA_VERSION
from .exceptions import (
    AtomicAgentsError,
    ConflictError,
    LockBusyError,
    NotFoundError,
    SchemaVersionError,
    ValidationError,
)
from .vault import Agent, NoteDraft, Vault, WikiDraft

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "AtomicAgentsError",
    "CURRENT_SCHEMA_VERSION",
    "ConflictError",
    "LockBusyError",
    "NotFoundError",
    "NoteDraft",
    "SchemaVersionError",
    "ValidationError",
    "Vault",
    "WikiDraft",
    "__version__",
]
