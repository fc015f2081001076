"""The bridge between the vault and the memory store (above both; neither imports it).

* the mirror: every note and wiki page as one memory, keyed by path and a digest
  of the file (:func:`sync`, :class:`MirrorHook`, :func:`search`);
* context assembly: the system prompt an agent runs with, within its token
  budget (:func:`context`, also ``Agent.context(...)``).

>>> from atomic_agents.vault import Vault
>>> from atomic_agents.memory import open_store
>>> from atomic_agents.bridge import MirrorHook, context, search, sync
>>> store = open_store(agents_root="agents")                            # doctest: +SKIP
>>> vault = Vault("agents", write_hooks=[MirrorHook(store)])            # doctest: +SKIP
>>> sync(vault.agent("finance"), store).unchanged                       # doctest: +SKIP
12
>>> print(context(vault.agent("finance"), store, query="debt").text)    # doctest: +SKIP

The mirror's names load the memory store (numpy) on first use, so a context
without a query or goal stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._context import Context, ContextPart, DroppedPart, context
from ._tokens import count_tokens, tokenizer_name

if TYPE_CHECKING:
    from ._mirror import MIRROR_USER, LazyMirrorHook, MirrorHook, NoteHit, SyncReport, attach, mirror_scope, search, sync

__all__ = [
    "Context",
    "ContextPart",
    "DroppedPart",
    "LazyMirrorHook",
    "MIRROR_USER",
    "MirrorHook",
    "NoteHit",
    "SyncReport",
    "attach",
    "context",
    "count_tokens",
    "mirror_scope",
    "search",
    "sync",
    "tokenizer_name",
]

_LAZY = {"LazyMirrorHook", "MIRROR_USER", "MirrorHook", "NoteHit", "SyncReport", "attach", "mirror_scope", "search", "sync"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from . import _mirror

        return getattr(_mirror, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
