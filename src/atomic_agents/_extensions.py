"""Named extension points: a lower part calls code of a part above it without importing it.

The rooms form a one-way stack (``_format`` below ``vault``/``migration``;
the bridge above ``vault`` and ``memory``), yet the API offers
``Agent.context(...)`` on the vault's ``Agent`` while context assembly lives
in the bridge. The composition root (``atomic_agents/__init__.py``) names the
implementation of each point as a ``"module:attribute"`` string; the lower
part resolves it on first call. This module imports nothing of the package.

>>> provide("example.point", "json:dumps")
>>> resolve("example.point")([1])
'[1]'
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing stays unimported: the CLI's warm path imports this module
if TYPE_CHECKING:
    from typing import Any

__all__ = ["provide", "resolve"]

_IMPL: dict[str, str] = {}


def provide(point: str, target: str) -> None:
    """Wire ``point`` to ``target`` (``"package.module:attribute"``)."""
    _IMPL[point] = target


def resolve(point: str) -> Any:
    """The object wired to ``point``; ``LookupError`` naming it when nothing is."""
    try:
        module, _, attr = _IMPL[point].partition(":")
    except KeyError:
        raise LookupError(f"nothing provides {point!r}") from None
    import importlib

    return getattr(importlib.import_module(module), attr)
