"""A module bound on first use: keyword search, listing and the CLI's cheap commands never import numpy.

``np = lazy_module("numpy", globals(), "np")`` at module level (under ``if not
TYPE_CHECKING``, so mypy still sees the real module) stands for numpy until the
first attribute is read; then numpy is imported and the real module replaces the
stand-in in the caller's globals, so later reads cost nothing extra.

>>> ns: dict = {}
>>> ns["m"] = lazy_module("math", ns, "m")
>>> ns["m"].sqrt(4.0), type(ns["m"]).__name__
(2.0, 'module')
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

__all__ = ["lazy_module"]


class _LazyModule:
    __slots__ = ("_alias", "_name", "_namespace")

    def __init__(self, name: str, namespace: dict[str, Any], alias: str) -> None:
        self._name, self._namespace, self._alias = name, namespace, alias

    def __getattr__(self, attr: str) -> Any:
        module = importlib.import_module(self._name)
        if self._namespace.get(self._alias) is self:
            self._namespace[self._alias] = module
        return getattr(module, attr)

    def __repr__(self) -> str:
        return f"<lazy module {self._name!r}>"


def lazy_module(name: str, namespace: dict[str, Any], alias: str) -> ModuleType:
    """A stand-in for module ``name`` that imports it on first attribute access (see the module doc)."""
    return _LazyModule(name, namespace, alias)  # type: ignore[return-value]
