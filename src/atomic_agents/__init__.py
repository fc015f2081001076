"""atomic-agents: a local-first memory and coordination substrate for AI agents."""

from __future__ import annotations

from ._schema import CURRENT_SCHEMA_VERSION
from .exceptions import AtomicAgentsError

__version__ = "0.1.0"

__all__ = ["CURRENT_SCHEMA_VERSION", "AtomicAgentsError", "__version__"]
