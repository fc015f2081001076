"""Import the SDK's server modules without its package front doors.

``import mcp.server.lowlevel`` runs ``mcp/__init__.py`` (which imports the whole
client: sessions, session groups, the stdio client) and ``mcp/server/__init__.py``
(which imports ``MCPServer``, ex-FastMCP, with its resource, prompt and tool
managers). The server needs neither; on this machine they are about a tenth of
the time to the first answered ``initialize`` (``bench/bench_mcp.py``).

:func:`import_server_modules` puts the two packages in ``sys.modules`` unexecuted
(a real module made from the package's own spec, so submodules resolve as
usual) and imports the submodules the server uses. Each package completes
itself on first use: any attribute the package's ``__init__`` would have set
(``from mcp import ClientSession``) runs that ``__init__`` then, so nothing
that imports ``mcp`` later in the process sees a difference. If the SDK's layout
ever makes this fail, everything it touched is dropped and the SDK is imported
the ordinary way.

Only the ``atomic-agents serve`` process does this (``mcp/_entry.py``); a host
application calling :func:`atomic_agents.mcp.serve_stdio` imports the SDK as usual.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import sys
import types
from typing import Any

__all__ = ["LAZY_PACKAGES", "SERVER_MODULES", "import_server_modules"]

log = logging.getLogger("atomic_agents.mcp")

LAZY_PACKAGES = ("mcp", "mcp.server")
SERVER_MODULES = ("mcp_types", "mcp.server.lowlevel", "mcp.server.stdio", "mcp.shared.exceptions")


def _deferred(name: str) -> types.ModuleType | None:
    """Package ``name`` as a module object whose ``__init__`` runs on the first missing attribute."""
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return None
    module = importlib.util.module_from_spec(spec)
    loader = spec.loader

    def __getattr__(attr: str) -> Any:
        if attr.startswith("__"):  # dunder probes (copy, pickle, inspect) must not run the package
            raise AttributeError(attr)
        module.__dict__.pop("__getattr__", None)
        loader.exec_module(module)  # the package's own __init__, in its own namespace
        return getattr(module, attr)

    module.__dict__["__getattr__"] = __getattr__
    return module


def import_server_modules() -> bool:
    """Import :data:`SERVER_MODULES` skipping the package ``__init__`` files; ``True`` if they were skipped."""
    if any(name in sys.modules for name in LAZY_PACKAGES):
        return False  # already imported (a host process): nothing to save
    placed = []
    try:
        for name in LAZY_PACKAGES:
            module = _deferred(name)
            if module is None:
                raise ImportError(f"{name} is not a package")
            sys.modules[name] = module
            placed.append(name)
            parent, _, child = name.rpartition(".")
            if parent:
                setattr(sys.modules[parent], child, module)
        for name in SERVER_MODULES:
            importlib.import_module(name)
    except Exception as exc:  # an SDK layout this does not know: import it the ordinary way
        log.debug("lean SDK import failed (%s); importing mcp normally", type(exc).__name__)
        for name in [n for n in sys.modules if n in placed or n.startswith(tuple(f"{p}." for p in LAZY_PACKAGES))]:
            del sys.modules[name]
        for name in SERVER_MODULES:
            importlib.import_module(name)
        return False
    return True
