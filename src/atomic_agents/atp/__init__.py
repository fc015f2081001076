"""The ATP ledger: typed goal-lifecycle records over a memory store, and a deterministic router.

>>> from atomic_agents.memory import InMemoryMemoryStore, HashingEmbedder
>>> from atomic_agents.atp import Identity, Ledger
>>> ledger = Ledger(InMemoryMemoryStore(embedder=HashingEmbedder()), Identity("acme", "acme/web", "dispatcher"))
>>> g = ledger.start("Add a retry to the billing deploy", requester="alice")
>>> ledger.decide(g.goal_id).next_stage
'plan'

Importing this package loads no pydantic: models load on the first write.
"""

from __future__ import annotations

from ._identity import Identity, load_team_config, resolve_identity
from ._kinds import Kind, Mode, PackageType, RecordStatus, Role, Stage, State, VerdictStatus
from ._ledger import ContinueResult, Ledger, RecallResult, Written, parse_as_of
from ._router import Decision, decide
from ._view import RecordView, view_of

__all__ = [
    "ContinueResult",
    "Decision",
    "Identity",
    "Kind",
    "Ledger",
    "Mode",
    "PackageType",
    "RecallResult",
    "RecordStatus",
    "RecordView",
    "Role",
    "Stage",
    "State",
    "VerdictStatus",
    "Written",
    "decide",
    "load_team_config",
    "parse_as_of",
    "resolve_identity",
    "view_of",
]
