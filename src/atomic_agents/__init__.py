"""atomic-agents: a local-first memory and coordination substrate for AI agents.

>>> from atomic_agents import Vault, NoteDraft
>>> agent, _ = Vault("agents").init_agent("finance")                # doctest: +SKIP
>>> agent.new_note(NoteDraft(type="user", topic="risk_tolerance", name="Risk tolerance",
...     description="Moderately risk-averse", sources=["conversation_2026-05-06"],
...     confidence="high"))                                          # doctest: +SKIP
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing stays unimported: the CLI's warm path (cli/__init__.py) imports this package

from ._extensions import provide
from ._schema import CURRENT_SCHEMA_VERSION
from .exceptions import (
    AtomicAgentsError,
    ConflictError,
    LockBusyError,
    NotFoundError,
    SchemaVersionError,
    ValidationError,
)

if TYPE_CHECKING:
    from .vault import Agent, NoteDraft, Vault, WikiDraft

__version__ = "0.1.0"

# The composition root wires the parts that may not import each other (see _extensions).
provide("agent.context", "atomic_agents.bridge:context")
provide("vault.mirror_check", "atomic_agents.bridge._mirror:check")

# The vault (pydantic models, YAML) loads on first use, not on `import atomic_agents`:
# `atomic-agents --help`, `--version` and the memory commands never pay for it.
_LAZY = {"Agent", "NoteDraft", "Vault", "WikiDraft"}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        from . import vault

        return getattr(vault, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | _LAZY)

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
